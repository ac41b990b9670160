//! Built-in tools. Each module declares its contract next to its handler; [`builtins`] is the
//! one list of them.

mod echo;
mod sleep;

use crate::registry::ToolRegistryBuilder;

/// A builder holding every built-in tool.
pub fn builtins() -> ToolRegistryBuilder {
    ToolRegistryBuilder::new()
        .register(echo::contract(), echo::Echo)
        .register(sleep::contract(), sleep::Sleep)
}

#[cfg(test)]
mod tests;

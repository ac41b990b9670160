//! Built-in tools. Each module declares its contract next to its handler; [`builtins`] is the
//! one list of them.

mod echo;
mod fs_edit;
mod fs_list;
mod fs_read;
mod fs_search;
mod fs_write;
mod http_request;
mod memory;
mod notify_owner;
mod shell;
mod sleep;
pub(crate) mod tool_search;
mod web_fetch;

pub use fs_search::glob_match;
pub use memory::register_memory;
pub use tool_search::unwrap_call_tool;

use crate::registry::ToolRegistryBuilder;

/// Adds `http_request` and `web_fetch`; `allow_hosts` may be reached even on internal addresses.
pub fn register_http(
    builder: ToolRegistryBuilder,
    allow_hosts: Vec<String>,
) -> ToolRegistryBuilder {
    builder
        .register(
            http_request::contract(),
            http_request::HttpRequest {
                allow_hosts: allow_hosts.clone(),
            },
        )
        .register(
            web_fetch::contract(),
            web_fetch::WebFetch(http_request::HttpRequest { allow_hosts }),
        )
}

pub use shell::ShellSandbox;

/// Adds `shell`, confined by `sandbox` (`None`: `tools.shell.sandbox = "none"`).
pub fn register_shell(
    builder: ToolRegistryBuilder,
    sandbox: Option<ShellSandbox>,
) -> ToolRegistryBuilder {
    builder.register(shell::contract(), shell::Shell { sandbox })
}

/// A builder holding every built-in tool that needs no outside state.
pub fn builtins() -> ToolRegistryBuilder {
    ToolRegistryBuilder::new()
        .register(echo::contract(), echo::Echo)
        .register(fs_edit::contract(), fs_edit::FsEdit)
        .register(fs_list::contract(), fs_list::FsList)
        .register(fs_search::glob_contract(), fs_search::FsGlob)
        .register(fs_search::grep_contract(), fs_search::FsGrep)
        .register(fs_read::contract(), fs_read::FsRead)
        .register(fs_write::contract(), fs_write::FsWrite)
        .register(notify_owner::contract(), notify_owner::NotifyOwner)
        .register(sleep::contract(), sleep::Sleep)
}

#[cfg(test)]
mod tests;

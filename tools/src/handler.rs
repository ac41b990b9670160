//! What runs behind a tool: the [`ToolHandler`] trait every tool implements (built-ins, MCP
//! tools, the daemon's own), and what a handler's own safety check may say.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutcome> + Send + 'a>>;

/// The code behind a tool. Arguments arrive already validated against the schema.
pub trait ToolHandler: Send + Sync + 'static {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a>;

    /// Consulted only for tools declared `Concurrency::FromArgs`.
    fn concurrency_safe_for(&self, _args: &Value) -> bool {
        false
    }

    /// For tools whose effect depends on the call (`http_request`: GET reads, POST acts):
    /// the side effect and idempotency of this call, overriding the contract's.
    fn effect_for(&self, _args: &Value) -> Option<(crate::contract::SideEffect, bool)> {
        None
    }

    /// Consulted only for tools declared `returns_untrusted: Applies::PerCall`: whether this
    /// call's result is someone else's words (a file read under an untrusted root).
    fn returns_untrusted_for(&self, _args: &Value, _ctx: &ExecutionContext) -> bool {
        false
    }

    /// Consulted only for tools declared `sends_out: Applies::PerCall`: whether this call
    /// can carry data to someone the owner has not allowed (`http_request` to a host not in
    /// `tools.http.trusted_hosts`). Anything it cannot tell counts as sending out.
    fn sends_out_for(&self, _args: &Value) -> bool {
        true
    }

    /// The safety check of this call (pipeline step 3), before policy. Most tools have
    /// none; the shell tool classifies its command.
    fn safety(&self, _args: &Value, _ctx: &ExecutionContext) -> Safety {
        Safety::Allow
    }
}

/// What a tool's own safety check says about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Safety {
    Allow,
    /// Needs the owner's confirmation, whatever the policy says (unless it denies).
    Confirm(String),
    /// Never runs and is never offered for confirmation.
    Block(String),
}

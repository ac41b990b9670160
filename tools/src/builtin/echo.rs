//! `echo`: returns its text. Useful to check the pipeline end to end, and as the smallest
//! example of a tool.

use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::handler::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract::read_only(
        "echo",
        "Return the given text unchanged.",
        json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to return."}},
            "required": ["text"],
            "additionalProperties": false
        }),
    )
    .group("group:debug")
    .hint("repeat print test")
}

pub(super) struct Echo;

impl ToolHandler for Echo {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = args.get("text").cloned().unwrap_or(Value::Null);
            ToolOutcome::ok(json!({ "text": text }))
        })
    }
}

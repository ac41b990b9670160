//! `echo`: returns its text. Useful to check the pipeline end to end, and as the smallest
//! example of a tool.

use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Concurrency, SideEffect, Tier, ToolContract, ToolSource};
use crate::registry::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract {
        name: "echo".into(),
        description: "Return the given text unchanged.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to return."}},
            "required": ["text"],
            "additionalProperties": false
        }),
        side_effect: SideEffect::ReadOnly,
        idempotent: true,
        concurrency: Concurrency::Safe,
        tier: Tier::Core,
        source: ToolSource::Builtin,
        groups: vec!["group:debug".into()],
        usage_guidance: None,
        search_hint: Some("repeat print test".into()),
        result_budget: 16 * 1024,
        disableable: true,
        allowed_in_lane: true,
    }
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

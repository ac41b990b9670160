//! `notify_owner`: says something to the owner outside of a reply — a finding of a side
//! lane, a reminder, a warning. The message goes to the owner's connected sessions (chat);
//! it is in the trajectory either way, as this call and its result.

use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Concurrency, SideEffect, Tier, ToolContract, ToolSource};
use crate::registry::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract {
        name: "notify_owner".into(),
        description: "Send a short message to the owner now (not a reply to the current message).".into(),
        parameters: json!({
            "type": "object",
            "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 4000}},
            "required": ["text"],
            "additionalProperties": false
        }),
        side_effect: SideEffect::Write,
        // A repeated call for the same event is replayed from the ledger, not sent twice.
        idempotent: true,
        concurrency: Concurrency::Safe,
        tier: Tier::Core,
        source: ToolSource::Builtin,
        groups: vec!["group:messaging".into()],
        usage_guidance: Some("Use for things the owner should know now; replies to the current message need no tool.".into()),
        search_hint: Some("message tell alert remind owner".into()),
        result_budget: 1024,
        disableable: true,
        allowed_in_lane: true,
    }
}

pub(super) struct NotifyOwner;

impl ToolHandler for NotifyOwner {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = args["text"].as_str().unwrap_or_default();
            let sessions = ctx.owner.notify(text, ctx.origin_event);
            ToolOutcome::ok(json!({ "delivered_to_sessions": sessions }))
        })
    }
}

//! `notify_owner`: says something to the owner outside of a reply — a finding of a side
//! lane, a reminder, a warning. The message goes to the owner's connected sessions (chat);
//! it is in the trajectory either way, as this call and its result.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Concurrency, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract::write(
        "notify_owner",
        "Send a short message to the owner now (not a reply to the current message).",
        crate::args::schema::<NotifyArgs>(),
    )
    // A repeated call for the same event is replayed from the ledger, not sent twice.
    .idempotent(true)
    .concurrency(Concurrency::Safe)
    .group("group:messaging")
    .guidance(
        "Use for things the owner should know now; replies to the current message need no tool.",
    )
    .hint("message tell alert remind owner")
    .budget(1024)
    .in_lane(true)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NotifyArgs {
    #[schemars(length(min = 1, max = 4000))]
    text: String,
}

pub(super) struct NotifyOwner;

impl ToolHandler for NotifyOwner {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = match crate::args::parse::<NotifyArgs>(args) {
                Ok(args) => args.text,
                Err(refused) => return refused,
            };
            let text = text.as_str();
            match ctx.owner.notify(text, ctx.origin_event).await {
                Ok(id) => ToolOutcome::ok(json!({ "queued": true, "message_id": id })),
                Err(e) => ToolOutcome::error(format!("the message could not be queued: {e}")),
            }
        })
    }
}

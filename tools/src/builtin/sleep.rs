//! `sleep`: waits, and stops early when the step is cancelled. It exists to make waiting
//! and cancellation visible and testable; the result says how long it really slept.

use std::time::Duration;

use serde_json::{Value, json};
use steward_events::ToolOutcome;
use tokio::time::Instant;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::handler::{ToolFuture, ToolHandler};

/// A day: long enough for any test or reminder-style wait, short enough to catch typos.
const MAX_SECS: f64 = 86_400.0;

pub(super) fn contract() -> ToolContract {
    ToolContract::read_only(
        "sleep",
        "Wait for the given number of seconds; returns early if the step is cancelled.",
        json!({
            "type": "object",
            "properties": {"secs": {"type": "number", "minimum": 0, "maximum": MAX_SECS}},
            "required": ["secs"],
            "additionalProperties": false
        }),
    )
    .group("group:debug")
    .hint("wait pause delay")
    .budget(1024)
}

pub(super) struct Sleep;

impl ToolHandler for Sleep {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // The schema guarantees a number in 0..=MAX_SECS.
            let secs = args.get("secs").and_then(Value::as_f64).unwrap_or(0.0);
            let started = Instant::now();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(secs)) => {
                    ToolOutcome::ok(json!({ "slept_secs": secs }))
                }
                () = ctx.cancel.cancelled() => ToolOutcome::cancelled(json!({
                    "slept_secs": started.elapsed().as_secs_f64(),
                    "requested_secs": secs,
                })),
            }
        })
    }
}

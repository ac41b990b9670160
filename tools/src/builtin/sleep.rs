//! `sleep`: waits, and stops early when the step is cancelled. It exists to make waiting
//! and cancellation visible and testable; the result says how long it really slept.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
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
        crate::args::schema::<SleepArgs>(),
    )
    .group("group:debug")
    .hint("wait pause delay")
    .budget(1024)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    #[schemars(range(min = 0, max = MAX_SECS))]
    secs: f64,
}

pub(super) struct Sleep;

impl ToolHandler for Sleep {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // The schema guarantees a number in 0..=MAX_SECS.
            let secs = match crate::args::parse::<SleepArgs>(args) {
                Ok(args) => args.secs,
                Err(refused) => return refused,
            };
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

//! `echo`: returns its text. Useful to check the pipeline end to end, and as the smallest
//! example of a tool.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::handler::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract::read_only(
        "echo",
        "Return the given text unchanged.",
        crate::args::schema::<EchoArgs>(),
    )
    .group("group:debug")
    .hint("repeat print test")
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// What to return.
    text: String,
}

pub(super) struct Echo;

impl ToolHandler for Echo {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match crate::args::parse::<EchoArgs>(args) {
                Ok(EchoArgs { text }) => ToolOutcome::ok(json!({ "text": text })),
                Err(refused) => refused,
            }
        })
    }
}

//! `fs_list`: the entries of a directory inside the roots, with their kind and size.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Applies, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};

const MAX_ENTRIES: usize = 1000;

pub(super) fn contract() -> ToolContract {
    ToolContract::read_only(
        "fs_list",
        "List a directory of the workspace.",
        crate::args::schema::<FsListArgs>(),
    )
    .group("group:fs")
    .hint("ls directory folder entries")
    .budget(64 * 1024)
    .returns_untrusted(Applies::PerCall)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FsListArgs {
    /// Default: the workspace root.
    path: Option<String>,
}

pub(super) struct FsList;

impl ToolHandler for FsList {
    fn returns_untrusted_for(&self, args: &Value, ctx: &ExecutionContext) -> bool {
        super::reads_untrusted(args, ctx)
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = match crate::args::parse::<FsListArgs>(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let requested = args.path.as_deref().unwrap_or(".");
            let at = match ctx.files.resolve(requested) {
                Ok(at) => at,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let listed = {
                let at = at.clone();
                super::on_files(ctx, move |files| {
                    files
                        .list(&at)
                        .map_err(|e| format!("cannot list {}: {e}", at.path().display()))
                })
                .await
            };
            let mut found = match listed {
                Ok(found) => found,
                Err(reason) => return ToolOutcome::error(reason),
            };
            found.sort_by(|a, b| a.name.cmp(&b.name));
            let truncated = found.len() > MAX_ENTRIES;
            let entries: Vec<Value> = found
                .into_iter()
                .take(MAX_ENTRIES)
                .map(|e| json!({"name": e.name, "type": e.kind.as_str(), "size": e.size}))
                .collect();
            ToolOutcome::ok(
                json!({"path": at.path().display().to_string(), "entries": entries, "truncated": truncated}),
            )
        })
    }
}

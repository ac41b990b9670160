//! `fs_list`: the entries of a directory inside the roots, with their kind and size.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
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
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FsListArgs {
    /// Default: the workspace root.
    path: Option<String>,
}

pub(super) struct FsList;

impl ToolHandler for FsList {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = match crate::args::parse::<FsListArgs>(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let requested = args.path.as_deref().unwrap_or(".");
            let path = match ctx.files.resolve(requested) {
                Ok(path) => path,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let mut dir = match tokio::fs::read_dir(&path).await {
                Ok(dir) => dir,
                Err(e) => {
                    return ToolOutcome::error(format!("cannot list {}: {e}", path.display()));
                }
            };
            let mut entries = Vec::new();
            let mut truncated = false;
            loop {
                match dir.next_entry().await {
                    Ok(Some(entry)) => {
                        if entries.len() == MAX_ENTRIES {
                            truncated = true;
                            break;
                        }
                        let kind = match entry.file_type().await {
                            Ok(t) if t.is_symlink() => "symlink",
                            Ok(t) if t.is_dir() => "dir",
                            Ok(t) if t.is_file() => "file",
                            _ => "other",
                        };
                        let size = entry.metadata().await.map(|m| m.len()).unwrap_or(0);
                        entries.push(json!({"name": entry.file_name().to_string_lossy(), "type": kind, "size": size}));
                    }
                    Ok(None) => break,
                    Err(e) => {
                        return ToolOutcome::error(format!("cannot list {}: {e}", path.display()));
                    }
                }
            }
            entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            ToolOutcome::ok(
                json!({"path": path.display().to_string(), "entries": entries, "truncated": truncated}),
            )
        })
    }
}

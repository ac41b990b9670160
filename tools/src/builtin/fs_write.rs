//! `fs_write`: creates or replaces a file inside the roots — an existing file only after
//! `fs_read` of it in this conversation, unchanged since. Written to a temporary file and
//! renamed, so a crash never leaves half a file.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::files::FileStamp;
use crate::handler::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract::write(
        "fs_write",
        "Create a file, or replace one you have read, in the workspace.",
        crate::args::schema::<FsWriteArgs>(),
    )
    // Writing the same content again leaves the same file.
    .idempotent(true)
    .group("group:fs")
    .guidance("Existing files must be read with fs_read first; prefer fs_edit for small changes.")
    .hint("save create overwrite file")
    .budget(4 * 1024)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FsWriteArgs {
    path: String,
    /// The whole new content.
    content: String,
}

pub(super) struct FsWrite;

impl ToolHandler for FsWrite {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let FsWriteArgs {
                path: requested,
                content,
            } = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let (requested, content) = (requested.as_str(), content.as_str());
            let path = match ctx.files.resolve(requested) {
                Ok(path) => path,
                Err(reason) => return ToolOutcome::error(reason),
            };
            if let Err(reason) = ctx.files.check_write(&ctx.trajectory, &path) {
                return ToolOutcome::error(reason);
            }
            let created = !path.exists();
            if let Err(e) = write_atomically(&path, content.as_bytes()).await {
                return ToolOutcome::error(format!("cannot write {}: {e}", path.display()));
            }
            remember(ctx, &path, content.as_bytes());
            ToolOutcome::ok(json!({
                "path": path.display().to_string(),
                "bytes": content.len(),
                "created": created,
            }))
        })
    }
}

/// Writes `bytes` next to `path` and renames over it; creates missing parent directories.
pub(super) async fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.steward-{}.tmp", std::process::id()));
    tokio::fs::write(&temp, bytes).await?;
    if let Err(e) = tokio::fs::rename(&temp, path).await {
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(e);
    }
    Ok(())
}

/// After a write the model knows the content: it counts as read.
pub(super) fn remember(ctx: &ExecutionContext, path: &Path, bytes: &[u8]) {
    if let Ok(stamp) = FileStamp::of_bytes(path, bytes) {
        ctx.files.record_read(&ctx.trajectory, path, stamp);
    }
}

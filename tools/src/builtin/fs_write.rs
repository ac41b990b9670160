//! `fs_write`: creates or replaces a file inside the roots — an existing file only after
//! `fs_read` of it in this conversation, unchanged since. Written to a temporary file and
//! renamed, so a crash never leaves half a file.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::files::{FileStamp, Located};
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
            let at = match ctx.files.resolve(requested) {
                Ok(at) => at,
                Err(reason) => return ToolOutcome::error(reason),
            };
            if let Err(reason) = ctx.files.check_write(&ctx.trajectory, &at) {
                return ToolOutcome::error(reason);
            }
            let bytes = content.as_bytes().to_vec();
            let created = match write(ctx, &at, bytes).await {
                Ok(created) => created,
                Err(reason) => return ToolOutcome::error(reason),
            };
            ToolOutcome::ok(json!({
                "path": at.path().display().to_string(),
                "bytes": content.len(),
                "created": created,
            }))
        })
    }
}

/// Writes `bytes` to `at` atomically (beneath its root, see `files::beneath`) and counts
/// the result as read: after a write the model knows the content. Whether the file is new.
pub(super) async fn write(
    ctx: &ExecutionContext,
    at: &Located,
    bytes: Vec<u8>,
) -> Result<bool, String> {
    let target = at.clone();
    let (created, stamp) = super::on_files(ctx, move |files| {
        let describe = |e: std::io::Error| format!("cannot write {}: {e}", target.path().display());
        let created = files.write_atomically(&target, &bytes).map_err(describe)?;
        let modified = files.metadata(&target).map_err(describe)?.modified().ok();
        Ok((created, FileStamp::new(&bytes, modified)))
    })
    .await?;
    ctx.files.record_read(&ctx.trajectory, at, stamp);
    Ok(created)
}

//! `fs_read`: a window of lines of a text file inside the roots, saying exactly which lines
//! out of how many. Reading is what later allows `fs_write`/`fs_edit` of the same file.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Applies, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};

const DEFAULT_LIMIT: u64 = 2000;
/// Files larger than this are refused rather than read into memory whole.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

pub(super) fn contract() -> ToolContract {
    ToolContract::read_only(
        "fs_read",
        "Read lines of a text file in the workspace. Returns which lines of how many.",
        crate::args::schema::<FsReadArgs>(),
    )
    .group("group:fs")
    .guidance("Read a file before changing it with fs_write or fs_edit.")
    .hint("open view cat file contents lines")
    .budget(100 * 1024)
    .returns_untrusted(Applies::PerCall)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FsReadArgs {
    /// Path relative to the workspace (or absolute inside it).
    path: String,
    /// First line to return (1-based). Default 1.
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    /// How many lines. Default 2000.
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<u64>,
}

pub(super) struct FsRead;

impl ToolHandler for FsRead {
    fn returns_untrusted_for(&self, args: &Value, ctx: &ExecutionContext) -> bool {
        super::reads_untrusted(args, ctx)
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: FsReadArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let requested = args.path.as_str();
            let at = match ctx.files.resolve(requested) {
                Ok(at) => at,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let (bytes, stamp) = {
                let at = at.clone();
                match super::on_files(ctx, move |files| files.read_stamped(&at, MAX_FILE_BYTES))
                    .await
                {
                    Ok(read) => read,
                    Err(reason) => return ToolOutcome::error(reason),
                }
            };
            let path = at.path();
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let total = lines.len() as u64;
            let first = args.offset.unwrap_or(1);
            let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
            if first > total.max(1) {
                return ToolOutcome::error(format!(
                    "{} has {total} lines; offset {first} is past the end",
                    path.display()
                ));
            }
            let start = (first - 1) as usize;
            let end = (start as u64 + limit).min(total) as usize;
            ctx.files.record_read(&ctx.trajectory, &at, stamp);
            ToolOutcome::ok(json!({
                "path": path.display().to_string(),
                "lines": if total == 0 { "empty file".to_owned() } else { format!("lines {first}-{end} of {total}") },
                "content": lines[start..end].concat(),
            }))
        })
    }
}

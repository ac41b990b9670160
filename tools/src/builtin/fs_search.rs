//! `fs_glob` and `fs_grep`: finding files and lines in the workspace. Both walk the tree
//! below a directory inside the roots without following symlinks, every directory and file
//! opened beneath its root by the kernel (a link or a swapped directory cannot lead the walk
//! out of the workspace), skip `.git`, `target` and `node_modules`, match globs in linear
//! time (`crate::glob`), and cap what they return, saying when they did.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Applies, ToolContract};
use crate::files::{EntryKind, FileAccess, Located};
use crate::glob::Globs;
use crate::handler::{ToolFuture, ToolHandler};

const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];
const MAX_FILES_WALKED: usize = 100_000;
const MAX_GREP_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn search_contract(name: &str, description: &str, parameters: Value, hint: &str) -> ToolContract {
    ToolContract::read_only(name, description, parameters)
        .group("group:fs")
        .hint(hint)
        .budget(100 * 1024)
        .returns_untrusted(Applies::PerCall)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    /// e.g. src/**/*.rs
    #[schemars(length(min = 1))]
    pattern: String,
    /// Directory to search. Default: the workspace root.
    path: Option<String>,
    #[schemars(range(min = 1, max = 5000))]
    max_results: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    #[schemars(length(min = 1))]
    pattern: String,
    /// File or directory. Default: the workspace root.
    path: Option<String>,
    /// Only files whose path matches this glob.
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[schemars(range(min = 1, max = 5000))]
    max_results: Option<u64>,
}

pub(super) fn glob_contract() -> ToolContract {
    search_contract(
        "fs_glob",
        "Find files in the workspace whose path matches a glob (`**` any directories, `*`, `?`).",
        crate::args::schema::<GlobArgs>(),
        "find files names wildcard",
    )
}

pub(super) fn grep_contract() -> ToolContract {
    search_contract(
        "fs_grep",
        "Search file contents with a regular expression; returns file:line:text.",
        crate::args::schema::<GrepArgs>(),
        "search text regex find in files",
    )
}

/// Files below `start` (or `start` itself) with their paths relative to it, `/`-separated,
/// in sorted order. Every directory is opened beneath its root by the kernel (see
/// `files::beneath`); symlinks are listed, never followed.
fn walk(files: &FileAccess, start: &Located) -> Vec<(Located, String)> {
    if files.metadata(start).is_ok_and(|m| m.is_file()) {
        let name = start
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return vec![(start.clone(), name)];
    }
    let mut found = Vec::new();
    let mut stack = vec![(start.clone(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(mut entries) = files.list(&dir) else {
            continue;
        };
        entries.sort_by(|a, b| b.name.cmp(&a.name));
        for entry in entries {
            let relative = if prefix.is_empty() {
                entry.name.clone()
            } else {
                format!("{prefix}/{}", entry.name)
            };
            match entry.kind {
                EntryKind::Dir if !SKIPPED_DIRS.contains(&entry.name.as_str()) => {
                    stack.push((dir.child(&entry.name), relative));
                }
                EntryKind::File => {
                    found.push((dir.child(&entry.name), relative));
                    if found.len() >= MAX_FILES_WALKED {
                        return found;
                    }
                }
                _ => {}
            }
        }
    }
    found.sort_by(|a, b| a.1.cmp(&b.1));
    found
}

fn start_dir(path: Option<&str>, ctx: &ExecutionContext) -> Result<Located, String> {
    ctx.files.resolve(path.unwrap_or("."))
}

pub(super) struct FsGlob;

impl ToolHandler for FsGlob {
    fn returns_untrusted_for(&self, args: &Value, ctx: &ExecutionContext) -> bool {
        super::reads_untrusted(args, ctx)
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: GlobArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let start = match start_dir(args.path.as_deref(), ctx) {
                Ok(start) => start,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let pattern = match Globs::new(&[args.pattern]) {
                Ok(pattern) => pattern,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let max = args.max_results.unwrap_or(1000) as usize;
            let found = super::on_files(ctx, move |files| {
                Ok(walk(files, &start)
                    .into_iter()
                    .map(|(_, rel)| rel)
                    .filter(|rel| pattern.matches(rel))
                    .collect::<Vec<_>>())
            })
            .await
            .unwrap_or_default();
            let truncated = found.len() > max;
            ToolOutcome::ok(
                json!({"files": found.into_iter().take(max).collect::<Vec<_>>(), "truncated": truncated}),
            )
        })
    }
}

pub(super) struct FsGrep;

impl ToolHandler for FsGrep {
    fn returns_untrusted_for(&self, args: &Value, ctx: &ExecutionContext) -> bool {
        super::reads_untrusted(args, ctx)
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: GrepArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let start = match start_dir(args.path.as_deref(), ctx) {
                Ok(start) => start,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let regex = match regex::RegexBuilder::new(&args.pattern)
                .case_insensitive(args.case_insensitive)
                .size_limit(1 << 20)
                .build()
            {
                Ok(regex) => regex,
                Err(e) => return ToolOutcome::error(format!("invalid regular expression: {e}")),
            };
            let filter = match args.glob.map(|g| Globs::new(&[g])).transpose() {
                Ok(filter) => filter,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let max = args.max_results.unwrap_or(200) as usize;
            let (lines, truncated) = super::on_files(ctx, move |files| {
                let mut lines = Vec::new();
                for (at, rel) in walk(files, &start) {
                    if filter.as_ref().is_some_and(|g| !g.matches(&rel)) {
                        continue;
                    }
                    let Ok((bytes, _)) = files.read_stamped(&at, MAX_GREP_FILE_BYTES) else {
                        continue;
                    };
                    if bytes.iter().take(8192).any(|b| *b == 0) {
                        continue; // binary
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    for (number, line) in text.lines().enumerate() {
                        if regex.is_match(line) {
                            if lines.len() == max {
                                return Ok((lines, true));
                            }
                            lines.push(format!("{rel}:{}:{line}", number + 1));
                        }
                    }
                }
                Ok((lines, false))
            })
            .await
            .unwrap_or_default();
            ToolOutcome::ok(json!({"matches": lines, "truncated": truncated}))
        })
    }
}

//! `fs_glob` and `fs_grep`: finding files and lines in the workspace. Both walk the tree
//! below a directory inside the roots without following symlinks (a link cannot lead the
//! walk out of the workspace), skip `.git`, `target` and `node_modules`, and cap what they
//! return, saying when they did.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::handler::{ToolFuture, ToolHandler};

const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];
const MAX_FILES_WALKED: usize = 100_000;
const MAX_GREP_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn search_contract(name: &str, description: &str, parameters: Value, hint: &str) -> ToolContract {
    ToolContract::read_only(name, description, parameters)
        .group("group:fs")
        .hint(hint)
        .budget(100 * 1024)
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

/// Files below `start` (or `start` itself), relative paths with `/`, in sorted order.
fn walk(start: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    if start.is_file() {
        let name = start
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return vec![(start.to_owned(), name)];
    }
    let mut stack = vec![(start.to_owned(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            // symlink_metadata: links are never followed.
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                if !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push((entry.path(), relative));
                }
            } else if meta.is_file() {
                files.push((entry.path(), relative));
                if files.len() >= MAX_FILES_WALKED {
                    return files;
                }
            }
        }
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    files
}

/// Whether a relative `/`-separated path matches a glob: `**` any number of directories,
/// `*` and `?` within one name.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    fn segments(pattern: &[&str], path: &[&str]) -> bool {
        match pattern.split_first() {
            None => path.is_empty(),
            Some((&"**", rest)) => (0..=path.len()).any(|skip| segments(rest, &path[skip..])),
            Some((first, rest)) => {
                !path.is_empty()
                    && segment(first.as_bytes(), path[0].as_bytes())
                    && segments(rest, &path[1..])
            }
        }
    }
    fn segment(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|skip| segment(rest, &text[skip..])),
            Some((b'?', rest)) => !text.is_empty() && segment(rest, &text[1..]),
            Some((c, rest)) => text.first() == Some(c) && segment(rest, &text[1..]),
        }
    }
    let pattern: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let path: Vec<&str> = path.split('/').collect();
    segments(&pattern, &path)
}

fn start_dir(path: Option<&str>, ctx: &ExecutionContext) -> Result<PathBuf, String> {
    ctx.files.resolve(path.unwrap_or("."))
}

pub(super) struct FsGlob;

impl ToolHandler for FsGlob {
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
            let pattern = args.pattern;
            let max = args.max_results.unwrap_or(1000) as usize;
            let found = tokio::task::spawn_blocking(move || {
                walk(&start)
                    .into_iter()
                    .map(|(_, rel)| rel)
                    .filter(|rel| glob_match(&pattern, rel))
                    .collect::<Vec<_>>()
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
            let filter = args.glob;
            let max = args.max_results.unwrap_or(200) as usize;
            let (lines, truncated) = tokio::task::spawn_blocking(move || {
                let mut lines = Vec::new();
                for (path, rel) in walk(&start) {
                    if filter.as_deref().is_some_and(|g| !glob_match(g, &rel)) {
                        continue;
                    }
                    if path
                        .metadata()
                        .map_or(true, |m| m.len() > MAX_GREP_FILE_BYTES)
                    {
                        continue;
                    }
                    let Ok(bytes) = std::fs::read(&path) else {
                        continue;
                    };
                    if bytes.iter().take(8192).any(|b| *b == 0) {
                        continue; // binary
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    for (number, line) in text.lines().enumerate() {
                        if regex.is_match(line) {
                            if lines.len() == max {
                                return (lines, true);
                            }
                            lines.push(format!("{rel}:{}:{line}", number + 1));
                        }
                    }
                }
                (lines, false)
            })
            .await
            .unwrap_or_default();
            ToolOutcome::ok(json!({"matches": lines, "truncated": truncated}))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob_table() {
        let table = [
            ("*.rs", "main.rs", true),
            ("*.rs", "src/main.rs", false),
            ("**/*.rs", "src/main.rs", true),
            ("**/*.rs", "main.rs", true),
            ("src/**", "src/a/b/c.txt", true),
            ("src/*/c.txt", "src/a/c.txt", true),
            ("src/*/c.txt", "src/a/b/c.txt", false),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("docs/**/index.html", "docs/index.html", true),
        ];
        for (pattern, path, expected) in table {
            assert_eq!(glob_match(pattern, path), expected, "{pattern} vs {path}");
        }
    }
}

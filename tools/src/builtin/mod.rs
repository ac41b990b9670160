//! Built-in tools. Each module declares its contract next to its handler; [`builtins`] is the
//! one list of them.

mod echo;
mod fs_edit;
mod fs_list;
mod fs_read;
mod fs_search;
mod fs_write;
mod http_request;
mod memory;
mod notify_owner;
mod shell;
mod skills;
mod sleep;
mod todo;
pub(crate) mod tool_search;
mod web_fetch;
mod web_search;

pub use memory::register_memory;
pub use skills::register_skills;
pub use todo::{TodoItem, TodoLists, TodoStatus, register_todo};
pub use tool_search::unwrap_call_tool;
pub use web_search::{BRAVE_URL, SearchBackend, WebSearch, register_web_search};

use crate::context::ExecutionContext;
use crate::registry::ToolRegistryBuilder;

/// Runs file work off the async threads (reads and writes block).
async fn on_files<T: Send + 'static>(
    ctx: &ExecutionContext,
    work: impl FnOnce(&crate::files::FileAccess) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let files = ctx.files.clone();
    tokio::task::spawn_blocking(move || work(&files))
        .await
        .unwrap_or_else(|e| Err(format!("the file operation failed: {e}")))
}

/// Whether a file tool's call reads under an untrusted or watched folder (its `path`, the
/// workspace when absent). A path that does not resolve reads nothing.
fn reads_untrusted(args: &serde_json::Value, ctx: &ExecutionContext) -> bool {
    #[derive(serde::Deserialize)]
    struct PathOnly {
        path: Option<String>,
    }
    let Ok(PathOnly { path }) = serde::Deserialize::deserialize(args) else {
        return false;
    };
    ctx.files
        .resolve(path.as_deref().unwrap_or("."))
        .is_ok_and(|at| ctx.files.touches_untrusted(&at))
}

pub use http_request::HttpHosts;

/// Adds `http_request` and `web_fetch`, reaching and trusting the hosts `hosts` names.
pub fn register_http(builder: ToolRegistryBuilder, hosts: HttpHosts) -> ToolRegistryBuilder {
    builder
        .register(
            http_request::contract(),
            http_request::HttpRequest {
                hosts: hosts.clone(),
            },
        )
        .register(
            web_fetch::contract(),
            web_fetch::WebFetch(http_request::HttpRequest { hosts }),
        )
}

pub use shell::ShellSandbox;

/// Whether `selection` enables `shell` (the sandbox needs probing only then).
pub fn shell_enabled(selection: &crate::selection::Selection) -> bool {
    selection.is_enabled(&shell::contract())
}

/// Adds `shell`, confined by `sandbox` (`None`: `tools.shell.sandbox = "none"`).
pub fn register_shell(
    builder: ToolRegistryBuilder,
    sandbox: Option<ShellSandbox>,
) -> ToolRegistryBuilder {
    builder.register(shell::contract(), shell::Shell { sandbox })
}

/// A builder holding every built-in tool that needs no outside state.
pub fn builtins() -> ToolRegistryBuilder {
    ToolRegistryBuilder::new()
        .register(echo::contract(), echo::Echo)
        .register(fs_edit::contract(), fs_edit::FsEdit)
        .register(fs_list::contract(), fs_list::FsList)
        .register(fs_search::glob_contract(), fs_search::FsGlob)
        .register(fs_search::grep_contract(), fs_search::FsGrep)
        .register(fs_read::contract(), fs_read::FsRead)
        .register(fs_write::contract(), fs_write::FsWrite)
        .register(notify_owner::contract(), notify_owner::NotifyOwner)
        .register(sleep::contract(), sleep::Sleep)
}

#[cfg(test)]
mod tests;

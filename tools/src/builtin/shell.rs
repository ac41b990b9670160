//! `shell`: runs a command with `sh -c` in the first root, with a timeout and an environment
//! scrubbed of everything but a few harmless variables (no API keys, no tokens).
//!
//! Its safety check classifies the command ([`crate::safety`]): catastrophic commands are
//! blocked, dangerous ones need the owner's confirmation, safe ones run like any idempotent
//! write (policy and taint still apply). The step's cancel token kills the process; the
//! result then says so — a command is the one side effect that is better stopped than
//! finished.

use std::process::Stdio;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::{ToolOutcome, ToolStatus};
use tokio::io::AsyncReadExt;

use crate::context::ExecutionContext;
use crate::contract::ToolContract;
use crate::handler::{Safety, ToolFuture, ToolHandler};
use crate::safety::{CommandTier, ShellContext, classify_shell};

const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Output kept per stream; the result budget cuts further.
const MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
/// What the command may see of the daemon's environment.
const KEPT_ENV: [&str; 8] = [
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TERM",
];

pub(super) fn contract() -> ToolContract {
    // Safe commands run like an idempotent write; the command's own safety check asks
    // for confirmation of dangerous ones and blocks catastrophic ones.
    ToolContract::write(
"shell",
"Run a shell command in the workspace; returns exit code, stdout and stderr.",
crate::args::schema::<ShellArgs>(),
)
.idempotent(true)
.group("group:runtime")
.guidance("Destructive commands (rm, force pushes, installs) need the owner's confirmation; some are blocked outright.")
.hint("bash run execute command terminal")
.budget(100 * 1024)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    #[schemars(length(min = 1))]
    command: String,
    /// Default 60.
    #[schemars(range(min = 1, max = 3600))]
    timeout_secs: Option<u64>,
}

pub(super) struct Shell;

fn shell_context(ctx: &ExecutionContext) -> ShellContext {
    ShellContext {
        roots: ctx.files.roots().to_vec(),
        home: std::env::var_os("HOME").map(Into::into),
    }
}

impl ToolHandler for Shell {
    fn safety(&self, args: &Value, ctx: &ExecutionContext) -> Safety {
        // Arguments that do not parse never run: nothing to classify.
        let Ok(ShellArgs { command, .. }) = crate::args::parse::<ShellArgs>(args) else {
            return Safety::Block("the arguments are not a shell call".into());
        };
        let command = command.as_str();
        let verdict = classify_shell(command, &shell_context(ctx));
        match verdict.tier {
            CommandTier::Safe => Safety::Allow,
            CommandTier::Dangerous => Safety::Confirm(verdict.reasons.join("; ")),
            CommandTier::Catastrophic => Safety::Block(format!(
                "`{}` ({})",
                command.chars().take(200).collect::<String>(),
                verdict.reasons.join("; ")
            )),
        }
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: ShellArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let command = args.command.as_str();
            let timeout = Duration::from_secs(args.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS));
            let mut process = tokio::process::Command::new("sh");
            process
                .arg("-c")
                .arg(command)
                .current_dir(&ctx.files.roots()[0])
                .env_clear()
                .envs(
                    KEPT_ENV
                        .iter()
                        .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            let mut child = match process.spawn() {
                Ok(child) => child,
                Err(e) => return ToolOutcome::error(format!("cannot start sh: {e}")),
            };
            let mut stdout = child.stdout.take().map(|s| s.take(MAX_OUTPUT_BYTES));
            let mut stderr = child.stderr.take().map(|s| s.take(MAX_OUTPUT_BYTES));
            let collect = async {
                let (mut out, mut err) = (Vec::new(), Vec::new());
                if let Some(s) = stdout.as_mut() {
                    let _ = s.read_to_end(&mut out).await;
                }
                if let Some(s) = stderr.as_mut() {
                    let _ = s.read_to_end(&mut err).await;
                }
                (out, err, child.wait().await)
            };
            let (ending, (out, err, status)) = tokio::select! {
                done = collect => ("exited", done),
                () = tokio::time::sleep(timeout) => {
                    return ToolOutcome::error(json!({"timed_out": true, "timeout_secs": timeout.as_secs(), "note": "the process was killed"}).to_string())
                        .with_hint("raise timeout_secs (up to 3600) or make the command finish sooner");
                }
                () = ctx.cancel.cancelled() => {
                    return ToolOutcome::cancelled(json!({"note": "the step was cancelled; the process was killed"}));
                }
            };
            let exit_code = status.ok().and_then(|s| s.code());
            let content = json!({
                "exit_code": exit_code,
                "stdout": String::from_utf8_lossy(&out),
                "stderr": String::from_utf8_lossy(&err),
                "ended": ending,
            });
            let hint = match exit_code {
                Some(127) => Some(
                    "a program in the command was not found: check its name and PATH; installing software needs the owner's confirmation",
                ),
                Some(126) => {
                    Some("a program in the command is not executable: check its permissions")
                }
                None => Some("the command was killed by a signal"),
                _ => None,
            };
            ToolOutcome {
                status: if exit_code == Some(0) {
                    ToolStatus::Ok
                } else {
                    ToolStatus::Error
                },
                content,
                hint: hint.map(str::to_owned),
            }
        })
    }
}

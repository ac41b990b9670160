//! `shell`: runs a command with `sh -c` in the first root, with a timeout and an environment
//! scrubbed of everything but a few harmless variables (no API keys, no tokens), confined by
//! the kernel ([`crate::sandbox`]) unless `tools.shell.sandbox = "none"`, in a process group
//! of its own that is killed whole on cancel or timeout (a backgrounded child does not
//! outlive its command). Where the sandbox is configured but the kernel cannot enforce it,
//! every command is asked and the result says so.
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
use crate::contract::{Applies, ToolContract};
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
// A command can read anything the sandbox lets it: once some folders hold others' words
// (watched or untrusted roots), its output may be theirs.
.returns_untrusted(Applies::PerCall)
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

/// How commands are confined: `None` when the owner chose `tools.shell.sandbox = "none"`.
pub(super) struct Shell {
    pub(super) sandbox: Option<ShellSandbox>,
}

/// The sandbox the daemon runs shell commands in.
#[derive(Clone, Debug)]
pub struct ShellSandbox {
    /// The program that confines itself and then runs the command.
    pub launcher: crate::sandbox::launcher::Launcher,
    /// Trees a command may not read ([`crate::sandbox::denied_paths`]).
    pub deny_read: Vec<std::path::PathBuf>,
    /// TCP allowed.
    pub network: bool,
    /// What the start-up probe found: `Err` (why) when the kernel does not confine.
    pub available: Result<(), String>,
}

fn shell_context(ctx: &ExecutionContext) -> ShellContext {
    ShellContext {
        roots: ctx.files.roots().to_vec(),
        home: std::env::var_os("HOME").map(Into::into),
    }
}

impl ToolHandler for Shell {
    fn returns_untrusted_for(&self, _args: &Value, ctx: &ExecutionContext) -> bool {
        ctx.files.has_untrusted()
    }

    fn safety(&self, args: &Value, ctx: &ExecutionContext) -> Safety {
        // Arguments that do not parse never run: nothing to classify.
        let Ok(ShellArgs { command, .. }) = crate::args::parse::<ShellArgs>(args) else {
            return Safety::Block("the arguments are not a shell call".into());
        };
        let command = command.as_str();
        let verdict = classify_shell(command, &shell_context(ctx));
        match verdict.tier {
            CommandTier::Safe => match self.sandbox.as_ref().map(|s| &s.available) {
                Some(Err(why)) => Safety::Confirm(format!(
                    "the shell sandbox is unavailable ({why}): every command is asked"
                )),
                _ => Safety::Allow,
            },
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
            let temp = match PrivateTemp::create() {
                Ok(temp) => temp,
                Err(e) => return ToolOutcome::error(format!("cannot make a temp dir: {e}")),
            };
            let (mut process, confinement) = self.command(command, ctx, &temp.0, timeout);
            process
                .current_dir(&ctx.files.roots()[0])
                .env_clear()
                .envs(
                    KEPT_ENV
                        .iter()
                        .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
                )
                .env("TMPDIR", &temp.0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            let mut child = match process.spawn() {
                Ok(child) => child,
                Err(e) => return ToolOutcome::error(format!("cannot start sh: {e}")),
            };
            let group = child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(id as i32));
            let kill_group = || {
                if let Some(group) = group {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
            };
            let mut stdout = child.stdout.take().map(|s| s.take(MAX_OUTPUT_BYTES));
            let mut stderr = child.stderr.take().map(|s| s.take(MAX_OUTPUT_BYTES));
            // Both streams are read while the command runs (a full stderr pipe must not stall
            // it); when the command itself exits, what it left running in its group is
            // killed, which also closes the pipes a background child held open.
            let collect = async {
                let read_out = async {
                    let mut out = Vec::new();
                    if let Some(s) = stdout.as_mut() {
                        let _ = s.read_to_end(&mut out).await;
                    }
                    out
                };
                let read_err = async {
                    let mut err = Vec::new();
                    if let Some(s) = stderr.as_mut() {
                        let _ = s.read_to_end(&mut err).await;
                    }
                    err
                };
                let run = async {
                    let status = child.wait().await;
                    kill_group();
                    status
                };
                tokio::join!(read_out, read_err, run)
            };
            let (ending, (out, err, status)) = tokio::select! {
                done = collect => ("exited", done),
                () = tokio::time::sleep(timeout) => {
                    kill_group();
                    return ToolOutcome::error(json!({"timed_out": true, "timeout_secs": timeout.as_secs(), "note": "the process was killed"}).to_string())
                        .with_hint("raise timeout_secs (up to 3600) or make the command finish sooner");
                }
                () = ctx.cancel.cancelled() => {
                    kill_group();
                    return ToolOutcome::cancelled(json!({"note": "the step was cancelled; the process was killed"}));
                }
            };
            let exit_code = status.ok().and_then(|s| s.code());
            let content = json!({
                "exit_code": exit_code,
                "stdout": String::from_utf8_lossy(&out),
                "stderr": String::from_utf8_lossy(&err),
                "ended": ending,
                "sandbox": confinement,
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
                untrusted: false,
            }
        })
    }
}

impl Shell {
    /// The process to start for `command`, and what the result says of its confinement.
    fn command(
        &self,
        command: &str,
        ctx: &ExecutionContext,
        temp: &std::path::Path,
        timeout: Duration,
    ) -> (tokio::process::Command, String) {
        let Some(sandbox) = self.sandbox.as_ref().filter(|s| s.available.is_ok()) else {
            let mut plain = tokio::process::Command::new("sh");
            plain.arg("-c").arg(command);
            let said = match &self.sandbox {
                Some(ShellSandbox {
                    available: Err(why),
                    ..
                }) => format!("unavailable: {why}"),
                _ => "none (tools.shell.sandbox = \"none\")".to_owned(),
            };
            return (plain, said);
        };
        let mut write = ctx.files.roots().to_vec();
        write.push(temp.to_owned());
        let spec = crate::sandbox::SandboxSpec {
            write,
            deny_read: sandbox.deny_read.clone(),
            network: sandbox.network,
            cpu_secs: timeout.as_secs() + 5,
        };
        let mut confined = tokio::process::Command::new(&sandbox.launcher.program);
        confined.args(sandbox.launcher.exec_args(&spec, &["sh", "-c", command]));
        let said = if sandbox.network {
            "landlock (network allowed)"
        } else {
            "landlock"
        };
        (confined, said.to_owned())
    }
}

/// A temp dir of the command's own (`TMPDIR`), removed when the command ends.
struct PrivateTemp(std::path::PathBuf);

impl PrivateTemp {
    fn create() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let name = format!(
            "steward-shell-{}-{:016x}",
            std::process::id(),
            rand_suffix()
        );
        let path = std::env::temp_dir().join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self(path))
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A hard-to-guess suffix (the name must not be known in advance to another user of /tmp;
/// `create` fails rather than reuses an existing path).
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

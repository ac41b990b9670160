//! `steward tools check-shell`: what the shell tool would decide about each command, read one
//! per line from stdin — without a daemon, and without running anything. A literal `\n` in a
//! line stands for a newline (a script of several lines on one line of input).
//!
//! Decided here: the workspace is `--workspace` or the current directory and the home
//! `--home` or `$HOME`, as the shell tool would see them; the exit code is 0 whatever the
//! tiers (it reports, it does not judge), 1 when stdin cannot be read.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use steward_tools::safety::{CommandTier, ShellContext, classify_shell};

use super::output::out;

pub fn run(json: bool, workspace: Option<PathBuf>, home: Option<PathBuf>) -> ExitCode {
    let ctx = ShellContext {
        roots: workspace
            .or_else(|| std::env::current_dir().ok())
            .into_iter()
            .collect(),
        home: home.or_else(|| std::env::var_os("HOME").map(PathBuf::from)),
    };
    for line in std::io::stdin().lock().lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                eprintln!("steward: cannot read the commands: {e}");
                return ExitCode::FAILURE;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let command = line.replace("\\n", "\n");
        let verdict = classify_shell(&command, &ctx);
        let tier = tier_name(verdict.tier);
        if json {
            out!(
                "{}",
                serde_json::json!({"command": command, "tier": tier, "reasons": verdict.reasons})
            );
        } else {
            out!("{tier:<12} {line}");
            for reason in &verdict.reasons {
                out!("{:<12}   {reason}", "");
            }
        }
    }
    ExitCode::SUCCESS
}

fn tier_name(tier: CommandTier) -> &'static str {
    match tier {
        CommandTier::Safe => "safe",
        CommandTier::Dangerous => "dangerous",
        CommandTier::Catastrophic => "catastrophic",
    }
}

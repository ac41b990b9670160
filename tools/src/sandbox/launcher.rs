//! The launcher: the program that confines itself as a [`SandboxSpec`] says and then becomes
//! the command (`exec`), so no code runs between fork and exec in the daemon and the rules
//! are inherited by everything the command starts. It fails closed: when the kernel would
//! not enforce the confinement, nothing runs (exit 126).
//!
//! Two programs host it. `steward-sandbox SPEC -- PROGRAM ARGS…` (and `--probe`) is a small
//! binary of its own: a command start pays for loading it, and the daemon's 15 MB binary
//! took about 2 ms more to load than a small one. `steward __sandbox-exec SPEC -- …` (and
//! `__sandbox-probe`) is the same code inside the daemon's binary, used when the small one
//! is not installed beside it (a `cargo run` builds only `steward`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Enforcement, SandboxSpec, confine};

/// The small launcher's file name, looked for beside the daemon's binary.
pub const LAUNCHER: &str = "steward-sandbox";
/// The daemon binary's hidden commands that host the same code.
pub const EXEC_COMMAND: &str = "__sandbox-exec";
pub const PROBE_COMMAND: &str = "__sandbox-probe";

/// Exit code when the command was not run because it could not be confined.
const NOT_CONFINED: u8 = 126;

/// How to start the launcher: a program and the arguments that select exec or probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    /// `steward-sandbox` needs none; the daemon's binary needs its hidden command.
    hosted: bool,
}

impl Launcher {
    /// The small launcher beside `daemon_binary` when it is there, else the daemon's binary.
    pub fn beside(daemon_binary: &Path) -> Self {
        let small = daemon_binary.with_file_name(LAUNCHER);
        if small.is_file() {
            Self {
                program: small,
                hosted: false,
            }
        } else {
            Self {
                program: daemon_binary.to_owned(),
                hosted: true,
            }
        }
    }

    /// Arguments that run `argv` confined by `spec`.
    pub fn exec_args(&self, spec: &SandboxSpec, argv: &[&str]) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::with_capacity(argv.len() + 3);
        if self.hosted {
            args.push(EXEC_COMMAND.into());
        }
        args.push(serde_json::to_string(spec).unwrap_or_default().into());
        args.push("--".into());
        args.extend(argv.iter().map(OsString::from));
        args
    }

    /// Runs the probe in a child: `Ok` with what it said when the kernel confines, `Err`
    /// with why not.
    pub fn probe(&self) -> Result<String, String> {
        let output = std::process::Command::new(&self.program)
            .arg(if self.hosted {
                PROBE_COMMAND
            } else {
                "--probe"
            })
            .output()
            .map_err(|e| {
                format!(
                    "cannot run the sandbox probe {}: {e}",
                    self.program.display()
                )
            })?;
        let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        match said.split_once(": ") {
            _ if said == "full" => Ok(said),
            Some(("partial", _)) => Ok(said),
            Some(("unavailable", why)) => Err(why.to_owned()),
            _ => Err(format!("the sandbox probe said {said:?}")),
        }
    }
}

/// `steward-sandbox`'s whole `main`: `--probe`, or `SPEC -- PROGRAM ARGS…`.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("--probe") => probe(),
        _ => exec(&args),
    }
}

/// `args`: `SPEC -- PROGRAM [ARGS…]`. Returns only when the command could not be run.
pub fn exec(args: &[OsString]) -> ExitCode {
    let usage = || {
        eprintln!("steward: usage: {LAUNCHER} SPEC -- PROGRAM [ARGS…]");
        ExitCode::from(2)
    };
    let (Some(spec), Some(dashes), Some(program)) = (args.first(), args.get(1), args.get(2)) else {
        return usage();
    };
    if dashes != "--" {
        return usage();
    }
    let spec: SandboxSpec = match serde_json::from_str(&spec.to_string_lossy()) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("steward: the sandbox spec is not valid: {e}");
            return ExitCode::from(2);
        }
    };
    match confine(&spec) {
        Ok(Enforcement::Full | Enforcement::Partial(_)) => {}
        Ok(Enforcement::Unavailable(why)) => {
            eprintln!("steward: not run: the sandbox is not enforced ({why})");
            return ExitCode::from(NOT_CONFINED);
        }
        Err(e) => {
            eprintln!("steward: not run: cannot confine the command: {e}");
            return ExitCode::from(NOT_CONFINED);
        }
    }
    let error = std::process::Command::new(program).args(&args[3..]).exec();
    eprintln!("steward: cannot run {}: {error}", program.to_string_lossy());
    ExitCode::from(127)
}

/// Confines this process as a command would be and prints what the kernel enforces.
pub fn probe() -> ExitCode {
    let spec = SandboxSpec {
        cpu_secs: 10,
        ..SandboxSpec::default()
    };
    match confine(&spec) {
        Ok(Enforcement::Full) => println!("full"),
        Ok(Enforcement::Partial(what)) => println!("partial: {what}"),
        Ok(Enforcement::Unavailable(why)) => println!("unavailable: {why}"),
        Err(e) => println!("unavailable: {e}"),
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_launcher_is_used_when_it_is_beside_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let daemon = dir.path().join("steward");
        std::fs::write(&daemon, "").unwrap();
        let spec = SandboxSpec::default();
        let hosted = Launcher::beside(&daemon);
        assert_eq!(hosted.program, daemon);
        let args = hosted.exec_args(&spec, &["sh", "-c", "true"]);
        assert_eq!(args[0], EXEC_COMMAND);
        assert_eq!(args[2..], ["--", "sh", "-c", "true"]);

        std::fs::write(dir.path().join(LAUNCHER), "").unwrap();
        let small = Launcher::beside(&daemon);
        assert_eq!(small.program, dir.path().join(LAUNCHER));
        let args = small.exec_args(&spec, &["sh", "-c", "true"]);
        assert!(args[0].to_string_lossy().starts_with('{'), "the spec first");
        assert_eq!(args[1..], ["--", "sh", "-c", "true"]);
    }
}

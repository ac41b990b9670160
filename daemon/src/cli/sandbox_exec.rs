//! The shell sandbox's launcher (see `steward_tools::sandbox`): `steward __sandbox-exec SPEC
//! -- PROGRAM ARGS…` confines itself as SPEC (JSON) says, then becomes PROGRAM. Hidden from
//! `--help`, read before any other argument parsing so that it starts in about a millisecond.
//! It fails closed: when the kernel would not enforce the confinement, nothing runs (exit
//! 126). `steward __sandbox-probe` confines itself the same way and says what the kernel
//! enforces (`full`, `partial: …`, `unavailable: …`), for the daemon's start-up and doctor.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use steward_tools::sandbox::{Enforcement, SandboxSpec, confine};

pub const EXEC: &str = "__sandbox-exec";
pub const PROBE: &str = steward_tools::sandbox::PROBE_COMMAND;

/// Exit code when the command was not run because it could not be confined.
const NOT_CONFINED: u8 = 126;

/// `args`: what follows `__sandbox-exec`.
pub fn exec(args: &[OsString]) -> ExitCode {
    let (Some(spec), Some(dashes), Some(program)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("steward: usage: steward {EXEC} SPEC -- PROGRAM [ARGS…]");
        return ExitCode::from(2);
    };
    if dashes != "--" {
        eprintln!("steward: usage: steward {EXEC} SPEC -- PROGRAM [ARGS…]");
        return ExitCode::from(2);
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

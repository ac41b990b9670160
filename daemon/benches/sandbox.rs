//! What the shell sandbox costs per command: starting `sh -c true` through the launcher
//! (`steward __sandbox-exec SPEC -- sh -c true`, which confines itself with the daemon's real
//! rules and then execs `sh`) against starting `sh -c true` directly; medians of 200 starts,
//! each to the exit of the command.
//!
//! Run: `cargo bench -p steward-daemon --bench sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

mod support;
use support::{ms, percentile};

fn median_start(mut command: impl FnMut() -> Command) -> (Duration, Duration) {
    let mut runs: Vec<Duration> = (0..200)
        .map(|_| {
            let started = Instant::now();
            let status = command().status().unwrap();
            assert!(status.success(), "{status:?}");
            started.elapsed()
        })
        .collect();
    runs.sort();
    (percentile(&runs, 0.5), percentile(&runs, 0.99))
}

fn main() {
    let workspace = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let spec = steward_tools::sandbox::SandboxSpec {
        write: vec![workspace.path().to_owned()],
        deny_read: steward_tools::sandbox::denied_paths(data.path(), None, home.as_deref(), &[]),
        network: false,
        cpu_secs: 65,
    };
    let spec = serde_json::to_string(&spec).unwrap();
    let (plain, plain_p99) = median_start(|| {
        let mut c = Command::new("sh");
        c.args(["-c", "true"]);
        c
    });
    let (confined, confined_p99) = median_start(|| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_steward"));
        c.args(["__sandbox-exec", &spec, "--", "sh", "-c", "true"]);
        c
    });
    println!(
        "shell command start to exit (sh -c true, 200 runs): direct p50 {} p99 {}; through the Landlock launcher p50 {} p99 {}; the sandbox adds {} at the median",
        ms(plain),
        ms(plain_p99),
        ms(confined),
        ms(confined_p99),
        ms(confined.saturating_sub(plain))
    );
}

//! What the shell sandbox costs per command: starting `sh -c true` through the launcher
//! (`steward-sandbox SPEC -- sh -c true`, which confines itself with the daemon's real rules
//! and then execs `sh`) against starting `sh -c true` directly, and through the same code
//! hosted in the daemon's binary (`steward __sandbox-exec …`, the fallback when the small
//! launcher is missing); medians of 200 starts, each to the exit of the command. The cost
//! grows with the siblings met on the way to each denied path (one Landlock rule each), so
//! it is measured for an installed layout and for the tests' (data dir in /tmp).
//!
//! Run: `cargo bench -p steward-daemon --bench sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::{Path, PathBuf};
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

/// The spec for a daemon whose data dir is `data`, in the home `home`.
fn spec(data: &Path, home: &Path) -> String {
    let workspace = data.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let spec = steward_tools::sandbox::SandboxSpec {
        write: vec![workspace.clone()],
        deny_read: steward_tools::sandbox::denied_paths(data, None, Some(home), &[workspace]),
        network: false,
        cpu_secs: 65,
    };
    serde_json::to_string(&spec).unwrap()
}

fn main() {
    // As installed: the data dir in the XDG place under a home (here inside the target
    // dir, so the walk meets an ordinary number of siblings).
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = base.path().join("home");
    let typical = spec(&home.join(".local/share/steward"), &home);
    // As the tests run it: the data dir in /tmp, whose every sibling is a rule of its own.
    let tmp = tempfile::tempdir().unwrap();
    let crowded = spec(
        tmp.path(),
        &std::env::var_os("HOME").map(PathBuf::from).unwrap_or(home),
    );
    let siblings = std::fs::read_dir(std::env::temp_dir()).map_or(0, Iterator::count);

    let (plain, plain_p99) = median_start(|| {
        let mut c = Command::new("sh");
        c.args(["-c", "true"]);
        c
    });
    println!(
        "shell command start to exit (sh -c true, 200 runs each): direct p50 {} p99 {}",
        ms(plain),
        ms(plain_p99)
    );
    let through = |launcher: &str, hosted: bool, spec: &str| {
        median_start(|| {
            let mut c = Command::new(launcher);
            if hosted {
                c.arg("__sandbox-exec");
            }
            c.args([spec, "--", "sh", "-c", "true"]);
            c
        })
    };
    for (what, launcher, hosted, spec) in [
        (
            "steward-sandbox, data dir in a home",
            env!("CARGO_BIN_EXE_steward-sandbox"),
            false,
            &typical,
        ),
        (
            "the daemon's binary, data dir in a home",
            env!("CARGO_BIN_EXE_steward"),
            true,
            &typical,
        ),
        (
            "steward-sandbox, data dir in /tmp",
            env!("CARGO_BIN_EXE_steward-sandbox"),
            false,
            &crowded,
        ),
    ] {
        let (p50, p99) = through(launcher, hosted, spec);
        println!(
            "  through {what}: p50 {} p99 {} (adds {} at the median)",
            ms(p50),
            ms(p99),
            ms(p50.saturating_sub(plain))
        );
    }
    println!(
        "  (/tmp holds {siblings} entries here; each is a Landlock rule when the data dir is there)"
    );
}

//! Shell-command classification speed on the project's corpus (`src/safety/corpus.tsv`,
//! 1,000+ commands of every class): the time of one `classify_shell` call per command,
//! median and p99 over all commands, each timed as the median of 51 runs; and the slowest
//! command.
//!
//! Run: `cargo bench -p steward-tools --bench classify`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use steward_tools::safety::{ShellContext, classify_shell};

const CORPUS: &str = include_str!("../src/safety/corpus.tsv");

fn main() {
    let ctx = ShellContext {
        roots: vec![PathBuf::from("/home/u/ws")],
        home: Some(PathBuf::from("/home/u")),
    };
    let commands: Vec<String> = CORPUS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .map(|(_, command)| command.replace("\\n", "\n"))
        .collect();
    let mut per_command: Vec<(Duration, &str)> = commands
        .iter()
        .map(|command| {
            let mut runs: Vec<Duration> = (0..51)
                .map(|_| {
                    let started = Instant::now();
                    std::hint::black_box(classify_shell(std::hint::black_box(command), &ctx));
                    started.elapsed()
                })
                .collect();
            runs.sort();
            (runs[runs.len() / 2], command.as_str())
        })
        .collect();
    per_command.sort();
    let at = |p: f64| per_command[((per_command.len() - 1) as f64 * p) as usize].0;
    let (slowest, which) = per_command.last().unwrap();
    println!(
        "classify_shell over {} corpus commands: median {:.2} µs, p99 {:.2} µs, slowest {:.2} µs ({which:?})",
        per_command.len(),
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        slowest.as_secs_f64() * 1e6,
    );
}

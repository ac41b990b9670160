//! Tool-layer benchmarks (figures, not assertions):
//! - pipeline overhead per call for a no-op read-only tool (`echo`), excluding the tool;
//! - command classification time over the safety corpus.
//!
//! Run: `cargo bench -p steward-tools --bench pipeline`.
#![allow(clippy::unwrap_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use steward_events::{ToolCallRequest, TrajectoryId};
use steward_tools::safety::{ShellContext, classify_shell};
use steward_tools::{ExecutionContext, ToolPipeline, builtin};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const CORPUS: &str = include_str!("../src/safety/corpus.tsv");

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pipeline = ToolPipeline::new(
        Arc::new(builtin::builtins().build().unwrap()),
        steward_tools::budget::ResultBudget::new(
            std::env::temp_dir().join("steward-bench-spill"),
            steward_tools::budget::BATCH_BUDGET_BYTES,
        ),
    );
    let ctx = ExecutionContext {
        files: Arc::new(steward_tools::files::FileAccess::new(&[std::env::temp_dir()]).unwrap()),
        trajectory: TrajectoryId::main(),
        origin_event: None,
        call_id: String::new(),
        mode: steward_tools::policy::Mode::Normal,
        step_trust: steward_events::Trust::Owner,
        cancel: CancellationToken::new(),
    };
    let call = ToolCallRequest {
        call_id: "c".into(),
        tool: "echo".into(),
        args: json!({"text": "hello"}),
        origin: None,
    };
    let mut samples = Vec::with_capacity(100_000);
    runtime.block_on(async {
        for _ in 0..10_000 {
            pipeline.execute(&call, &ctx).await;
        }
        for _ in 0..100_000 {
            let started = Instant::now();
            std::hint::black_box(pipeline.execute(&call, &ctx).await);
            samples.push(started.elapsed());
        }
    });
    samples.sort();
    println!(
        "pipeline per call, no-op read-only tool (echo, 100k calls): p50 {:.2} µs, p99 {:.2} µs (echo itself included)",
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
    );

    let commands: Vec<String> = CORPUS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t').map(|(_, c)| c.replace("\\n", "\n")))
        .collect();
    let shell = ShellContext {
        roots: vec![PathBuf::from("/home/u/ws")],
        home: Some(PathBuf::from("/home/u")),
    };
    let mut rounds = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        for command in &commands {
            std::hint::black_box(classify_shell(command, &shell));
        }
        rounds.push(started.elapsed());
    }
    rounds.sort();
    let median = percentile(&rounds, 0.5);
    println!(
        "command classification, whole corpus ({} commands, 200 rounds): median {:.3} ms per corpus, {:.2} µs per command",
        commands.len(),
        median.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e6 / commands.len() as f64,
    );
}

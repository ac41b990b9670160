//! Tool-layer benchmarks (figures, not assertions):
//! - pipeline overhead per call for a no-op read-only tool (`echo`), with policy, the
//!   confirmation store and the ledger attached as in the daemon (echo itself included);
//! - ledger write + flush per call that changes something (`begin` + `finish` + fsync);
//! - command classification time over the safety corpus.
//!
//! Run: `cargo bench -p steward-tools --bench pipeline`.
#![allow(clippy::unwrap_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use steward_events::{ToolCallRequest, TrajectoryId};
use steward_tools::budget::{BATCH_BUDGET_BYTES, ResultBudget};
use steward_tools::confirm::PendingStore;
use steward_tools::ledger::Ledger;
use steward_tools::safety::{ShellContext, classify_shell};
use steward_tools::{Authorization, ExecutionContext, ToolPipeline, builtin};
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
    // The pipeline as the daemon builds it: policy, confirmation store and ledger attached.
    let db_dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(db_dir.path()).open().unwrap();
    let pipeline = ToolPipeline::new(
        builtin::builtins().build().unwrap(),
        ResultBudget::new(
            std::env::temp_dir().join("steward-bench-spill"),
            BATCH_BUDGET_BYTES,
        ),
    )
    .with_ledger(Ledger::new(db.open_tree("ledger").unwrap()))
    .with_authorization(Authorization {
        rules: Default::default(),
        pending: PendingStore::new(db.open_tree("pending").unwrap()),
        expiry: Duration::from_secs(3600),
    });
    let ctx = ExecutionContext {
        files: Arc::new(steward_tools::files::FileAccess::new(&[std::env::temp_dir()]).unwrap()),
        trajectory: TrajectoryId::main(),
        origin_event: None,
        call_id: String::new(),
        mode: steward_tools::policy::Mode::Normal,
        step_trust: steward_events::Trust::Owner,
        idempotency_key: None,
        owner: Arc::new(Silent),
        cancel: CancellationToken::new(),
        only_tools: None,
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

    let mut ledger_samples = Vec::with_capacity(2000);
    let ledger = Ledger::new(db.open_tree("ledger-bench").unwrap());
    let hash = steward_tools::ledger::args_hash(&json!({"to": "someone"}));
    runtime.block_on(async {
        for i in 0..2000 {
            let started = Instant::now();
            let key = format!("k{i}");
            ledger
                .begin(&key, "http_request", &hash, false, Duration::from_secs(60))
                .unwrap();
            ledger
                .finish(
                    &key,
                    &steward_events::ToolOutcome::ok(json!({"status": 200})),
                )
                .unwrap();
            db.flush_async().await.unwrap();
            ledger_samples.push(started.elapsed());
        }
    });
    ledger_samples.sort();
    println!(
        "ledger begin + finish + flush per non-idempotent call (2000 calls): p50 {:.3} ms, p99 {:.3} ms",
        percentile(&ledger_samples, 0.5).as_secs_f64() * 1e3,
        percentile(&ledger_samples, 0.99).as_secs_f64() * 1e3,
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

/// An owner with no sessions connected.
#[derive(Debug)]
struct Silent;

impl steward_tools::OwnerChannel for Silent {
    fn notify<'a>(
        &'a self,
        _text: &'a str,
        _origin: Option<steward_events::EventId>,
    ) -> steward_tools::OwnerFuture<'a> {
        Box::pin(async { Ok(0) })
    }
}

//! Foundation benchmarks (targets from the foundation issue; figures, not assertions):
//! - durable ingest: events/s from `submit` (acked after flush) to `merged`;
//! - latency at 1,000 events/s: submit→ack and submit→merged, p50/p99;
//! - cancel latency: CANCEL submitted (and: CANCEL durable) → `step_cancelled` recorded;
//! - start to READY of the real binary on an empty data dir, and its idle RSS after 10 s.
//!
//! Run: `cargo bench -p steward-daemon --bench foundation` (add `-- quick` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use steward_config::Config;
use steward_daemon::core::Core;
use steward_daemon::notify::Heartbeat;
use steward_daemon::store::Store;
use steward_events::{
    Event, EventState, ItemKind, Payload, Sender, Source, Trust, Urgency, classify_urgency,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod support;
use support::{ms, percentile, status_mb, wait_ready};

fn owner_event(text: &str, urgency: Option<Urgency>) -> Event {
    let mut event = Event::new(
        Source::User,
        "user:socket",
        Sender {
            identity: "bench".into(),
            authenticated_by: "bench".into(),
        },
        Trust::Owner,
        Payload::Message { text: text.into() },
    );
    event.requested_urgency = urgency;
    event.urgency = classify_urgency(&event, &[]);
    event
}

struct Running {
    core_inbox: Arc<steward_daemon::store::Inbox>,
    trajectory: Arc<steward_daemon::store::Trajectory>,
    shutdown: CancellationToken,
    dispatcher: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start_core() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db")).unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    let core = Core::build(
        &Config::default(),
        store,
        dir.path().to_owned(),
        dir.path().join("workspace"),
        None,
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let dispatcher = tokio::spawn(async move {
        core.dispatcher
            .run(Heartbeat::from_env(), token)
            .await
            .unwrap();
    });
    Running {
        core_inbox: core.inbox,
        trajectory: core.trajectory,
        shutdown,
        dispatcher,
        _dir: dir,
    }
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        self.dispatcher.await.unwrap();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn ingest_throughput(events: usize, submitters: usize) -> f64 {
    let running = start_core();
    let started = Instant::now();
    let per = events / submitters;
    let tasks: Vec<_> = (0..submitters)
        .map(|s| {
            let inbox = running.core_inbox.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    inbox
                        .submit(owner_event(&format!("s{s} m{i}"), None))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let total = (per * submitters) as u64;
    while !(running.core_inbox.events_total() == total && running.core_inbox.pending_count() == 0) {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    running.stop().await;
    rate
}

async fn latency_at_rate(per_sec: u64, secs: u64) -> (Vec<Duration>, Vec<Duration>) {
    let running = start_core();
    let mut changes = running.core_inbox.subscribe();
    let merged_at = tokio::spawn(async move {
        let mut merged = std::collections::HashMap::new();
        while let Ok(change) = changes.recv().await {
            if matches!(change.0.state, EventState::Merged { .. }) {
                merged.insert(change.0.event.id, Instant::now());
                if merged.len() as u64 == per_sec * secs {
                    break;
                }
            }
        }
        merged
    });
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / per_sec as f64));
    let mut submits = Vec::new();
    for i in 0..per_sec * secs {
        interval.tick().await;
        let inbox = running.core_inbox.clone();
        submits.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let submitted = inbox
                .submit(owner_event(&format!("m{i}"), None))
                .await
                .unwrap();
            (submitted.id, t0, t0.elapsed())
        }));
    }
    let mut sent = Vec::new();
    for s in submits {
        sent.push(s.await.unwrap());
    }
    let merged = merged_at.await.unwrap();
    let mut ack: Vec<Duration> = sent.iter().map(|(_, _, a)| *a).collect();
    let mut to_merged: Vec<Duration> = sent
        .iter()
        .map(|(id, t0, _)| merged[id].duration_since(*t0))
        .collect();
    ack.sort();
    to_merged.sort();
    running.stop().await;
    (ack, to_merged)
}

async fn wait_for_item(
    trajectory: &steward_daemon::store::Trajectory,
    after: u64,
    want: &str,
) -> u64 {
    let mut watch = trajectory.watch();
    loop {
        let items = trajectory.after(after).unwrap();
        if let Some(item) = items.iter().find(|i| i.kind.name() == want) {
            return item.seq;
        }
        watch.changed().await.unwrap();
    }
}

async fn cancel_latency(rounds: usize) -> (Vec<Duration>, Vec<Duration>) {
    let running = start_core();
    let mut from_submit = Vec::new();
    let mut from_durable = Vec::new();
    let mut last = 0;
    for _ in 0..rounds {
        running
            .core_inbox
            .submit(owner_event(r#"/tool sleep {"secs":60}"#, None))
            .await
            .unwrap();
        last = wait_for_item(&running.trajectory, last, "tool_call").await;
        let t0 = Instant::now();
        running
            .core_inbox
            .submit(owner_event("stop", Some(Urgency::Cancel)))
            .await
            .unwrap();
        let durable = Instant::now();
        last = wait_for_item(&running.trajectory, last, "step_cancelled").await;
        let done = Instant::now();
        from_submit.push(done - t0);
        from_durable.push(done - durable);
        // Let the cancel event's own (instant) step finish before the next round.
        last = wait_for_item(&running.trajectory, last, "step_completed").await;
    }
    let items = running.trajectory.list(None).unwrap();
    let cancelled = items
        .iter()
        .filter(|i| matches!(i.kind, ItemKind::StepCancelled { .. }))
        .count();
    assert_eq!(cancelled, rounds);
    running.stop().await;
    from_submit.sort();
    from_durable.sort();
    (from_submit, from_durable)
}

/// Spawns the binary on an empty data dir; returns (time to READY=1, child, dir).
fn spawn_until_ready() -> (Duration, std::process::Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let data = dir.path().join("data");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("--data-dir")
        .arg(&data)
        .arg("run")
        // No config file at the default path: the embedded defaults.
        .env("XDG_CONFIG_HOME", dir.path())
        .env("NOTIFY_SOCKET", &notify_path)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = wait_ready(&notify).map(|()| started.elapsed());
    match ready {
        Ok(elapsed) => (elapsed, child, dir),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no READY=1 from steward: {e}");
        }
    }
}

fn terminate(mut child: std::process::Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let (events, runs) = if quick { (5_000, 1) } else { (50_000, 3) };
    let rates: Vec<f64> = (0..runs)
        .map(|_| runtime.block_on(ingest_throughput(events, 256)))
        .collect();
    println!(
        "durable ingest ({events} events, 256 submitters, {runs} runs): median {:.0} events/s (runs: {})",
        median(rates.clone()),
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let secs = if quick { 2 } else { 10 };
    let (ack, merged) = runtime.block_on(latency_at_rate(1000, secs));
    println!(
        "at 1000 events/s for {secs}s: submit->ack p50 {} p99 {}; submit->merged p50 {} p99 {}",
        ms(percentile(&ack, 0.5)),
        ms(percentile(&ack, 0.99)),
        ms(percentile(&merged, 0.5)),
        ms(percentile(&merged, 0.99)),
    );

    let rounds = if quick { 20 } else { 200 };
    let (from_submit, from_durable) = runtime.block_on(cancel_latency(rounds));
    println!(
        "cancel latency ({rounds} rounds): CANCEL submitted->step_cancelled p50 {} p99 {}; CANCEL durable->step_cancelled p50 {} p99 {}",
        ms(percentile(&from_submit, 0.5)),
        ms(percentile(&from_submit, 0.99)),
        ms(percentile(&from_durable, 0.5)),
        ms(percentile(&from_durable, 0.99)),
    );

    let starts = if quick { 5 } else { 20 };
    let mut ready = Vec::new();
    for _ in 0..starts {
        let (elapsed, child, _dir) = spawn_until_ready();
        ready.push(elapsed);
        terminate(child);
    }
    ready.sort();
    println!(
        "start to READY=1, empty data dir ({starts} starts): p50 {} max {}",
        ms(percentile(&ready, 0.5)),
        ms(*ready.last().unwrap())
    );

    let (_, child, _dir) = spawn_until_ready();
    let idle = if quick { 2 } else { 10 };
    std::thread::sleep(Duration::from_secs(idle));
    let pid = child.id();
    println!(
        "idle RSS after {idle}s (default config): {:.1} MB (anonymous {:.1} MB, file-backed {:.1} MB: the mapped binary and libc)",
        status_mb(pid, "VmRSS:"),
        status_mb(pid, "RssAnon:"),
        status_mb(pid, "RssFile:"),
    );
    terminate(child);
}

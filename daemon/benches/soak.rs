//! Soak (the proving issue; figures, not assertions): one million events into the real
//! release binary, half as owner messages on the control socket and half as signed webhook
//! deliveries, while a scripted model answers every turn with a tool call (`memory_write`,
//! which goes through the ledger) and then a text — the whole path, compaction included.
//! Every second it samples the daemon's RSS, CPU time and the data dir's size on disk
//! (allocated blocks). The load is steady (2,500 events/s) and the inbox's, ledger's and
//! trajectory's retentions are one minute (`0.0007` days), so that their purges run many times
//! during the run. Owner messages (every turn's answer is one) are kept for the default 90
//! days, as a user's are: they are what the run genuinely keeps, a few hundred bytes each.
//! What must be seen:
//! - RSS plateaus: the peak of the second half of the run is within a few MB of the first
//!   half's, and its trend over the second half is flat;
//! - the data dir stops growing once the first retention has passed, apart from the owner
//!   messages kept (sled reuses the space of what was purged; it never shrinks its file, so
//!   the size stays at that level after the load stops). Before sled's segment cleaner was
//!   mended, those messages pinned segments that were otherwise dead and grew the data dir
//!   by ~210 MB per 100,000 events (see vendor/sled/STEWARD.md, change 5, and BENCHMARKS.md).
//!
//! The webhook route's sender is configured as an owner, so that its turns' tool calls run
//! instead of waiting for confirmation (as untrusted content would make them).
//!
//! The curve (one line per sample) goes to `target/soak.csv`; stdout gets the summary.
//!
//! Run: `cargo bench -p steward-daemon --bench soak` (1,000,000 events, ~10 minutes here);
//! `-- quick` for 100,000 (40 s, less than one retention: it shows the rise, not the
//! plateau); `SOAK_EVENTS=N` and `SOAK_RATE=N` (events/s) to change either.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use steward_daemon::channels::http::verify::hmac_sha256;
use steward_events::to_hex;
use steward_protocol::client::Client;
use steward_protocol::{Request, Response, StepStatus};
use tokio::time::Instant;

mod support;
use support::{cpu_time, model, spawn_daemon, status_mb};

const SECRET: &str = "soak secret";
/// 0.0007 days = 60.5 s, near the shortest retention allowed: purges every 15 s.
const RETENTION_DAYS: f64 = 0.0007;
/// Events per second offered (half on each channel); `SOAK_RATE` overrides. About 70% of
/// what this machine takes flat out, so that the daemon keeps up and the run reaches the
/// steady state a long-lived daemon lives in: a retention's worth of events (~150,000)
/// kept, older ones purged.
const DEFAULT_RATE: f64 = 2500.0;
const SENDERS_PER_CHANNEL: usize = 4;
/// How long the idle daemon is watched after the load, to see the purges bring it down.
const COOL_DOWN: Duration = Duration::from_secs(150);

#[derive(Default)]
struct ModelCounts {
    tool_calls: AtomicU64,
    texts: AtomicU64,
    summaries: AtomicU64,
}

/// A model that answers a turn's first call with `memory_write` and the next with a text.
fn start_model(counts: Arc<ModelCounts>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counts = counts.clone();
            std::thread::spawn(move || {
                while let Some(request) = model::read_request(&stream) {
                    let last_role = request["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .and_then(|m| m["role"].as_str())
                        .unwrap_or_default()
                        .to_owned();
                    let events = if model::is_summary_request(&request) {
                        counts.summaries.fetch_add(1, Ordering::Relaxed);
                        model::text("Summary: the owner and a webhook sent numbered notes.")
                    } else if last_role == "tool" {
                        counts.texts.fetch_add(1, Ordering::Relaxed);
                        model::text("Noted.")
                    } else {
                        let n = counts.tool_calls.fetch_add(1, Ordering::Relaxed);
                        model::tool_call(
                            "memory_write",
                            &json!({"key": format!("soak-{}", n % 64), "value": format!("turn {n}")}),
                        )
                    };
                    if model::respond(&stream, &events).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    sent: u64,
    rss_mb: f64,
    dir_mb: f64,
    cpu_secs: f64,
    pending: u64,
}

/// Bytes allocated on disk at `path` (a file, or a dir and all under it: what `du`
/// counts), in MB.
fn allocated_mb(path: &Path) -> f64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        total += meta.blocks() * 512;
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total as f64 / 1e6
}

async fn status(socket: &Path) -> Option<steward_protocol::StatusReport> {
    match Client::call(socket, &Request::Status).await.ok()?.first() {
        Some(Response::Status { status }) => Some(status.clone()),
        _ => None,
    }
}

/// Hands out numbers `0..total` at `per_sec`, shared by one channel's senders: a steady
/// load, so that the run reaches the steady state a long-running daemon lives in.
struct Pace {
    next: AtomicU64,
    total: u64,
    per_sec: f64,
    start: Instant,
}

impl Pace {
    fn new(total: u64, per_sec: f64) -> Arc<Self> {
        Arc::new(Self {
            next: AtomicU64::new(0),
            total,
            per_sec,
            start: Instant::now(),
        })
    }

    async fn take(&self) -> Option<u64> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if n >= self.total {
            return None;
        }
        tokio::time::sleep_until(self.start + Duration::from_secs_f64(n as f64 / self.per_sec))
            .await;
        Some(n)
    }
}

async fn send_socket(socket: PathBuf, pace: Arc<Pace>, sent: Arc<AtomicU64>) {
    while let Some(n) = pace.take().await {
        let request = Request::Send {
            text: format!("note {n}: the owner's message"),
            urgency: None,
            wait: false,
        };
        let responses = Client::call(&socket, &request).await.unwrap();
        assert!(
            matches!(responses.first(), Some(Response::Accepted { .. })),
            "{responses:?}"
        );
        sent.fetch_add(1, Ordering::Relaxed);
    }
}

async fn send_webhooks(
    client: reqwest::Client,
    url: String,
    pace: Arc<Pace>,
    sent: Arc<AtomicU64>,
) {
    while let Some(n) = pace.take().await {
        let body = format!(r#"{{"note":{n},"repository":{{"full_name":"me/steward"}}}}"#);
        let signature = format!(
            "sha256={}",
            to_hex(&hmac_sha256(SECRET.as_bytes(), body.as_bytes()))
        );
        let response = client
            .post(&url)
            .header("X-Hub-Signature-256", signature)
            .header("X-GitHub-Delivery", format!("soak-{n}"))
            .header("X-GitHub-Event", "push")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 202, "delivery {n}");
        sent.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keys per sled tree (and per key prefix in the `log` tree), read after the daemon stopped.
fn store_contents(db: &Path) -> String {
    let db = sled::open(db).unwrap();
    let mut parts = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name).unwrap();
        let name = String::from_utf8_lossy(&name).into_owned();
        if name == "log" {
            let mut by_prefix = std::collections::BTreeMap::<char, usize>::new();
            for entry in tree.iter() {
                let (key, _) = entry.unwrap();
                *by_prefix.entry(key[0] as char).or_default() += 1;
            }
            for (prefix, n) in by_prefix {
                parts.push(format!("log/{prefix} {n}"));
            }
        } else if !tree.is_empty() {
            parts.push(format!("{name} {}", tree.len()));
        }
    }
    parts.join(", ")
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let (mx, my) = (
        mean(points.iter().map(|p| p.0)),
        mean(points.iter().map(|p| p.1)),
    );
    let num: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    if den == 0.0 { 0.0 } else { num / den }
}

fn max_of(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    samples.iter().map(f).fold(0.0, f64::max)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let total: u64 = std::env::var("SOAK_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 100_000 } else { 1_000_000 });
    let counts = Arc::new(ModelCounts::default());
    let model_port = start_model(counts.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{model_port}/v1\"\nmodel = \"soak\"\n\n\
         [inbox]\ndedupe_retention_days = {RETENTION_DAYS}\n\n[tools]\nledger_retention_days = {RETENTION_DAYS}\n\n\
         [trajectory]\nretention_days = {RETENTION_DAYS}\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n\
         [senders]\nowner = [\"webhook:soak\"]\n\n\
         [[webhook.routes]]\nname = \"soak\"\nauth = \"github\"\nsecret_env = \"SOAK_SECRET\"\nrate_per_min = 1000000\n\
         text = \"push {{body.note}} to {{body.repository.full_name}}\"\n"
    );
    let (child, _) = spawn_daemon(dir.path(), &config, &[("SOAK_SECRET", SECRET)]);
    let pid = child.id();
    let socket = dir.path().join("steward.sock");
    let address = std::fs::read_to_string(dir.path().join("http.addr")).unwrap();
    let url = format!("http://{address}/hooks/soak");

    let socket_total = total / 2;
    let webhook_total = total - socket_total;
    let sent = Arc::new(AtomicU64::new(0));
    let mut load = tokio::task::JoinSet::new();
    let rate: f64 = std::env::var("SOAK_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RATE);
    let socket_pace = Pace::new(socket_total, rate / 2.0);
    let webhook_pace = Pace::new(webhook_total, rate / 2.0);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(SENDERS_PER_CHANNEL)
        .build()
        .unwrap();
    for _ in 0..SENDERS_PER_CHANNEL {
        load.spawn(send_socket(
            socket.clone(),
            socket_pace.clone(),
            sent.clone(),
        ));
        load.spawn(send_webhooks(
            http.clone(),
            url.clone(),
            webhook_pace.clone(),
            sent.clone(),
        ));
    }

    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut loaded_at: Option<f64> = None;
    let mut settled_at: Option<f64> = None;
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        let report = status(&socket).await.expect("status");
        let sample = Sample {
            secs: started.elapsed().as_secs_f64(),
            sent: sent.load(Ordering::Relaxed),
            rss_mb: status_mb(pid, "VmRSS:"),
            dir_mb: allocated_mb(dir.path()),
            cpu_secs: cpu_time(pid).as_secs_f64(),
            pending: report.inbox_pending,
        };
        samples.push(sample);
        if samples.len().is_multiple_of(15) {
            eprintln!(
                "soak: {:>6.0} s  sent {:>8}  pending {:>6}  rss {:>6.1} MB  dir {:>7.1} MB",
                sample.secs, sample.sent, sample.pending, sample.rss_mb, sample.dir_mb
            );
        }
        while let Some(done) = load.try_join_next() {
            done.unwrap();
        }
        if loaded_at.is_none() && load.is_empty() {
            loaded_at = Some(sample.secs);
        }
        let idle = matches!(report.step, StepStatus::Idle) && report.inbox_pending == 0;
        if settled_at.is_none() && loaded_at.is_some() && idle {
            settled_at = Some(sample.secs);
        }
        if settled_at.is_some_and(|t| sample.secs - t >= COOL_DOWN.as_secs_f64()) {
            break;
        }
    }
    let final_status = status(&socket).await.unwrap();
    let mut parts: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| {
            format!(
                "{} {:.1} MB",
                e.file_name().to_string_lossy(),
                allocated_mb(&e.path())
            )
        })
        .collect();
    parts.sort();
    let peak_mb = status_mb(pid, "VmHWM:");
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
    let contents = store_contents(&dir.path().join("db"));

    let csv_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/soak.csv");
    let mut csv = String::from("secs,events_sent,rss_mb,data_dir_mb,cpu_secs,inbox_pending\n");
    for s in &samples {
        csv.push_str(&format!(
            "{:.1},{},{:.2},{:.2},{:.2},{}\n",
            s.secs, s.sent, s.rss_mb, s.dir_mb, s.cpu_secs, s.pending
        ));
    }
    std::fs::write(&csv_path, csv).unwrap();

    let loaded_at = loaded_at.unwrap();
    let settled_at = settled_at.unwrap();
    let under_load: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.secs <= settled_at)
        .collect();
    let half = under_load.len() / 2;
    let (first, second) = under_load.split_at(half);
    let per_100k = |points: &[Sample], f: &dyn Fn(&Sample) -> f64| {
        slope(
            &points
                .iter()
                .map(|s| (s.sent as f64 / 100_000.0, f(s)))
                .collect::<Vec<_>>(),
        )
    };
    let rss = |s: &Sample| s.rss_mb;
    let disk = |s: &Sample| s.dir_mb;
    let last = samples.last().unwrap();
    println!(
        "soak: {total} events ({socket_total} socket, {webhook_total} webhook) offered at {rate:.0}/s, sent in {loaded_at:.0} s = {:.0} events/s; all handled {settled_at:.0} s after the start",
        total as f64 / loaded_at
    );
    println!(
        "soak: model turns {} with {} memory_write tool calls, {} summaries (compaction); daemon CPU {:.0} s",
        counts.texts.load(Ordering::Relaxed),
        counts.tool_calls.load(Ordering::Relaxed),
        counts.summaries.load(Ordering::Relaxed),
        last.cpu_secs
    );
    println!(
        "soak: events total {} ({} pending at the end)",
        final_status.events_total, final_status.inbox_pending
    );
    println!("soak: RSS (MB) at each tenth of the events sent:");
    let tenth = |f: &dyn Fn(&Sample) -> f64| {
        (0..=10)
            .map(|i| {
                let target = total * i / 10;
                let s = under_load
                    .iter()
                    .find(|s| s.sent >= target)
                    .unwrap_or(under_load.last().unwrap());
                format!("{:.1}", f(s))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("soak:   {}", tenth(&rss));
    println!("soak: data dir on disk (MB) at each tenth of the events sent:");
    println!("soak:   {}", tenth(&disk));
    println!(
        "soak: RSS peak first half {:.1} MB, second half {:.1} MB; trend over the second half {:+.2} MB per 100k events; VmHWM {peak_mb:.1} MB",
        max_of(first, rss),
        max_of(second, rss),
        per_100k(second, &rss)
    );
    println!(
        "soak: data dir peak first half {:.1} MB, second half {:.1} MB; trend over the second half {:+.2} MB per 100k events; {:.1} MB after {:.0} s idle",
        max_of(first, disk),
        max_of(second, disk),
        per_100k(second, &disk),
        last.dir_mb,
        COOL_DOWN.as_secs_f64()
    );
    println!("soak: data dir at the end: {}", parts.join(", "));
    println!("soak: what the store holds at the end: {contents}");
    println!(
        "soak: RSS idle at the end {:.1} MB; curve: {}",
        last.rss_mb,
        csv_path.display()
    );
}

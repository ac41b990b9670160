//! Webhook benchmark (targets from the webhook issue; figures, not assertions): signed
//! GitHub-style deliveries posted over loopback to the real binary at concurrency 16 and
//! 64, each answered only once durable — deliveries/s, p50/p99 latency, RSS during and
//! after. The load generator shares the machine's two cores with the daemon.
//!
//! Run: `cargo bench -p steward-daemon --bench webhook` (add `-- quick` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use steward_daemon::channels::http::verify::{hmac_sha256, to_hex};
use tokio::time::Instant;

mod support;
use support::{ms, percentile, spawn_daemon, status_mb};

const SECRET: &str = "bench secret";

fn start() -> (Child, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"BENCH_SECRET\"\nrate_per_min = 1000000\n";
    let (child, _) = spawn_daemon(dir.path(), config, &[("BENCH_SECRET", SECRET)]);
    let address = std::fs::read_to_string(dir.path().join("http.addr")).unwrap();
    (child, dir, format!("http://{address}/hooks/gh"))
}

/// Posts for `secs` seconds with `concurrency` workers; returns (deliveries/s, latencies,
/// peak RSS during).
async fn load(url: &str, pid: u32, concurrency: usize, secs: u64) -> (f64, Vec<Duration>, f64) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    let body = r#"{"repository":{"full_name":"me/steward"},"ref":"refs/heads/main"}"#;
    let signature = format!(
        "sha256={}",
        to_hex(&hmac_sha256(SECRET.as_bytes(), body.as_bytes()))
    );
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, signature, counter) = (
            client.clone(),
            url.to_owned(),
            signature.clone(),
            counter.clone(),
        );
        workers.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .header("X-Hub-Signature-256", &signature)
                    .header("X-GitHub-Delivery", format!("bench-{n}"))
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 202);
                latencies.push(sent.elapsed());
            }
            latencies
        });
    }
    let mut peak: f64 = 0.0;
    let mut all = Vec::new();
    loop {
        tokio::select! {
            done = workers.join_next() => match done {
                Some(latencies) => all.extend(latencies.unwrap()),
                None => break,
            },
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                peak = peak.max(status_mb(pid, "VmRSS:"));
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    (all.len() as f64 / elapsed, all, peak)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let secs = if quick { 3 } else { 10 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for concurrency in [16, 64] {
        let (mut daemon, _dir, url) = start();
        std::thread::sleep(Duration::from_secs(1));
        let idle = status_mb(daemon.id(), "VmRSS:");
        let (rate, latencies, peak) = runtime.block_on(load(&url, daemon.id(), concurrency, secs));
        std::thread::sleep(Duration::from_secs(5));
        let after = status_mb(daemon.id(), "VmRSS:");
        println!(
            "concurrency {concurrency}, {secs}s: {rate:.0} durable deliveries/s; latency p50 {} p99 {}; RSS idle {idle:.1} MB, peak {peak:.1} MB, 5 s after {after:.1} MB",
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
        );
        daemon.kill().unwrap();
        daemon.wait().unwrap();
    }
}

//! Webhook benchmark (targets from the webhook issue; figures, not assertions): signed
//! GitHub-style deliveries posted over loopback to the real binary at concurrency 16 and
//! 64, each answered only once durable — deliveries/s, p50/p99 latency, RSS during and
//! after. The load generator shares the machine's two cores with the daemon.
//!
//! Run: `cargo bench -p steward-daemon --bench webhook` (add `-- quick` for a short run).
//!
//! The same load generator drives another daemon for `scripts/side_by_side.py`:
//! `… --bench webhook -- external URL SCHEME SECRET CONCURRENCY SECS` posts signed deliveries
//! to URL and prints one line, `rate=… p50_ms=… p99_ms=… errors=…`. SCHEME is `github`
//! (Steward's route: `X-Hub-Signature-256`, a unique `X-GitHub-Delivery`, answered 202 once
//! durable) or `zeroclaw` (ZeroClaw's webhook channel: `X-Webhook-Signature: sha256=HEX`
//! over a `{"sender","content"}` body, answered 200 once queued).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use steward_daemon::channels::http::verify::hmac_sha256;
use steward_events::to_hex;
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

/// How deliveries are signed and what answer means "accepted".
#[derive(Clone, Copy, PartialEq)]
enum Scheme {
    GitHub,
    ZeroClaw,
}

impl Scheme {
    fn parse(name: &str) -> Self {
        match name {
            "github" => Self::GitHub,
            "zeroclaw" => Self::ZeroClaw,
            other => panic!("unknown signing scheme {other:?}: github or zeroclaw"),
        }
    }

    fn accepted(self) -> u16 {
        match self {
            Self::GitHub => 202,
            Self::ZeroClaw => 200,
        }
    }

    /// Delivery `n`: its body and headers.
    fn delivery(self, secret: &str, n: u64) -> (String, Vec<(&'static str, String)>) {
        let sign = |body: &str| to_hex(&hmac_sha256(secret.as_bytes(), body.as_bytes()));
        match self {
            Self::GitHub => {
                let body = r#"{"repository":{"full_name":"me/steward"},"ref":"refs/heads/main"}"#
                    .to_owned();
                let headers = vec![
                    ("X-Hub-Signature-256", format!("sha256={}", sign(&body))),
                    ("X-GitHub-Delivery", format!("bench-{n}")),
                ];
                (body, headers)
            }
            Self::ZeroClaw => {
                let body = format!(
                    r#"{{"sender":"bench","content":"push to me/steward refs/heads/main #{n}"}}"#
                );
                let headers = vec![
                    ("X-Webhook-Signature", format!("sha256={}", sign(&body))),
                    ("Content-Type", "application/json".to_owned()),
                ];
                (body, headers)
            }
        }
    }
}

/// Posts for `secs` seconds with `concurrency` workers; returns (deliveries/s, latencies of
/// accepted deliveries, peak RSS during, deliveries not accepted).
async fn load(
    url: &str,
    pid: u32,
    scheme: Scheme,
    secret: &str,
    concurrency: usize,
    secs: u64,
) -> (f64, Vec<Duration>, f64, u64) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, secret, counter, errors) = (
            client.clone(),
            url.to_owned(),
            secret.to_owned(),
            counter.clone(),
            errors.clone(),
        );
        workers.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (body, headers) = scheme.delivery(&secret, n);
                let mut request = client.post(&url).body(body);
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                let sent = Instant::now();
                match request.send().await {
                    Ok(response) if response.status() == scheme.accepted() => {
                        latencies.push(sent.elapsed());
                    }
                    _ => {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
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
    let errors = errors.load(std::sync::atomic::Ordering::Relaxed);
    (all.len() as f64 / elapsed, all, peak, errors)
}

/// `external URL SCHEME SECRET CONCURRENCY SECS`: load another process's endpoint.
fn external(runtime: &tokio::runtime::Runtime, args: &[String]) {
    let [url, scheme, secret, concurrency, secs] = args else {
        panic!("usage: external URL SCHEME SECRET CONCURRENCY SECS");
    };
    let (rate, latencies, _, errors) = runtime.block_on(load(
        url,
        std::process::id(),
        Scheme::parse(scheme),
        secret,
        concurrency.parse().unwrap(),
        secs.parse().unwrap(),
    ));
    let at = |p| {
        if latencies.is_empty() {
            f64::NAN
        } else {
            percentile(&latencies, p).as_secs_f64() * 1000.0
        }
    };
    println!(
        "rate={rate:.0} p50_ms={:.3} p99_ms={:.3} errors={errors}",
        at(0.5),
        at(0.99)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let secs = if quick { 3 } else { 10 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Some(at) = args.iter().position(|a| a == "external") {
        return external(&runtime, &args[at + 1..]);
    }
    for concurrency in [16, 64] {
        let (mut daemon, _dir, url) = start();
        std::thread::sleep(Duration::from_secs(1));
        let idle = status_mb(daemon.id(), "VmRSS:");
        let (rate, latencies, peak, errors) = runtime.block_on(load(
            &url,
            daemon.id(),
            Scheme::GitHub,
            SECRET,
            concurrency,
            secs,
        ));
        assert_eq!(errors, 0, "every delivery is accepted");
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

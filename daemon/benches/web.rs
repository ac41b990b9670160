//! The owner's web page (figures, not assertions): page render time with 10,000 items in
//! the trajectory and the inbox (p50/p99 of whole requests over loopback, logged in), idle
//! RSS with the page on and off, and the event stream's fan-out to 10 open pages (a message
//! sent, until every page heard of it).
//!
//! Run: `cargo bench -p steward-daemon --bench web` (add `-- quick` for 2,000 items).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use steward_protocol::client::Client;
use steward_protocol::{Request, Response};
use tokio::time::Instant;

mod support;
use support::{ms, percentile, spawn_daemon, status_mb};

fn start(web: bool) -> (Child, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("[http]\nlisten = \"127.0.0.1:0\"\nweb = {web}\n");
    let (child, _) = spawn_daemon(dir.path(), &config, &[]);
    let address = std::fs::read_to_string(dir.path().join("http.addr")).unwrap();
    (child, dir, format!("http://{}", address.trim()))
}

/// Logs in through `steward web login`; the session cookie.
async fn login(dir: &Path, http: &reqwest::Client) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(dir.join("config.toml"))
        .args(["web", "login", "--json"])
        .output()
        .unwrap();
    let link: Value = serde_json::from_slice(&output.stdout).unwrap();
    let answer = http
        .get(link["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let cookie = answer.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

/// Sends `n` messages over the control socket, 8 at a time.
async fn fill(socket: &Path, n: usize) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (socket, next) = (socket.to_owned(), next.clone());
        senders.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let request = Request::Send {
                    text: format!("note {i}: something the owner wrote down"),
                    urgency: None,
                    wait: false,
                };
                let answer = Client::call(&socket, &request).await.unwrap();
                assert!(matches!(answer.first(), Some(Response::Accepted { .. })));
            }
        });
    }
    while senders.join_next().await.is_some() {}
}

async fn trajectory_len(socket: &Path) -> usize {
    let answer = Client::call(
        socket,
        &Request::Trajectory {
            limit: Some(1),
            follow: false,
        },
    )
    .await
    .unwrap();
    answer
        .iter()
        .find_map(|r| match r {
            Response::Item { item } => usize::try_from(item.seq).ok(),
            _ => None,
        })
        .unwrap_or(0)
}

async fn render(http: &reqwest::Client, url: &str, cookie: &str, rounds: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let sent = Instant::now();
        let answer = http.get(url).header("cookie", cookie).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{url}");
        answer.bytes().await.unwrap();
        times.push(sent.elapsed());
    }
    times.sort();
    times
}

/// Sends a message with `pages` event streams open; per round, the time until the last
/// page heard of it.
async fn fan_out(
    base: &str,
    socket: &Path,
    cookie: &str,
    pages: usize,
    rounds: usize,
) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let mut streams = Vec::new();
    for _ in 0..pages {
        let response = http
            .get(format!("{base}/web/stream"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    let mut times = Vec::new();
    for round in 0..rounds {
        let sent = Instant::now();
        let request = Request::Send {
            text: format!("fan-out {round}"),
            urgency: None,
            wait: false,
        };
        Client::call(socket, &request).await.unwrap();
        for stream in &mut streams {
            // Every page hears of it (the step that follows adds more; read what came).
            loop {
                let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
                    .await
                    .expect("the page heard nothing")
                    .unwrap()
                    .unwrap();
                if String::from_utf8_lossy(&chunk).contains("changed") {
                    break;
                }
            }
        }
        times.push(sent.elapsed());
        // Let the step end and drain what it announced before the next round.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for stream in &mut streams {
            while let Ok(Ok(Some(_))) =
                tokio::time::timeout(Duration::from_millis(20), stream.chunk()).await
            {}
        }
    }
    times.sort();
    times
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let items = if quick { 2_000 } else { 10_000 };
    let http = reqwest::Client::new();

    let (mut off, _off_dir, _) = start(false);
    let (mut on, dir, base) = start(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_off = status_mb(off.id(), "VmRSS:");
    let rss_on = status_mb(on.id(), "VmRSS:");
    off.kill().unwrap();
    println!("idle RSS: {rss_on:.1} MB with the page on, {rss_off:.1} MB with http.web = false");

    let socket = dir.path().join("steward.sock");
    let filling = Instant::now();
    fill(&socket, items).await;
    while trajectory_len(&socket).await < items {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "{items} messages sent and merged in {:.1} s",
        filling.elapsed().as_secs_f64()
    );
    println!(
        "RSS after the fill, before any page: {:.1} MB",
        status_mb(on.id(), "VmRSS:")
    );
    let cookie = login(dir.path(), &http).await;
    let rounds = if quick { 50 } else { 200 };
    for (name, path) in [
        ("now", "/".to_owned()),
        ("chat (newest 100 items)", "/chat".to_owned()),
        (
            "chat (a page in the middle)",
            format!("/chat?before={}", items / 2),
        ),
        ("activity (newest 200 events)", "/activity".to_owned()),
        ("approvals", "/approvals".to_owned()),
        ("schedule", "/schedule".to_owned()),
    ] {
        let times = render(&http, &format!("{base}{path}"), &cookie, rounds).await;
        println!(
            "render {name} with {items} items: p50 {} p99 {} (n={rounds})",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99))
        );
    }
    println!(
        "RSS after rendering: {:.1} MB",
        status_mb(on.id(), "VmRSS:")
    );
    let times = fan_out(&base, &socket, &cookie, 10, if quick { 10 } else { 30 }).await;
    println!(
        "event stream fan-out to 10 open pages (message sent -> every page notified): p50 {} p99 {}",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.99))
    );
    on.kill().unwrap();
}

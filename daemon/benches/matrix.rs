//! Matrix channel figures (not assertions), on the real binary against a real Synapse on
//! 127.0.0.1 (`tests/matrix/synapse.sh`), the owner a `matrix-sdk` client, in an encrypted
//! direct room:
//! - message in → event durable: from the owner's send until `steward events --follow`
//!   shows the event (so: Synapse, the sync, decryption, the inbox's flush);
//! - answer out → visible: from the owner message's queueing in the outbox (its `at`) until
//!   the owner's client has it decrypted (`notify_owner` through `steward tools call`);
//! - idle RSS of the daemon with `[matrix]` configured and synced, against the same binary
//!   without it.
//!
//! Run: `cargo bench -p steward-daemon --bench matrix` (add `-- quick` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly
#![recursion_limit = "256"] // matrix-sdk's sync future is deep

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::UserId;
use matrix_sdk::ruma::events::room::message::{
    OriginalSyncRoomMessageEvent, RoomMessageEventContent,
};
use matrix_sdk::{Client, RoomMemberships};
use serde_json::Value;

mod support;
use support::{ms, percentile, spawn_daemon, status_mb};

const PASSWORD: &str = "bench-password-1234";
const URL: &str = "http://127.0.0.1:18008";

fn synapse(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/matrix/synapse.sh");
    let status = Command::new("bash")
        .arg(script)
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "synapse.sh {args:?}");
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    )
}

fn steward(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(dir.join("config.toml"))
        .args(args)
        .output()
        .unwrap()
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50 {} p99 {} max {}",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        ms(*samples.last().unwrap())
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let rounds = if quick { 10 } else { 50 };
    synapse(&["start"]);
    let (owner_name, bot_name) = (unique("owner"), unique("steward"));
    synapse(&["register", &owner_name, PASSWORD]);
    synapse(&["register", &bot_name, PASSWORD]);
    let bot = UserId::parse(format!("@{bot_name}:localhost")).unwrap();

    // The owner's client, recording when each message from the assistant arrives.
    let store = tempfile::tempdir().unwrap();
    let owner = Client::builder()
        .homeserver_url(URL)
        .sqlite_store(store.path(), None)
        .build()
        .await
        .unwrap();
    owner
        .matrix_auth()
        .login_username(&owner_name, PASSWORD)
        .send()
        .await
        .unwrap();
    let arrivals: Arc<Mutex<Vec<(String, SystemTime)>>> = Arc::default();
    let log = arrivals.clone();
    let from = bot.clone();
    owner.add_event_handler(move |event: OriginalSyncRoomMessageEvent| {
        let (log, from) = (log.clone(), from.clone());
        async move {
            if event.sender == from {
                log.lock()
                    .unwrap()
                    .push((event.content.body().to_owned(), SystemTime::now()));
            }
        }
    });
    owner.sync_once(SyncSettings::default()).await.unwrap();
    let syncing = owner.clone();
    tokio::spawn(async move {
        let _ = syncing.sync(SyncSettings::default()).await;
    });

    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[matrix]\nhomeserver = \"{URL}\"\nuser_id = \"{bot}\"\npassword_env = \"BENCH_MATRIX_PASSWORD\"\nowners = [\"@{owner_name}:localhost\"]\n"
    );
    let (mut daemon, ready) =
        spawn_daemon(dir.path(), &config, &[("BENCH_MATRIX_PASSWORD", PASSWORD)]);
    println!("start to READY with [matrix]: {}", ms(ready));
    let room = owner.create_dm(&bot).await.unwrap();
    while !room
        .members(RoomMemberships::JOIN)
        .await
        .is_ok_and(|members| members.iter().any(|m| m.user_id() == bot))
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Message in → event durable.
    let mut follow = Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["events", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<(Value, SystemTime)>();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(row) = serde_json::from_str::<Value>(&line) {
                let _ = lines_tx.send((row, SystemTime::now()));
            }
        }
    });
    let mut inbound = Vec::new();
    for n in 0..rounds {
        let text = format!("bench message {n}");
        let sent = SystemTime::now();
        room.send(RoomMessageEventContent::text_plain(&text))
            .await
            .unwrap();
        loop {
            let (row, at) = lines
                .recv_timeout(Duration::from_secs(30))
                .expect("the event");
            if row["text"] == text.as_str() {
                inbound.push(at.duration_since(sent).unwrap());
                break;
            }
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    summary(
        "message in -> event durable (seen by events --follow)",
        inbound,
    );

    // Answer out → visible to the owner's client.
    let mut outbound = Vec::new();
    for n in 0..rounds {
        let text = format!("bench notice {n}");
        let args = serde_json::json!({ "text": text }).to_string();
        let call = steward(
            dir.path(),
            &["tools", "call", "notify_owner", "--args", &args],
        );
        assert!(call.status.success(), "{call:?}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let seen = loop {
            if let Some((_, at)) = arrivals
                .lock()
                .unwrap()
                .iter()
                .find(|(body, _)| *body == text)
            {
                break *at;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{text} never arrived"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let listed = steward(dir.path(), &["outbox", "--json"]);
        let queued = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|m| m["text"] == text.as_str())
            .and_then(|m| m["at"].as_str().map(str::to_owned))
            .expect("the outbox has it");
        let queued: SystemTime = chrono::DateTime::parse_from_rfc3339(&queued)
            .unwrap()
            .into();
        outbound.push(seen.duration_since(queued).unwrap_or_default());
    }
    summary(
        "owner message queued -> visible in the owner's client",
        outbound,
    );

    tokio::time::sleep(Duration::from_secs(5)).await;
    let with_matrix = status_mb(daemon.id(), "VmRSS:");
    let _ = daemon.kill();
    let _ = daemon.wait();
    let plain = tempfile::tempdir().unwrap();
    let (mut bare, _) = spawn_daemon(plain.path(), "", &[]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let without = status_mb(bare.id(), "VmRSS:");
    let _ = bare.kill();
    let _ = bare.wait();
    println!(
        "idle RSS: {with_matrix:.1} MB with [matrix] synced, {without:.1} MB without (+{:.1} MB)",
        with_matrix - without
    );
}

//! Crash torture: a workload over every channel — socket messages, signed webhooks, a cron
//! job every second, file changes, mail delivered by SMTP to the assistant's mailbox on the
//! test mail stack, and non-idempotent `http_request` POSTs (allowed by a test policy, so
//! they run without asking) to a recording HTTP server — while the daemon is killed with
//! SIGKILL at random moments. Then the invariants, reported as counts:
//! - every acknowledged input ends in exactly one terminal state (none lost);
//! - every mail the SMTP server accepted becomes exactly one event;
//! - no input appears twice in the trajectory;
//! - no cron occurrence runs twice;
//! - the recording server saw each POST at most once, and a POST it never saw is never
//!   `completed` in the trajectory.
//!
//! Short by default (6 kills, CI); `STEWARD_TORTURE_KILLS=200` with `--profile long` for
//! the long run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steward_daemon::channels::http::verify::hmac_sha256;
use steward_events::to_hex;
use steward_events::{EventId, ItemKind, ToolStatus};

use crate::support::{TestDaemon, merged_ids, send_to};

const GH_SECRET: &str = "torture secret";

/// An HTTP server that records every POST body and answers 200 (a connection that
/// carried no request is not a POST).
struct Recorder {
    port: u16,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let request = crate::support::HttpRequest::read(&stream);
                    if request.method.is_empty() {
                        // The daemon was killed between connecting and writing: no
                        // request reached the server.
                        return;
                    }
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&request.body).into_owned());
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                    let mut rest = Vec::new();
                    let _ = stream.read_to_end(&mut rest);
                });
            }
        });
        Self { port, bodies }
    }
}

/// What the workload got acknowledged.
#[derive(Default)]
struct Acked {
    events: BTreeSet<EventId>,
    posts_asked: u64,
    messages: u64,
    webhooks: u64,
    files: u64,
    /// Subjects of mails the SMTP server accepted for the assistant's mailbox.
    mails: Vec<String>,
}

/// The assistant's and the owner's addresses on the test mail stack.
struct Mailboxes {
    assistant: String,
    owner: String,
}

fn random_below(n: u64) -> u64 {
    (ulid::Ulid::generate().random() % u128::from(n)) as u64
}

/// Sends inputs until cancelled; each acknowledged one is recorded.
async fn workload(
    daemon_dir: std::path::PathBuf,
    watched: std::path::PathBuf,
    recorder_port: u16,
    mailboxes: Arc<Mailboxes>,
    acked: Arc<Mutex<Acked>>,
    round: usize,
) {
    let socket = daemon_dir.join("steward.sock");
    let address = std::fs::read_to_string(daemon_dir.join("http.addr")).unwrap_or_default();
    let client = reqwest::Client::new();
    for k in 0.. {
        let tag = format!("r{round}-{k}");
        match k % 5 {
            0 => {
                if let Ok(id) = send_to(&socket, &format!("message {tag}"), None).await {
                    let mut acked = acked.lock().unwrap();
                    acked.events.insert(id);
                    acked.messages += 1;
                }
            }
            1 => {
                let body = format!("{{\"tag\":\"{tag}\"}}");
                let signature = format!(
                    "sha256={}",
                    to_hex(&hmac_sha256(GH_SECRET.as_bytes(), body.as_bytes()))
                );
                let response = client
                    .post(format!("http://{address}/hooks/gh"))
                    .header("X-Hub-Signature-256", signature)
                    .header("X-GitHub-Delivery", &tag)
                    .header("X-GitHub-Event", "push")
                    .body(body)
                    .send()
                    .await;
                if let Ok(response) = response
                    && (response.status() == 202 || response.status() == 200)
                    && let Ok(bytes) = response.bytes().await
                    && let Ok(answer) = serde_json::from_slice::<serde_json::Value>(&bytes)
                    && let Some(id) = answer["event_id"].as_str().and_then(|id| id.parse().ok())
                {
                    let mut acked = acked.lock().unwrap();
                    acked.events.insert(id);
                    acked.webhooks += 1;
                }
            }
            2 => {
                if std::fs::write(watched.join(format!("{tag}.txt")), &tag).is_ok() {
                    acked.lock().unwrap().files += 1;
                }
            }
            3 => {
                // Mail goes to the mailbox whether or not the daemon is up: it must become
                // exactly one event however the kills fall between fetching and storing.
                let subject = format!("mail {tag}");
                let raw = crate::mail::message(
                    &mailboxes.owner,
                    &mailboxes.assistant,
                    &subject,
                    "x",
                    "",
                    false,
                );
                crate::mail::deliver(&mailboxes.owner, &mailboxes.assistant, raw.as_bytes()).await;
                acked.lock().unwrap().mails.push(subject);
            }
            _ => {
                let command = format!(
                    "/tool http_request {{\"method\":\"POST\",\"url\":\"http://127.0.0.1:{recorder_port}/record\",\"body\":\"post-{tag}\"}}"
                );
                acked.lock().unwrap().posts_asked += 1;
                if let Ok(id) = send_to(&socket, &command, None).await {
                    acked.lock().unwrap().events.insert(id);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(random_below(15))).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_input_survives_random_kill_9_exactly_once() {
    let kills: usize = std::env::var("STEWARD_TORTURE_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(6);
    let recorder = Recorder::start();
    let watched = tempfile::tempdir().unwrap();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"T_GH\"\n\n[[cron]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ntz = \"UTC\"\ntext = \"tick\"\nurgency = \"queue\"\nmissed = \"skip\"\n\n[[watch]]\nname = \"w\"\npath = {:?}\ndebounce_ms = 50\n\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n\n[[tools.policy]]\nid = \"test-confirms-posts\"\ntool = \"http_request\"\ndecision = \"allow\"\n",
        watched.path().display().to_string()
    );
    crate::mail::stack();
    let mailboxes = Arc::new(Mailboxes {
        assistant: crate::mail::address("steward"),
        owner: crate::mail::address("owner"),
    });
    let config = config
        + crate::mail::config(
            &mailboxes.assistant,
            &mailboxes.owner,
            "require_authentication = false\n",
        )
        .as_str();
    let env = [
        ("T_GH", GH_SECRET),
        (crate::mail::PASSWORD_ENV, crate::mail::PASSWORD),
    ];
    let acked = Arc::new(Mutex::new(Acked::default()));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), &config).unwrap();
    let mut dir = dir;
    let started = Instant::now();
    for round in 0..kills {
        let mut daemon = TestDaemon::start_in_with_env(dir, &env);
        let load = tokio::spawn(workload(
            daemon.path().to_owned(),
            watched.path().to_owned(),
            recorder.port,
            mailboxes.clone(),
            acked.clone(),
            round,
        ));
        tokio::time::sleep(Duration::from_millis(200 + random_below(1300))).await;
        daemon.kill9();
        load.abort();
        let _ = load.await;
        dir = daemon.into_dir();
    }
    // The last start: let everything settle — every accepted mail fetched, then the inbox.
    let daemon = TestDaemon::start_in_with_env(dir, &env);
    let mail_subjects = acked.lock().unwrap().mails.clone();
    let has_subject = |events: &[steward_protocol::EventRow], subject: &str| {
        let line = format!("Subject: {subject}\n");
        events
            .iter()
            .filter(|e| e.channel.starts_with("email:") && e.text.contains(&line))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = daemon.events().await;
        let missing = mail_subjects
            .iter()
            .filter(|s| has_subject(&events, s) == 0)
            .count();
        if missing == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} accepted mails never became events"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = daemon.status().await;
        if status.inbox_pending == 0 && matches!(status.step, steward_protocol::StepStatus::Idle) {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let again = daemon.status().await;
            if again.inbox_pending == 0 && matches!(again.step, steward_protocol::StepStatus::Idle)
            {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the daemon never settled: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let events = daemon.events().await;
    let states: BTreeMap<EventId, String> =
        events.iter().map(|e| (e.id, e.state.clone())).collect();
    let lost: Vec<&EventId> = acked
        .events
        .iter()
        .filter(|id| !states.contains_key(id))
        .collect();
    let pending: Vec<&EventId> = acked
        .events
        .iter()
        .filter(|id| states.get(id).is_some_and(|s| s == "pending"))
        .collect();

    let items = daemon.trajectory().await;
    let merged = merged_ids(&items);
    let unique: BTreeSet<&EventId> = merged.iter().collect();
    let repeated = merged.len() - unique.len();

    let mut ticks: BTreeMap<chrono::DateTime<chrono::Utc>, usize> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| e.channel == "cron:tick" && e.state != "duplicate" && e.state != "missed")
    {
        *ticks.entry(event.occurred_at).or_default() += 1;
    }
    let double_ticks = ticks.values().filter(|n| **n > 1).count();
    let mails_twice = mail_subjects
        .iter()
        .filter(|s| has_subject(&events, s) > 1)
        .count();

    let seen = recorder.bodies.lock().unwrap().clone();
    let mut seen_count: BTreeMap<&str, usize> = BTreeMap::new();
    for body in &seen {
        *seen_count.entry(body.as_str()).or_default() += 1;
    }
    let sent_twice = seen_count.values().filter(|n| **n > 1).count();
    // Calls by id, then their results: a completed POST must have reached the server.
    let mut call_bodies: BTreeMap<&str, String> = BTreeMap::new();
    let mut completed_unseen = Vec::new();
    let mut completed = 0;
    let mut other_results: BTreeMap<String, usize> = BTreeMap::new();
    for item in &items {
        match &item.kind {
            ItemKind::ToolCall {
                call_id,
                tool,
                args,
            } if tool == "http_request" => {
                call_bodies.insert(
                    call_id,
                    args["body"].as_str().unwrap_or_default().to_owned(),
                );
            }
            ItemKind::ToolResult {
                tool,
                status,
                result,
                ..
            } if tool == "http_request" && *status != ToolStatus::Ok => {
                // Pending: a webhook body (untrusted) merged into the same step taints it, so
                // the POST asks first, as it must. Errors: the re-run of an interrupted step
                // finds the POST `unknown` in the ledger and refuses to repeat it.
                let text: String = match status {
                    ToolStatus::Pending => "needs confirmation (tainted step)".into(),
                    _ => result.to_string().chars().take(60).collect(),
                };
                *other_results
                    .entry(format!("{status:?}: {text}"))
                    .or_default() += 1;
            }
            ItemKind::ToolResult {
                call_id,
                tool,
                status,
                ..
            } if tool == "http_request" && *status == ToolStatus::Ok => {
                completed += 1;
                let body = call_bodies
                    .get(call_id.as_str())
                    .cloned()
                    .unwrap_or_default();
                if !seen_count.contains_key(body.as_str()) {
                    completed_unseen.push(body);
                }
            }
            _ => {}
        }
    }
    eprintln!(
        "torture: {kills} kills in {:.1}s; acknowledged {} inputs ({} messages, {} webhooks, {} POST commands asked, {} file writes) and {} mails accepted by SMTP; {} events, {} merged; cron occurrences {} ; POSTs seen by the server {}, completed in the trajectory {}; lost {}, left pending {}, merged twice {}, cron twice {}, mail twice {}, POST seen twice {}, completed but unseen {}",
        started.elapsed().as_secs_f64(),
        acked.events.len(),
        acked.messages,
        acked.webhooks,
        acked.posts_asked,
        acked.files,
        acked.mails.len(),
        events.len(),
        merged.len(),
        ticks.len(),
        seen.len(),
        completed,
        lost.len(),
        pending.len(),
        repeated,
        double_ticks,
        mails_twice,
        sent_twice,
        completed_unseen.len()
    );
    eprintln!("POST results other than ok: {other_results:#?}");
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(pending.is_empty(), "never settled: {pending:?}");
    assert_eq!(repeated, 0, "an input was merged twice");
    assert_eq!(double_ticks, 0, "a cron occurrence ran twice: {ticks:?}");
    assert_eq!(mails_twice, 0, "a mail became two events");
    assert_eq!(
        sent_twice, 0,
        "a POST reached the server twice: {seen_count:?}"
    );
    assert!(
        completed_unseen.is_empty(),
        "completed but never seen by the server: {completed_unseen:?}"
    );
    assert!(
        acked.events.len() > kills,
        "the workload got through: {}",
        acked.events.len()
    );
}

//! Reaching the owner: the owner outbox over the real binary — what no session saw is shown
//! by the next chat once, also after `kill -9`; what fires while a chat is open is shown
//! there once; requests for confirmation reach the chat and are answered from it; the
//! daemon's own commands cost no model call.

use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::model::{config, one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{BIN, Running, TestDaemon, run_chat, stdout};

/// Runs `steward chat` with no input until it caught up; its output.
fn chat_once(daemon: &TestDaemon) -> String {
    let output = run_chat(daemon, &[]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

fn outbox(daemon: &TestDaemon) -> Vec<Value> {
    stdout(&daemon.cli(&["outbox", "--json"]))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_notice_nobody_saw_is_shown_by_the_next_chat_once_even_after_kill_9() {
    let daemon = TestDaemon::start();
    let call = daemon.cli(&[
        "tools",
        "call",
        "notify_owner",
        "--args",
        r#"{"text":"the backup finished"}"#,
        "--json",
    ]);
    let line: Value = serde_json::from_str(stdout(&call).trim()).unwrap();
    assert_eq!(line["result"]["queued"], true, "{line}");
    let notices = |daemon: &TestDaemon| -> Vec<Value> {
        outbox(daemon)
            .into_iter()
            .filter(|m| m["kind"] == "notice")
            .collect()
    };
    let queued = notices(&daemon);
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["delivered"], json!({}), "nobody has seen it");

    // Killed between queueing and delivery: the message is still there, once.
    let daemon = daemon.crash_and_restart();
    let first = chat_once(&daemon);
    assert_eq!(
        first.matches("(notice) the backup finished").count(),
        1,
        "{first}"
    );
    let second = chat_once(&daemon);
    assert!(
        !second.contains("the backup finished"),
        "shown again: {second}"
    );
    let delivered = notices(&daemon);
    assert!(
        delivered[0]["delivered"]["socket"].is_string(),
        "{delivered:?}"
    );
}

#[test]
fn a_reminder_set_through_the_model_in_an_open_chat_is_shown_there_when_it_fires_once() {
    let model = ScriptedModel::start(
        vec![
            one_call(
                "call_cron",
                "cron_create",
                json!({"name": "stretch", "schedule": "at +2s", "text": "Remind the owner to stretch."}),
            ),
            text_answer("I will remind you in two seconds."),
            text_answer("Reminder: time to stretch!"),
            text_answer("You are welcome."),
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&config(model.port));
    let mut chat = Running::cli(&daemon, &["chat"]);
    chat.say("in two seconds remind me to stretch");
    chat.wait_for("I will remind you");
    chat.wait_for("Reminder: time to stretch!");
    // Whatever else the daemon does with the run, the reminder is not shown twice.
    std::thread::sleep(Duration::from_secs(2));
    // One model call for the run: its result joins the main conversation as context.
    assert_eq!(model.requests().len(), 3, "{:#?}", model.requests());
    chat.say("thanks");
    chat.wait_for("You are welcome.");
    let next = model.requests()[3]["messages"].to_string();
    assert!(
        next.contains("Reminder: time to stretch!"),
        "the run's result is context for the next turn: {next}"
    );
    let seen = chat.finish();
    assert_eq!(
        seen.iter()
            .filter(|l| l.contains("Reminder: time to stretch!"))
            .count(),
        1,
        "{seen:#?}"
    );
    assert_eq!(
        seen.iter()
            .filter(|l| l.contains("I will remind you"))
            .count(),
        1,
        "the answer to the owner's own line is shown once: {seen:#?}"
    );
}

#[test]
fn the_daemons_commands_make_no_model_call() {
    let model = ScriptedModel::start(vec![text_answer("unused")], 4096);
    let daemon = TestDaemon::start_with(&config(model.port));
    for (command, says) in [
        ("/help", "/pending"),
        ("/status", "pending"),
        ("/pending", "Nothing waits"),
        ("/outbox", "No messages"),
    ] {
        let output = daemon.cli(&["send", command]);
        assert!(output.status.success(), "{command}: {output:?}");
        assert!(stdout(&output).contains(says), "{command}: {output:?}");
    }
    let none = daemon.cli(&["pending"]);
    assert!(stdout(&none).contains("Nothing waits"), "{none:?}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(model.requests().is_empty(), "{:?}", model.requests());
    assert_eq!(
        stdout(&daemon.cli(&["events", "--json"])).lines().count(),
        0,
        "no event for a command"
    );
}

#[test]
fn a_confirmation_raised_by_a_cron_turn_is_answered_from_the_open_chat() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let post = one_call(
        "call_post",
        "http_request",
        json!({"method": "POST", "url": format!("http://127.0.0.1:{}/water", recorder.port), "body": "on"}),
    );
    let model = ScriptedModel::start(
        vec![
            post,
            text_answer("Asked the owner."),
            text_answer("The plants are watered."),
            text_answer("Noted."),
            text_answer("Noted."),
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&format!(
        "{}[http]\nlisten = \"127.0.0.1:0\"\n\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n\n[[cron]]\nname = \"water\"\nschedule = \"every 1h\"\ntext = \"Water the plants.\"\n",
        config(model.port)
    ));
    let stream = event_stream(&daemon);
    let mut chat = Running::cli(&daemon, &["chat"]);
    assert!(daemon.cli(&["cron", "trigger", "water"]).status.success());
    let request = chat.wait_for("(confirmation) http_request waits for your confirmation");
    let streamed = read_until(&stream, "waits for your confirmation");
    let data = streamed
        .iter()
        .rposition(|l| l.starts_with("data:"))
        .unwrap();
    assert!(
        streamed[..data]
            .iter()
            .rev()
            .find(|l| l.starts_with("event:"))
            == Some(&"event: pending".to_owned()),
        "a request for confirmation is a `pending` event: {streamed:#?}"
    );
    let line = chat.wait_for("/confirm ");
    let id = line
        .split("/confirm ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert!(
        id.len() >= 6 && id.len() < 26,
        "a short id: {id} ({request})"
    );
    assert!(recorder.seen().is_empty(), "nothing ran before the answer");
    chat.say(&format!("/confirm {id}"));
    chat.wait_for("(outcome)");
    let seen = chat.finish();
    assert_eq!(recorder.seen().len(), 1, "{seen:#?}");
}

#[test]
fn what_the_model_reads_of_an_owner_message_carries_the_date_and_the_owners_zone() {
    let model = ScriptedModel::start(vec![text_answer("Good morning.")], 4096);
    let daemon = TestDaemon::start_with(&format!(
        "{}\n[owner]\ntimezone = \"Pacific/Auckland\"\n",
        config(model.port)
    ));
    let output = daemon.cli(&["send", "--wait", "what day is it?"]);
    assert!(stdout(&output).contains("Good morning."), "{output:?}");
    let zone: steward_daemon::zone::Zone = "Pacific/Auckland".parse().unwrap();
    let today = chrono::Utc::now().with_timezone(&zone);
    let sent = model.requests()[0]["messages"].to_string();
    let dated = format!(
        "{} Pacific/Auckland, {}",
        today.format("%Y-%m-%d"),
        today.format("%A")
    );
    assert!(
        sent.contains(&today.format("%Y-%m-%d").to_string()) && sent.contains("Pacific/Auckland"),
        "{dated} in {sent}"
    );
    assert!(
        !model.requests()[0]["messages"][0]
            .to_string()
            .contains("Pacific/Auckland"),
        "the date is in the event, not in the system text"
    );
}

#[test]
fn a_bad_owner_zone_is_a_config_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[owner]\ntimezone = \"Mars/Olympus\"\n").unwrap();
    let output = Command::new(BIN)
        .args(["--config", config.to_str().unwrap()])
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    assert!(
        crate::support::stderr(&output).contains("owner.timezone"),
        "{output:?}"
    );
}

/// The event stream carries owner messages with their outbox id, and a client that comes
/// back with `Last-Event-ID` is given what it missed, then what is new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_after_a_disconnect_and_misses_nothing() {
    let daemon = TestDaemon::start_with("[http]\nlisten = \"127.0.0.1:0\"\n");
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let base = format!("http://{address}");
    let token = stdout(&daemon.cli(&["token", "show"])).trim().to_owned();
    let notify = |text: &str| {
        let args = json!({ "text": text }).to_string();
        let output = daemon.cli(&["tools", "call", "notify_owner", "--args", &args, "--json"]);
        let line: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        line["result"]["message_id"].as_u64().unwrap()
    };
    let client = reqwest::Client::new();
    let read_until = |mut stream: reqwest::Response, wanted: &'static str| async move {
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !seen.contains(wanted) {
            assert!(Instant::now() < deadline, "{wanted:?} not in {seen}");
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        seen
    };

    let stream = client
        .get(format!("{base}/v1/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let first = notify("first news");
    let seen = read_until(stream, "first news").await;
    assert!(seen.contains(&format!("id: {first}")), "{seen}");
    assert!(seen.contains("event: message"), "{seen}");

    // Disconnected (the stream above is gone); two messages come meanwhile.
    notify("second news");
    notify("third news");
    let resumed = client
        .get(format!("{base}/v1/stream"))
        .bearer_auth(&token)
        .header("Last-Event-ID", first.to_string())
        .send()
        .await
        .unwrap();
    let fourth_sender = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        notify("fourth news")
    };
    let (seen, _) = tokio::join!(read_until(resumed, "fourth news"), fourth_sender);
    for text in ["second news", "third news", "fourth news"] {
        assert_eq!(seen.matches(text).count(), 1, "{text} once in {seen}");
    }
    assert!(!seen.contains("first news"), "{seen}");
}

/// `steward chat` outlives a daemon restart: it reconnects, sends what was typed while the
/// daemon was away, and goes on showing what comes.
#[test]
fn a_chat_reconnects_after_the_daemon_restarts_and_loses_nothing_typed() {
    let mut daemon = TestDaemon::start();
    let mut chat = Running::cli(&daemon, &["chat"]);
    chat.say(r#"/tool echo {"text":"before the restart"}"#);
    chat.wait_for("before the restart");
    daemon.kill9();
    chat.say(r#"/tool echo {"text":"typed while it was away"}"#);
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    chat.wait_for("typed while it was away");
    let args = json!({"text": "news after the restart"}).to_string();
    daemon.cli(&["tools", "call", "notify_owner", "--args", &args]);
    chat.wait_for("(notice) news after the restart");
    let seen = chat.finish();
    assert_eq!(
        seen.iter()
            .filter(|l| l.contains("typed while it was away"))
            .count(),
        1,
        "{seen:#?}"
    );
}

/// The raw lines of `GET /v1/stream`, read on a thread as they come.
fn event_stream(daemon: &TestDaemon) -> std::sync::mpsc::Receiver<String> {
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let token = stdout(&daemon.cli(&["token", "show"])).trim().to_owned();
    let mut stream = std::net::TcpStream::connect(address.trim()).unwrap();
    write!(
        stream,
        "GET /v1/stream HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// Collects `lines` until one contains `text` (at most 30 s); everything read.
fn read_until(lines: &std::sync::mpsc::Receiver<String>, text: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains(text)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {text:?} in {seen:#?}"),
        }
    }
    seen
}

/// `[owner.deliver]`: the chat is given only notices, the event stream only answers and
/// requests for confirmation (as `pending` events); both kinds are kept in the outbox.
#[test]
fn each_owner_channel_is_given_the_kinds_the_owner_routes_to_it() {
    let model = ScriptedModel::start(
        vec![
            text_answer("The nightly job ran."),
            text_answer("The second run ran."),
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&format!(
        "{}[http]\nlisten = \"127.0.0.1:0\"\n\n[owner.deliver]\nsocket = [\"notices\"]\nhttp = [\"answers\", \"confirmations\"]\n\n[[cron]]\nname = \"nightly\"\nschedule = \"every 1h\"\ntext = \"Run the nightly job.\"\n",
        config(model.port)
    ));
    let stream = event_stream(&daemon);
    let mut chat = Running::cli(&daemon, &["chat"]);
    assert!(daemon.cli(&["cron", "trigger", "nightly"]).status.success());
    let streamed = read_until(&stream, "The nightly job ran.");
    let args = json!({"text": "the disk is nearly full"}).to_string();
    daemon.cli(&["tools", "call", "notify_owner", "--args", &args]);
    chat.wait_for("(notice) the disk is nearly full");
    // The stream had its chance at the notice: a later message proves it came and went.
    daemon.cli(&["cron", "trigger", "nightly"]);
    let later = read_until(&stream, "The second run ran.");
    let streamed: Vec<String> = streamed.into_iter().chain(later).collect();
    assert!(
        !streamed
            .iter()
            .any(|l| l.contains("the disk is nearly full")),
        "{streamed:#?}"
    );
    let seen = chat.finish();
    assert!(
        !seen.iter().any(|l| l.contains("The nightly job ran.")),
        "answers are not routed to the chat: {seen:#?}"
    );
    let kinds: Vec<Value> = outbox(&daemon).iter().map(|m| m["kind"].clone()).collect();
    assert!(
        kinds.contains(&json!("answer")) && kinds.contains(&json!("notice")),
        "{kinds:?}"
    );
}

/// `steward outbox --follow` shows a new message as it is queued and again when it is
/// delivered, and following it delivers nothing.
#[test]
fn the_outbox_can_be_followed_and_following_is_not_a_delivery() {
    let daemon = TestDaemon::start();
    let args = json!({"text": "an old notice"}).to_string();
    daemon.cli(&["tools", "call", "notify_owner", "--args", &args]);
    let mut follow = Running::cli(&daemon, &["outbox", "--follow", "--json"]);
    follow.wait_for("an old notice");
    let args = json!({"text": "a new notice"}).to_string();
    daemon.cli(&["tools", "call", "notify_owner", "--args", &args]);
    let queued: Value = serde_json::from_str(&follow.wait_for("a new notice")).unwrap();
    assert_eq!(queued["delivered"], json!({}), "{queued}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        outbox(&daemon)
            .iter()
            .filter(|m| m["kind"] == "notice")
            .all(|m| m["delivered"] == json!({})),
        "following delivers nothing: {:#?}",
        outbox(&daemon)
    );
    let shown = chat_once(&daemon);
    assert!(shown.contains("a new notice"), "{shown}");
    let delivered: Value = serde_json::from_str(&follow.wait_for_nth("a new notice", 2)).unwrap();
    assert!(delivered["delivered"]["socket"].is_string(), "{delivered}");
    assert_eq!(delivered["id"], queued["id"]);
    follow.stop();

    let human = stdout(&daemon.cli(&["outbox"]));
    assert!(
        human
            .lines()
            .any(|l| l.contains("a new notice") && l.contains("socket")),
        "{human}"
    );
}

/// Without a model, a reminder set with `steward cron add` still reaches the owner when it
/// fires: its text is said as written, once.
#[test]
fn without_a_model_a_reminder_is_said_to_the_owner_as_written() {
    let daemon = TestDaemon::start();
    let mut chat = Running::cli(&daemon, &["chat"]);
    let added = daemon.cli(&[
        "cron",
        "add",
        "tea",
        "--schedule",
        "in 2s",
        "--text",
        "make tea",
    ]);
    assert!(added.status.success(), "{added:?}");
    chat.wait_for("Reminder (tea): make tea");
    std::thread::sleep(Duration::from_millis(500));
    let seen = chat.finish();
    assert_eq!(
        seen.iter().filter(|l| l.contains("make tea")).count(),
        1,
        "{seen:#?}"
    );
}

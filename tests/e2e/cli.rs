//! The command line as a user meets it: config errors, a second instance, no daemon, init,
//! send --wait, chat, listings with --json and --follow.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{BIN, TestDaemon, cli_in, common_args, run_chat, stderr, stdout};

fn run_with_config(config: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    cli_in(dir.path(), &["run"])
}

#[test]
fn bad_config_exits_78_naming_the_key() {
    let table = [
        (
            "[daemon]\nshutdown_grace = 5\n",
            "daemon.shutdown_grace",
            ":2:",
        ),
        (
            "[lanes]\nmax_parallel = \"four\"\n",
            "lanes.max_parallel",
            ":2:",
        ),
        ("[model]\nprovider = \"gpt\"\n", "model.provider", ":2:"),
        // Valid TOML the daemon cannot honour: named with the key, no line.
        (
            "[tools]\ndeny = [\"tool_search\"]\n",
            "tools.deny",
            "cannot be disabled",
        ),
        (
            "[tools]\nallow = [\"group:nonsense\"]\n",
            "tools.allow",
            "group:nonsense",
        ),
        (
            "[email]\nimap_host = \"mail.example.com\"\nimap_tls = \"none\"\nusername = \"a\"\npassword_env = \"P\"\naddress = \"a@example.com\"\n",
            "email.imap_tls",
            "loopback",
        ),
        (
            "[email]\nimap_host = \"127.0.0.1\"\nusername = \"a\"\npassword_env = \"STEWARD_TEST_NO_SUCH_VARIABLE\"\naddress = \"a@example.com\"\n",
            "email.password_env",
            "STEWARD_TEST_NO_SUCH_VARIABLE is not set",
        ),
    ];
    for (config, key, line) in table {
        let output = run_with_config(config);
        assert_eq!(output.status.code(), Some(78), "{config}: {output:?}");
        let message = stderr(&output);
        assert!(message.contains(&format!("`{key}`")), "{config}: {message}");
        assert!(message.contains(line), "{config}: {message}");
    }
}

#[test]
fn a_named_config_file_must_exist_but_the_default_one_may_not() {
    let dir = tempfile::tempdir().unwrap();
    let output = cli_in(dir.path(), &["status"]);
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    assert!(stderr(&output).contains("does not exist"), "{output:?}");

    // No --config and no file at the XDG default: embedded defaults, the daemon starts.
    let output = Command::new(BIN)
        .args([
            "--data-dir",
            &dir.path().join("data").display().to_string(),
            "status",
        ])
        .env("XDG_CONFIG_HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(69),
        "config fine, daemon absent: {output:?}"
    );
}

#[test]
fn a_second_instance_on_the_same_data_dir_is_refused() {
    let daemon = TestDaemon::start();
    let started = Instant::now();
    let output = daemon.cli(&["run"]);
    assert!(!output.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refusal must be immediate"
    );
    let message = stderr(&output);
    assert!(message.contains("another steward instance"), "{message}");
    assert!(
        message.contains(&daemon.path().display().to_string()),
        "{message}"
    );
}

#[test]
fn commands_without_a_daemon_fail_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    for args in [&["send", "hi"][..], &["status"], &["events"]] {
        let output = cli_in(dir.path(), args);
        assert_eq!(output.status.code(), Some(69), "{args:?}");
        assert!(stderr(&output).contains(&dir.path().join("steward.sock").display().to_string()));
    }
}

#[test]
fn init_writes_a_config_the_daemon_runs_on_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    assert!(cli_in(dir.path(), &["init"]).status.success());
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("shutdown_grace_secs"));
    let again = cli_in(dir.path(), &["init"]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("--force"));
    std::fs::write(&config, "# edited\n").unwrap();
    assert!(cli_in(dir.path(), &["init", "--force"]).status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), written);
    // The written file is a valid config: the daemon starts on it.
    let dir_path = dir.path().to_owned();
    let daemon = TestDaemon::start_in(dir);
    assert_eq!(daemon.path(), dir_path);
}

#[test]
fn send_wait_prints_the_replies_and_plain_text_gets_the_no_model_answer() {
    let daemon = TestDaemon::start();
    let output = daemon.cli(&["send", "--wait", r#"/tool echo {"text":"ping"}"#]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), r#"echo: {"text":"ping"}"#);

    let output = daemon.cli(&["send", "--wait", "hello there"]);
    assert!(
        stdout(&output).contains("No model is configured"),
        "{output:?}"
    );

    let output = daemon.cli(&["send", "--wait", r#"/tool sleep {"secs":"x"}"#]);
    assert!(
        stdout(&output).contains("sleep failed: invalid arguments"),
        "{output:?}"
    );

    let output = daemon.cli(&["send", "--wait", "/help"]);
    assert!(stdout(&output).contains("/tool NAME"), "{output:?}");
}

#[test]
fn chat_sends_each_line_and_prints_replies() {
    let daemon = TestDaemon::start();
    let output = run_chat(
        &daemon,
        &[
            r#"/tool echo {"text":"one"}"#,
            r#"/tool echo {"text":"two"}"#,
        ],
    );
    assert!(output.status.success());
    let out = stdout(&output);
    assert!(out.contains(r#"echo: {"text":"one"}"#), "{out}");
    assert!(out.contains(r#"echo: {"text":"two"}"#), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_have_the_documented_json_fields() {
    let daemon = TestDaemon::start();
    daemon.send("/tool echo {\"text\":\"x\"}", None).await;
    daemon
        .wait_for_trajectory("a completed step", |items| {
            items.iter().any(|i| i.kind.name() == "step_completed")
        })
        .await;

    let status: Value = serde_json::from_str(&stdout(&daemon.cli(&["status", "--json"]))).unwrap();
    for field in [
        "pid",
        "uptime_secs",
        "data_dir",
        "channels",
        "inbox_pending",
        "step",
        "events_total",
    ] {
        assert!(
            status.get(field).is_some(),
            "status lacks {field}: {status}"
        );
    }
    assert_eq!(status["step"]["state"], "idle");
    let channels: Vec<&str> = status["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        channels.contains(&"user") && channels.contains(&"timer"),
        "{channels:?}"
    );
    assert_eq!(status["events_total"], 1);

    let events = stdout(&daemon.cli(&["events", "--json", "--state", "merged"]));
    let event: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    for field in [
        "id",
        "source",
        "channel",
        "urgency",
        "state",
        "received_at",
        "trajectory_seq",
    ] {
        assert!(event.get(field).is_some(), "event lacks {field}: {event}");
    }
    assert_eq!(event["trajectory_seq"], 1);
    assert!(stdout(&daemon.cli(&["events", "--json", "--state", "dead"])).is_empty());

    let lines = stdout(&daemon.cli(&["trajectory", "--json", "--limit", "3"]));
    let items: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(items.len(), 3, "--limit keeps the most recent");
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["tool_result", "assistant", "step_completed"],
        "oldest first"
    );
    assert!(items[0]["seq"].is_u64() && items[0]["at"].is_string());
    assert_eq!(items[0]["tool"], "echo");
    assert!(items[0]["call_id"].is_string() && items[0]["result"].is_object());

    let tools = stdout(&daemon.cli(&["tools", "list", "--json"]));
    let sleep: Value = tools
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|t| t["name"] == "sleep")
        .unwrap();
    for field in [
        "description",
        "parameters",
        "side_effect",
        "idempotent",
        "concurrency",
        "tier",
        "groups",
        "result_budget",
        "disableable",
        "allowed_in_lane",
    ] {
        assert!(sleep.get(field).is_some(), "tool lacks {field}: {sleep}");
    }
}

#[test]
fn trajectory_follow_prints_new_items_as_they_come() {
    let daemon = TestDaemon::start();
    let mut child = Command::new(BIN)
        .args(common_args(daemon.path()))
        .args(["trajectory", "--follow", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let sent = stdout(&daemon.cli(&["send", "followed message"]))
        .trim()
        .to_owned();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let item: Value = serde_json::from_str(&line.unwrap()).unwrap();
        seen.push(item["kind"].as_str().unwrap().to_owned());
        if item["kind"] == "step_completed" {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        seen,
        ["event", "step_started", "assistant", "step_completed"]
    );
    assert_eq!(sent.len(), 26);
}

#[test]
fn the_watchdog_is_pinged_and_the_socket_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    let daemon = TestDaemon::start_in_with_env(dir, &[("WATCHDOG_USEC", "200000")]);
    let mut buf = [0u8; 256];
    let mut pings = 0;
    while pings < 3 {
        let n = daemon
            .notify
            .recv(&mut buf)
            .expect("a watchdog ping every 100 ms");
        if String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "WATCHDOG=1")
        {
            pings += 1;
        }
    }
    let mode = std::fs::metadata(daemon.socket())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
    let data_dir = std::fs::metadata(daemon.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(data_dir & 0o077, 0, "data dir mode {data_dir:o}");
}

#[test]
fn sigint_stops_cleanly_with_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    let child = Command::new(BIN)
        .args(common_args(dir.path()))
        .args(["run", "--log-format", "json"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = dir.path().join("steward.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let logs = stderr(&output);
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "SIGINT: shutting down"),
        "{logs}"
    );
    assert!(!socket.exists(), "the socket is removed on shutdown");
}

#[test]
fn events_follow_prints_arrivals_and_state_changes() {
    let daemon = TestDaemon::start();
    daemon.cli(&["send", "before"]);
    let mut child = Command::new(BIN)
        .args(common_args(daemon.path()))
        .args(["events", "--follow", "--json", "--limit", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["text"], "before");
    let sent = stdout(&daemon.cli(&["send", "after"])).trim().to_owned();
    let mut states = Vec::new();
    for line in lines.by_ref() {
        let row: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if row["id"] == sent.as_str() {
            states.push(row["state"].as_str().unwrap().to_owned());
            if row["state"] == "merged" {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(states, ["pending", "merged"]);
}

#[test]
fn notify_owner_reaches_a_chat_session() {
    let daemon = TestDaemon::start();
    let output = run_chat(
        &daemon,
        &[r#"/tool notify_owner {"text":"the build is green"}"#],
    );
    let out = stdout(&output);
    assert!(out.contains("(notice) the build is green"), "{out}");
    assert!(out.contains(r#""queued":true"#), "{out}");
    assert_eq!(
        out.matches("the build is green").count(),
        1,
        "shown once: {out}"
    );
}

#[test]
fn a_listing_piped_into_a_closed_reader_ends_quietly() {
    let daemon = TestDaemon::start();
    // Enough output to fill any pipe buffer, so the reader's departure is always noticed.
    for i in 0..40 {
        daemon.cli(&["send", &format!("message {i} {}", "x".repeat(2000))]);
    }
    let mut child = Command::new(BIN)
        .args(common_args(daemon.path()))
        .args(["events", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(first.starts_with('{'), "{first}");
    drop(reader); // like `| head -1`
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(!stderr(&output).contains("panicked"), "{output:?}");
}

#[test]
fn tools_search_ranks_like_the_model_and_bad_queries_say_why() {
    let daemon = TestDaemon::start();
    let output = daemon.cli(&["tools", "search", "write text into a file", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let names: Vec<String> = stdout(&output)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        names.len() <= 5 && names.contains(&"fs_write".to_owned()),
        "{names:?}"
    );
    let output = daemon.cli(&["tools", "search", "select:fs_read,echo", "--json"]);
    let names: Vec<String> = stdout(&output)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(names, ["fs_read", "echo"]);
    // The shell is not in the default profile: never found.
    let output = daemon.cli(&["tools", "search", "+shell run a command", "--json"]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), "");
    let output = daemon.cli(&["tools", "search", "+"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("must be followed by a word"),
        "{output:?}"
    );
}

#[test]
fn tools_bench_scores_a_labelled_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.jsonl");
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(
        &tools,
        [
            r#"{"id": "weather/forecast", "server": "weather", "name": "forecast", "description": "Weather forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}"#,
            r#"{"id": "mail/send_email", "server": "mail", "name": "send_email", "description": "Send an email", "parameters": null}"#,
            r#"{"id": "notes", "server": null, "name": "notes", "description": "Keep notes", "parameters": null}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    std::fs::write(
        &queries,
        [
            r#"{"qid": "1", "query": "will it rain in Oslo tomorrow, what is the forecast", "relevant": ["weather/forecast"], "kind": "single"}"#,
            r#"{"qid": "2", "query": "email my notes to Bob", "relevant": ["mail/send_email", "notes"], "kind": "multi"}"#,
            r#"{"qid": "3", "query": "jot this down", "relevant": ["x/y"], "relevant_groups": [["notes", "x/y"]], "kind": "single"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    // No daemon and no config needed.
    let output = Command::new(BIN)
        .args(["tools", "bench", "--tools"])
        .arg(&tools)
        .arg("--queries")
        .arg(&queries)
        .args(["--k", "2", "--json"])
        .env("XDG_CONFIG_HOME", dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "build_ms",
            "complete_at_k",
            "mrr",
            "p50_us",
            "p99_us",
            "queries",
            "recall_at_1",
            "recall_at_k",
            "tools"
        ]
    );
    assert_eq!(report["tools"], 3);
    assert_eq!(report["queries"], 3);
    // Query 1 and 2 are found in full within 2; query 3 ("jot this down") shares no word.
    assert_eq!(report["complete_at_k"].as_f64().unwrap(), 2.0 / 3.0);
    assert_eq!(report["recall_at_1"].as_f64().unwrap(), (1.0 + 0.5) / 3.0);

    let output = Command::new(BIN)
        .args(["tools", "bench", "--tools", "/no/such/file", "--queries"])
        .arg(&queries)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(stderr(&output).contains("/no/such/file"), "{output:?}");
}

/// The human listings: a header, times to the second in the local zone, a short text
/// column, long trajectory lines folded to the width, a job's next run in its own zone.
#[test]
fn human_listings_have_headers_local_times_short_text_and_folded_lines() {
    let daemon = TestDaemon::start_with(
        "[[cron]]\nname = \"tokyo\"\nschedule = \"0 9 * * *\"\ntz = \"Asia/Tokyo\"\ntext = \"Good morning\"\n",
    );
    let long = "a message long enough that a listing has to cut it somewhere before the end of a line, surely";
    daemon.cli(&["send", long]);
    let listing = |args: &[&str]| {
        let output = Command::new(BIN)
            .args(common_args(daemon.path()))
            .args(args)
            .env("TZ", "America/New_York")
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        stdout(&output)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stdout(&daemon.cli(&["events"])).contains("merged") {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let events = listing(&["events"]);
    let mut lines = events.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("ID ") && header.contains("RECEIVED") && header.ends_with("TEXT"),
        "{events}"
    );
    let row = lines.next().unwrap();
    let received = chrono::Utc::now()
        .with_timezone(&steward_daemon::zone::Zone::named("America/New_York").unwrap())
        .format("%Y-%m-%d %H:")
        .to_string();
    assert!(row.contains(&received), "local time in {row}");
    assert!(row.ends_with('…') && !row.contains("surely"), "{row}");

    let trajectory = listing(&["trajectory"]);
    assert!(trajectory.starts_with("SEQ "), "{trajectory}");
    assert!(
        trajectory.lines().all(|l| l.chars().count() <= 80),
        "{trajectory}"
    );
    assert!(
        trajectory.contains("surely"),
        "folded, not cut: {trajectory}"
    );
    let today = chrono::Utc::now()
        .with_timezone(&steward_daemon::zone::Zone::named("America/New_York").unwrap())
        .format("%Y-%m-%d")
        .to_string();
    assert!(
        trajectory.contains(&format!("{today} ")) && !trajectory.contains(&format!("{today}T")),
        "dated to the second, no RFC 3339 stamps: {trajectory}"
    );

    let jobs = listing(&["cron", "list"]);
    let tokyo = jobs.lines().find(|l| l.starts_with("tokyo")).unwrap();
    assert!(tokyo.contains(" 09:00 "), "next in the job's zone: {jobs}");
}

/// `steward tools check-shell` classifies without a daemon and without running anything: a
/// command that would create a marker file is classified, and the marker never appears.
#[test]
fn check_shell_classifies_commands_without_running_them() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let input = format!(
        "ls -la\ntouch {}\n{{rm,-rf,~}}\nset -e\\nls\n",
        marker.display()
    );
    let mut child = Command::new(BIN)
        .args(["tools", "check-shell", "--json", "--workspace"])
        .arg(dir.path())
        .args(["--home", "/home/someone"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let rows: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tiers: Vec<&str> = rows.iter().map(|r| r["tier"].as_str().unwrap()).collect();
    assert_eq!(
        tiers,
        ["safe", "dangerous", "catastrophic", "safe"],
        "{rows:#?}"
    );
    assert_eq!(
        rows[3]["command"], "set -e\nls",
        "a literal \\n is a newline"
    );
    assert!(
        rows[2]["reasons"][0].as_str().unwrap().contains('~'),
        "{rows:#?}"
    );
    assert!(!marker.exists(), "nothing was run");
}

//! Living as a service: systemd's notify protocol against a real datagram socket
//! (`NOTIFY_SOCKET`), and SIGHUP reloads.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{TestDaemon, stdout};

/// Every datagram the daemon sends within `window`, as lines, with their arrival times.
fn notifications(daemon: &TestDaemon, window: Duration) -> Vec<(Instant, String)> {
    let deadline = Instant::now() + window;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        daemon
            .notify
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let Ok(n) = daemon.notify.recv(&mut buf) else {
            break;
        };
        let at = Instant::now();
        for line in String::from_utf8_lossy(&buf[..n]).lines() {
            seen.push((at, line.to_owned()));
        }
    }
    seen
}

fn signal(daemon: &TestDaemon, name: &str) {
    let pid = daemon.child.as_ref().unwrap().id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_pings_come_at_half_the_interval_and_stop_when_the_dispatcher_wedges() {
    // WATCHDOG_USEC = 400 ms: a ping (with a STATUS= line) every 200 ms.
    let daemon = TestDaemon::start_with_env(
        "",
        &[
            ("WATCHDOG_USEC", "400000"),
            ("STEWARD_FAILPOINTS", "dispatcher.step:hang"),
        ],
    );
    let healthy = notifications(&daemon, Duration::from_secs(2));
    let pings: Vec<Instant> = healthy
        .iter()
        .filter(|(_, l)| l == "WATCHDOG=1")
        .map(|(at, _)| *at)
        .collect();
    assert!(
        (7..=12).contains(&pings.len()),
        "{} pings in 2 s: {healthy:?}",
        pings.len()
    );
    let gaps: Vec<Duration> = pings.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(400)),
        "{gaps:?}"
    );
    assert!(
        healthy.iter().any(|(_, l)| l.starts_with("STATUS=up ")),
        "{healthy:?}"
    );
    assert!(
        !healthy.iter().any(|(_, l)| l == "READY=1"),
        "READY is sent once, at start"
    );

    // A message makes the dispatcher start a step, where the test hook wedges it.
    daemon.send("hello", None).await;
    // Pings sent before the wedge took hold (buffered in the socket, or in the last
    // interval the heartbeat was fresh) are read and dropped here.
    let _settling = notifications(&daemon, Duration::from_secs(1));
    let wedged = notifications(&daemon, Duration::from_secs(2));
    let late_pings = wedged.iter().filter(|(_, l)| l == "WATCHDOG=1").count();
    assert_eq!(
        late_pings, 0,
        "a wedged dispatcher must stop pinging: {wedged:?}"
    );
    assert!(
        daemon.child.as_ref().is_some(),
        "the process is still there; systemd would kill it"
    );
}

#[test]
fn sigterm_says_stopping() {
    let mut daemon = TestDaemon::start_with("");
    signal(&daemon, "-TERM");
    let seen = notifications(&daemon, Duration::from_secs(5));
    assert!(seen.iter().any(|(_, l)| l == "STOPPING=1"), "{seen:?}");
    let status = daemon.child.take().unwrap().wait().unwrap();
    assert!(status.success());
}

fn status_json(daemon: &TestDaemon) -> Value {
    serde_json::from_str(stdout(&daemon.cli(&["status", "--json"])).trim()).unwrap()
}

fn call(daemon: &TestDaemon, tool: &str) -> Value {
    let output = daemon.cli(&[
        "tools",
        "call",
        tool,
        "--args",
        "{\"text\":\"hi\"}",
        "--json",
    ]);
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_the_policy_reports_a_bad_file_and_names_what_needs_a_restart() {
    let daemon = TestDaemon::start_with("");
    assert_eq!(call(&daemon, "echo")["outcome"], "ok");
    let config = daemon.path().join("config.toml");

    // A policy rule arrives by SIGHUP and applies to the next call, no restart.
    std::fs::write(
        &config,
        "[[tools.policy]]\nid = \"no-echo\"\ntool = \"echo\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    signal(&daemon, "-HUP");
    let seen = notifications(&daemon, Duration::from_secs(2));
    let lines: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    let reloading = lines
        .iter()
        .position(|l| *l == "RELOADING=1")
        .expect("RELOADING=1");
    assert!(
        lines[reloading..].contains(&"READY=1"),
        "READY=1 after RELOADING=1: {lines:?}"
    );
    let denied = call(&daemon, "echo");
    assert_eq!(denied["outcome"], "denied", "{denied}");
    assert!(
        denied["reason"].as_str().unwrap().contains("no-echo"),
        "{denied}"
    );

    // A broken file: the old config keeps running, and status says why.
    std::fs::write(&config, "[tools]\nprofile = \"everything\"\n").unwrap();
    signal(&daemon, "-HUP");
    notifications(&daemon, Duration::from_millis(500));
    let status = status_json(&daemon);
    let error = status["config_error"].as_str().unwrap_or_default();
    assert!(error.contains("tools.profile"), "{status}");
    assert!(stdout(&daemon.cli(&["status"])).contains("INVALID, still running the previous one"));
    assert_eq!(
        call(&daemon, "echo")["outcome"],
        "denied",
        "the previous policy still holds"
    );

    // Fixed, with a section only a restart applies: the error clears, the section is named.
    std::fs::write(
        &config,
        "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
    )
    .unwrap();
    signal(&daemon, "-HUP");
    notifications(&daemon, Duration::from_millis(500));
    let status = status_json(&daemon);
    assert_eq!(status["config_error"], Value::Null, "{status}");
    assert_eq!(
        status["restart_needed"],
        serde_json::json!(["model"]),
        "{status}"
    );
    assert_eq!(
        call(&daemon, "echo")["outcome"],
        "ok",
        "the deny rule is gone"
    );
    assert_eq!(
        status["brain"], "none",
        "the model changes at the next start"
    );
}

fn steward(args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::support::BIN)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn config_check_applies_the_daemons_own_start_up_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let good = file(
        "good.toml",
        "[[cron]]\nname = \"brief\"\nschedule = \"0 7 * * *\"\ntz = \"Europe/Berlin\"\ntext = \"hi\"\n\n[[cron]]\nname = \"daily\"\nschedule = \"@daily\"\ntext = \"hi\"\n\n[[cron]]\nname = \"first-weekday\"\nschedule = \"0 9 1W * *\"\ntext = \"hi\"\n",
    );
    let output = steward(&["config", "check", &good]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output), format!("{good}: ok\n"));
    for (name, text, says) in [
        ("syntax.toml", "[daemon\n", "syntax.toml:1"),
        (
            "range.toml",
            "[lanes]\nmax_parallel = 0\n",
            "lanes.max_parallel",
        ),
        // Valid as a file; refused by the daemon's own checks at start.
        (
            "zone.toml",
            "[[cron]]\nname = \"x\"\nschedule = \"0 7 * * *\"\ntz = \"Mars/Olympus\"\ntext = \"hi\"\n",
            "cron[0].tz",
        ),
        (
            "deny.toml",
            "[tools]\ndeny = [\"tool_search\"]\n",
            "tools.deny",
        ),
        (
            "hour.toml",
            "[[cron]]\nname = \"x\"\nschedule = \"0 25 * * *\"\ntext = \"hi\"\n",
            "cron[0].schedule`: invalid cron expression \"0 25 * * *\": the hour field has 25; allowed 0–23",
        ),
        (
            "weekday.toml",
            "[[cron]]\nname = \"x\"\nschedule = \"0 0 15W * MON\"\ntext = \"hi\"\n",
            "cannot be combined with a day of week",
        ),
        (
            "secret.toml",
            "[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"STEWARD_TEST_UNSET_SECRET\"\n",
            "webhook.routes[0].secret_env",
        ),
    ] {
        let output = steward(&["config", "check", &file(name, text)]);
        assert_eq!(output.status.code(), Some(78), "{name}: {output:?}");
        assert!(
            crate::support::stderr(&output).contains(says),
            "{name}: {output:?}"
        );
    }
}

#[test]
fn config_schema_describes_every_table() {
    let output = steward(&["config", "schema"]);
    assert!(output.status.success());
    let schema: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(schema["title"], "steward config.toml");
    assert_eq!(schema["additionalProperties"], false);
    let tables: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for table in [
        "daemon",
        "inbox",
        "dispatcher",
        "lanes",
        "model",
        "urgency",
        "tools",
        "mcp",
        "cron",
        "watch",
        "http",
        "webhook",
        "senders",
        "email",
    ] {
        assert!(tables.contains(&table), "{table} in {tables:?}");
    }
}

/// The data dir's `log` tree, opened while no daemon runs.
fn log_tree(data_dir: &std::path::Path) -> (sled::Db, sled::Tree) {
    let db = sled::open(data_dir.join("db")).unwrap();
    let log = db.open_tree("log").unwrap();
    (db, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_of_the_previous_schema_is_migrated_and_a_newer_one_refused() {
    let config = "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"ci\"\nauth = \"bearer\"\nsecret_env = \"T_BEARER\"\n\n[senders]\nunknown = \"reject\"\n";
    let env = [("T_BEARER", "ci-token")];
    let mut daemon = TestDaemon::start_with_env(config, &env);
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let response = reqwest::Client::new()
        .post(format!("http://{address}/hooks/ci"))
        .bearer_auth("ci-token")
        .header("Idempotency-Key", "k1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403, "an unknown sender is refused");
    assert!(daemon.terminate().success());
    let dedupe_key = b"dwebhook:ci:k1".to_vec();

    // Make it a schema-1 data dir: no version, and no dedupe entry for the rejected event.
    {
        let (db, log) = log_tree(daemon.path());
        assert_eq!(
            log.get(b"m/schema").unwrap().as_deref(),
            Some(&2u32.to_be_bytes()[..])
        );
        assert!(
            log.get(&dedupe_key).unwrap().is_some(),
            "schema 2 keeps the key"
        );
        log.remove(b"m/schema").unwrap();
        log.remove(&dedupe_key).unwrap();
        db.flush().unwrap();
    }
    let dir = daemon.into_dir();
    let mut daemon = TestDaemon::start_in_with_env(dir, &env);
    assert!(
        daemon.events().await.iter().any(|e| e.state == "rejected"),
        "the data is all there"
    );
    assert!(daemon.terminate().success());
    {
        let (db, log) = log_tree(daemon.path());
        assert_eq!(
            log.get(b"m/schema").unwrap().as_deref(),
            Some(&2u32.to_be_bytes()[..])
        );
        assert!(
            log.get(&dedupe_key).unwrap().is_some(),
            "the migration restored the entry"
        );
        log.insert(b"m/schema", &99u32.to_be_bytes()).unwrap();
        db.flush().unwrap();
    }
    let output = std::process::Command::new(crate::support::BIN)
        .args(crate::support::common_args(daemon.path()))
        .arg("run")
        .envs(env)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    assert!(
        crate::support::stderr(&output).contains("written by a newer steward (data schema 99"),
        "{output:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_version_is_told_before_its_answer() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let daemon = TestDaemon::start();
    let stream = tokio::net::UnixStream::connect(daemon.socket())
        .await
        .unwrap();
    let (reader, mut writer) = stream.into_split();
    writer
        .write_all(b"{\"op\":\"status\",\"client_version\":\"0.0.1\"}\n")
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(reader).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["type"], "version_mismatch", "{first}");
    assert_eq!(first["client_version"], "0.0.1");
    assert_eq!(first["daemon_version"], env!("CARGO_PKG_VERSION"));
    let second: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(second["type"], "status", "the answer follows");
    assert_eq!(second["status"]["version"], env!("CARGO_PKG_VERSION"));
    // The CLI itself is the same version: no warning.
    let output = daemon.cli(&["status"]);
    assert!(
        !crate::support::stderr(&output).contains("warning"),
        "{output:?}"
    );
    assert!(stdout(&output).contains(&format!("version        {}", env!("CARGO_PKG_VERSION"))));
}

fn doctor(dir: &std::path::Path, env: &[(&str, &str)]) -> (bool, Value) {
    let output = std::process::Command::new(crate::support::BIN)
        .args(crate::support::common_args(dir))
        .args(["doctor", "--json"])
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let report: Value =
        serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    assert_eq!(report["ok"], output.status.success(), "{report}");
    (output.status.success(), report)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_good_setup_and_names_what_is_broken() {
    crate::mail::stack();
    let (assistant, owner) = (
        crate::mail::address("steward"),
        crate::mail::address("owner"),
    );
    let env = [(crate::mail::PASSWORD_ENV, crate::mail::PASSWORD)];
    let daemon = TestDaemon::start_with_env(&crate::mail::config(&assistant, &owner, ""), &env);
    let (ok, report) = doctor(daemon.path(), &env);
    assert!(ok, "{report:#}");
    for name in [
        "config", "data_dir", "daemon", "imap", "smtp", "model", "clock",
    ] {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }
    assert!(
        check(&report, "daemon")["detail"]
            .as_str()
            .unwrap()
            .contains(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        check(&report, "service")["status"],
        "warn",
        "not installed here"
    );
    drop(daemon);

    // Broken: a wrong password, a model nobody serves, a data dir others can read, a
    // watch of a directory tree, and no daemon.
    let dir = tempfile::tempdir().unwrap();
    let config = crate::mail::config(&assistant, &owner, "")
        + "\n[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n"
        + format!(
            "\n[[watch]]\nname = \"tree\"\npath = {:?}\n",
            dir.path().display().to_string()
        )
        .as_str();
    for sub in ["a/b", "a/c", "d"] {
        std::fs::create_dir_all(dir.path().join("tree").join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (ok, report) = doctor(dir.path(), &[(crate::mail::PASSWORD_ENV, "wrong")]);
    assert!(!ok);
    assert_eq!(check(&report, "imap")["status"], "fail", "{report:#}");
    assert!(
        check(&report, "imap")["detail"]
            .as_str()
            .unwrap()
            .contains("login"),
        "{report:#}"
    );
    assert_eq!(check(&report, "smtp")["status"], "fail", "{report:#}");
    assert_eq!(check(&report, "model")["status"], "fail", "{report:#}");
    assert!(
        check(&report, "model")["fix"]
            .as_str()
            .unwrap()
            .contains("base_url")
    );
    assert_eq!(check(&report, "data_dir")["status"], "warn", "{report:#}");
    assert_eq!(check(&report, "daemon")["status"], "warn", "{report:#}");
    let inotify = check(&report, "inotify");
    assert_eq!(inotify["status"], "pass", "{report:#}");
    assert!(
        inotify["detail"].as_str().unwrap().starts_with("about "),
        "{inotify}"
    );

    // And a config the daemon would refuse.
    std::fs::write(
        dir.path().join("config.toml"),
        "[lanes]\nmax_parallel = 0\n",
    )
    .unwrap();
    let (ok, report) = doctor(dir.path(), &[]);
    assert!(!ok);
    assert_eq!(check(&report, "config")["status"], "fail");
    assert!(
        check(&report, "config")["detail"]
            .as_str()
            .unwrap()
            .contains("lanes.max_parallel")
    );
}

async fn post_until(daemon: &TestDaemon, token: &str, expected: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap_or_default();
        let status = reqwest::Client::new()
            .post(format!("http://{address}/hooks/ci"))
            .bearer_auth(token)
            .header("Idempotency-Key", ulid::Ulid::generate().to_string())
            .body("{}")
            .send()
            .await
            .map(|r| r.status().as_u16());
        if status.as_ref().ok() == Some(&expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "expected {expected} for {token}, got {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_restarts_the_http_server_with_new_routes_and_keeps_it_on_a_bad_secret() {
    let route = |var: &str| {
        format!(
            "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"ci\"\nauth = \"bearer\"\nsecret_env = \"{var}\"\n"
        )
    };
    let env = [("T_OLD", "old-token"), ("T_NEW", "new-token")];
    let daemon = TestDaemon::start_with_env(&route("T_OLD"), &env);
    post_until(&daemon, "old-token", 202).await;
    let config = daemon.path().join("config.toml");

    std::fs::write(&config, route("T_NEW")).unwrap();
    signal(&daemon, "-HUP");
    post_until(&daemon, "new-token", 202).await;
    post_until(&daemon, "old-token", 401).await;
    assert_eq!(
        status_json(&daemon)["restart_needed"],
        serde_json::json!([])
    );

    // A route whose secret is missing: refused before anything stops.
    std::fs::write(&config, route("T_MISSING")).unwrap();
    signal(&daemon, "-HUP");
    notifications(&daemon, Duration::from_millis(500));
    let status = status_json(&daemon);
    assert!(
        status["config_error"]
            .as_str()
            .unwrap()
            .contains("webhook.routes[0].secret_env"),
        "{status}"
    );
    post_until(&daemon, "new-token", 202).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_moves_the_email_channel_and_its_tools_to_a_new_account() {
    crate::mail::stack();
    let (first, second, owner) = (
        crate::mail::address("first"),
        crate::mail::address("second"),
        crate::mail::address("owner"),
    );
    let env = [(crate::mail::PASSWORD_ENV, crate::mail::PASSWORD)];
    let config = |assistant: &str| {
        crate::mail::config(assistant, &owner, "require_authentication = false\n")
    };
    let daemon = TestDaemon::start_with_env(&config(&first), &env);
    let idle = |s: &steward_protocol::StatusReport| {
        s.channels
            .iter()
            .any(|c| c.name == "email" && c.state == "idle")
    };
    daemon.wait_for_status("idle", idle).await;

    std::fs::write(daemon.path().join("config.toml"), config(&second)).unwrap();
    signal(&daemon, "-HUP");
    notifications(&daemon, Duration::from_millis(300));
    daemon
        .wait_for_status("idle on the new account", idle)
        .await;
    let raw = crate::mail::message(&owner, &second, "to the new box", "x", "", false);
    crate::mail::deliver(&owner, &second, raw.as_bytes()).await;
    let events = daemon
        .wait_for_events("mail to the new account", |events| {
            events.iter().any(|e| e.text.contains("to the new box"))
        })
        .await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.channel.starts_with("email:"))
            .count(),
        1
    );
    // The tools read the new mailbox too.
    let output = daemon.cli(&["tools", "call", "email_search", "--args", "{}", "--json"]);
    let found: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(
        found["result"]["messages"][0]["subject"], "to the new box",
        "{found}"
    );
    assert_eq!(
        status_json(&daemon)["restart_needed"],
        serde_json::json!([])
    );
}

/// Another user cannot use the control socket: refused by the socket file's mode, and —
/// when the file is opened up — by the daemon's check of the peer's uid. The user is
/// created for the test and removed after it.
#[test]
#[cfg_attr(
    not(test_as_root),
    ignore = "needs root: it creates a user to try the socket as someone else"
)]
fn another_user_cannot_use_the_control_socket() {
    use std::os::unix::fs::PermissionsExt;
    let open_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open_dir.path().join("steward.sock");
    let daemon = TestDaemon::start_with(&format!(
        "[daemon]\nsocket_path = \"{}\"\n",
        socket.display()
    ));
    let user = format!("stwprobe{}", std::process::id() % 100_000);
    let created = std::process::Command::new("useradd")
        .args(["--no-create-home", "--shell", "/usr/sbin/nologin", &user])
        .status()
        .unwrap();
    assert!(created.success(), "useradd {user}");
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::process::Command::new("userdel").arg(&self.0).status();
        }
    }
    let _remove = Remove(user.clone());
    // The other user speaks the protocol with python's socket module.
    let probe = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({:?})\nexcept OSError as e:\n    print('refused:', e.strerror); raise SystemExit\ntry:\n    s.sendall(b'{{\"type\":\"status\"}}\\n')\n    print('answer:', s.recv(4096).decode() or 'closed')\nexcept OSError as e:\n    print('answer: closed', e.strerror)\n",
        socket.display().to_string()
    );
    let run_as_other = || {
        let output = std::process::Command::new("runuser")
            .args(["-u", &user, "--", "python3", "-c", &probe])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let by_mode = run_as_other();
    assert!(by_mode.contains("refused: Permission denied"), "{by_mode}");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let by_uid = run_as_other();
    assert!(
        by_uid.contains("answer: closed"),
        "the daemon hung up: {by_uid}"
    );
    // The owner still gets answers.
    assert!(daemon.cli(&["status"]).status.success());
}

//! Scheduled jobs through the real daemon and real time: occurrences become events exactly
//! once across `kill -9`, missed runs follow each job's policy, one-shot jobs fire once.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use steward_protocol::EventRow;

use crate::support::{TestDaemon, stdout, wait_until};

fn job(name: &str, schedule: &str, extra: &str) -> String {
    format!(
        "[[cron]]\nname = \"{name}\"\nschedule = \"{schedule}\"\ntz = \"UTC\"\ntext = \"{name} fired\"\nurgency = \"queue\"\n{extra}\n"
    )
}

async fn occurrences(daemon: &TestDaemon, name: &str) -> Vec<EventRow> {
    daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e.channel == format!("cron:{name}"))
        .collect()
}

/// Scheduled instants that appear more than once among the occurrence events.
fn repeated(rows: &[EventRow]) -> Vec<DateTime<Utc>> {
    let mut seen: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
    for row in rows {
        *seen.entry(row.occurred_at).or_default() += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(at, _)| at)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_every_two_seconds_fires_once_per_occurrence_across_kill_9() {
    let mut daemon = TestDaemon::start_with(&job("tick", "*/2 * * * * *", ""));
    tokio::time::sleep(Duration::from_millis(5200)).await;
    let before = occurrences(&daemon, "tick").await;
    assert!(before.len() >= 2, "{before:#?}");
    daemon.kill9();
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    tokio::time::sleep(Duration::from_millis(4200)).await;
    let after = occurrences(&daemon, "tick").await;
    assert!(
        after.len() >= before.len() + 2,
        "it kept firing: {after:#?}"
    );
    assert_eq!(repeated(&after), Vec::<DateTime<Utc>>::new(), "{after:#?}");
    assert!(
        after.iter().all(|e| e.state != "duplicate"),
        "claims are checked before submitting: {after:#?}"
    );
    // Every occurrence is on the two-second grid, and they were merged into the trajectory.
    for row in &after {
        assert_eq!(row.occurred_at.timestamp() % 2, 0, "{row:?}");
        assert_eq!(row.source, steward_events::Source::Timer);
    }
    assert!(after.iter().filter(|e| e.state == "merged").count() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_runs_follow_each_jobs_policy() {
    let config = [
        job("skipper", "*/2 * * * * *", "missed = \"skip\""),
        job("oncer", "*/2 * * * * *", "missed = \"once\""),
        job("aller", "*/2 * * * * *", "missed = \"all\""),
    ]
    .concat();
    let mut daemon = TestDaemon::start_with(&config);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(daemon.terminate().success());
    let stopped_at = Utc::now();
    // At least three occurrences of each fall while it is down.
    tokio::time::sleep(Duration::from_millis(7000)).await;
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);

    // The catch-up looks at every job with one `now`, before any occurrence fires on time, so
    // once the skipper has run on time again, all three are caught up. The gap it handled ends
    // at its latest missed occurrence: on a loaded machine the restart may take longer than
    // the grid's two seconds, so the test's own clock cannot tell where the gap ended.
    let after_stop = |e: &EventRow| e.channel == "cron:skipper" && e.occurred_at > stopped_at;
    daemon
        .wait_for_events("the skipper to run on time after the restart", |rows| {
            rows.iter().any(|e| after_stop(e) && e.state != "missed")
        })
        .await;
    let gap_end = occurrences(&daemon, "skipper")
        .await
        .iter()
        .filter(|e| e.occurred_at > stopped_at && e.state == "missed")
        .map(|e| e.occurred_at)
        .max()
        .expect("the skipper missed occurrences while stopped");
    let during_stop = |rows: &[EventRow]| -> (Vec<DateTime<Utc>>, usize) {
        let rows: Vec<&EventRow> = rows
            .iter()
            .filter(|e| e.occurred_at > stopped_at && e.occurred_at <= gap_end)
            .collect();
        let ran = rows
            .iter()
            .filter(|e| e.state != "missed")
            .map(|e| e.occurred_at)
            .collect();
        (ran, rows.iter().filter(|e| e.state == "missed").count())
    };
    let (ran, missed) = during_stop(&occurrences(&daemon, "skipper").await);
    assert_eq!(ran, Vec::<DateTime<Utc>>::new(), "skip runs none");
    assert!(missed >= 3, "each skipped one is recorded: {missed}");
    let (ran, missed) = during_stop(&occurrences(&daemon, "oncer").await);
    assert_eq!(ran, vec![gap_end], "once runs the latest");
    assert!(missed >= 2, "{missed}");
    let (ran, missed) = during_stop(&occurrences(&daemon, "aller").await);
    assert!(ran.len() >= 3, "all runs each: {ran:?}");
    assert_eq!(missed, 0);
    let skipped = occurrences(&daemon, "skipper").await;
    let row = skipped.iter().find(|e| e.state == "missed").unwrap();
    assert!(
        row.detail.as_deref().unwrap().contains("not running"),
        "{row:?}"
    );
}

/// A one-shot job in the config file fires once — not again after a restart, which reads
/// the same `at +1s` — and stays listed with nothing left to run; one made at run time is
/// gone once it fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_job_fires_once_and_is_gone() {
    let mut daemon = TestDaemon::start_with(&job("reminder", "at +1s", ""));
    cron_add(&daemon, "soon", "at +1s", "soon");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let rows = occurrences(&daemon, "reminder").await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].text, "reminder fired");
    assert_eq!(occurrences(&daemon, "soon").await.len(), 1);
    let status = stdout(&daemon.cli(&["status"]));
    assert!(status.contains("timer"), "{status}");

    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let rows = occurrences(&daemon, "reminder").await;
    assert_eq!(rows.len(), 1, "fired again after the restart: {rows:#?}");
    let listed = jobs(&daemon);
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["name"], "reminder");
    assert!(listed[0]["next_run"].is_null(), "{listed:#?}");
}

#[test]
fn a_bad_schedule_or_zone_is_a_config_error() {
    for (config, key) in [
        (job("x", "every fortnight", ""), "cron[0].schedule"),
        (
            job("x", "0 7 * * *", "").replace("tz = \"UTC\"", "tz = \"Mars/Base\""),
            "cron[0].tz",
        ),
        // A schedule found good for one job is not taken as good in another zone.
        (
            job("x", "0 7 * * *", "")
                + job("y", "0 7 * * *", "")
                    .replace("tz = \"UTC\"", "tz = \"Mars/Base\"")
                    .as_str(),
            "cron[1].tz",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), &config).unwrap();
        let output = std::process::Command::new(crate::support::BIN)
            .args(crate::support::common_args(dir.path()))
            .arg("run")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(78), "{output:?}");
        assert!(crate::support::stderr(&output).contains(key), "{output:?}");
    }
}

/// Adds a runtime job with `steward cron add`, which must succeed.
fn cron_add(daemon: &TestDaemon, name: &str, schedule: &str, text: &str) {
    let output = daemon.cli(&["cron", "add", name, "--schedule", schedule, "--text", text]);
    assert!(output.status.success(), "{output:?}");
}

fn jobs(daemon: &TestDaemon) -> Vec<serde_json::Value> {
    let output = daemon.cli(&["cron", "list", "--json"]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The config's jobs are written after READY (`channels::timer::config_jobs`): whoever asks
/// at once still sees every one of them, and a runtime job made in that window is kept.
#[test]
fn a_large_config_s_jobs_are_all_there_for_whoever_asks_right_after_ready() {
    let count = 3000;
    let config: String = (0..count)
        .map(|i| {
            job(
                &format!("job-{i}"),
                &format!("{} {} * * *", i % 60, i % 24),
                "",
            )
        })
        .collect();
    let daemon = TestDaemon::start_with(&config);
    cron_add(&daemon, "early", "0 6 * * *", "early");
    let listed = jobs(&daemon);
    assert_eq!(
        listed.len(),
        count + 1,
        "every config job and the runtime one"
    );
    assert!(
        listed
            .iter()
            .any(|j| j["name"] == "early" && j["origin"] == "runtime")
    );
    assert_eq!(
        listed.iter().filter(|j| j["origin"] == "config").count(),
        count
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_managed_from_the_cli_and_by_tools_and_persist() {
    let mut daemon = TestDaemon::start_with(&job("daily", "0 7 * * *", ""));
    // A runtime job made by a tool call (as the model would), and one from the CLI.
    let args = r#"{"name":"standup","schedule":"30 9 * * 1-5","tz":"Europe/Berlin","text":"standup in 5 minutes"}"#;
    let output = daemon.cli(&["tools", "call", "cron_create", "--args", args, "--json"]);
    assert!(output.status.success(), "{output:?}");
    cron_add(&daemon, "soon", "at +1s", "one-shot");
    let bad = daemon.cli(&[
        "cron",
        "add",
        "bad",
        "--schedule",
        "every now and then",
        "--text",
        "x",
    ]);
    assert!(!bad.status.success());
    assert!(
        crate::support::stderr(&bad).contains("not a duration"),
        "{bad:?}"
    );

    let listed = jobs(&daemon);
    let names: Vec<&str> = listed.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["daily", "soon", "standup"]);
    let standup = &listed[2];
    assert_eq!(standup["origin"], "runtime");
    assert_eq!(standup["tz"], "Europe/Berlin");
    assert!(standup["next_run"].is_string(), "{standup}");

    // The one-shot fires once and is then gone.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(occurrences(&daemon, "soon").await.len(), 1);
    assert!(jobs(&daemon).iter().all(|j| j["name"] != "soon"));

    // Trigger by hand: an event now, marked manual, the schedule untouched.
    let output = daemon.cli(&["cron", "trigger", "daily"]);
    assert!(output.status.success(), "{output:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(occurrences(&daemon, "daily").await.len(), 1);

    // Pause and resume; a config job cannot be removed here, a runtime one can.
    assert!(daemon.cli(&["cron", "pause", "daily"]).status.success());
    assert_eq!(jobs(&daemon)[0]["paused"], true);
    assert!(jobs(&daemon)[0]["next_run"].is_null());
    assert!(daemon.cli(&["cron", "resume", "daily"]).status.success());
    let refused = daemon.cli(&["cron", "remove", "daily"]);
    assert!(
        crate::support::stderr(&refused).contains("config file"),
        "{refused:?}"
    );

    // Runtime jobs survive a restart untouched by the config's reconciliation.
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    let names: Vec<String> = jobs(&daemon)
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["daily", "standup"]);
    assert!(daemon.cli(&["cron", "remove", "standup"]).status.success());
    assert_eq!(jobs(&daemon).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reconciles_jobs_and_watches_and_keeps_them_on_a_bad_file() {
    let watched = tempfile::tempdir().unwrap();
    let watch = format!(
        "[[watch]]\nname = \"w\"\npath = {:?}\n",
        watched.path().display().to_string()
    );
    let daemon = TestDaemon::start_with(&format!("{}{watch}", job("first", "0 7 * * *", "")));
    assert_eq!(jobs(&daemon).len(), 1);
    let hup = |daemon: &TestDaemon| {
        let pid = daemon.child.as_ref().unwrap().id().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-HUP", &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    let config = daemon.path().join("config.toml");
    std::fs::write(&config, job("second", "every 1h", "")).unwrap();
    hup(&daemon);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let names = |daemon: &TestDaemon| -> Vec<String> {
        jobs(daemon)
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_owned())
            .collect()
    };
    while names(&daemon) != ["second"] {
        assert!(std::time::Instant::now() < deadline, "{:?}", names(&daemon));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watches = stdout(&daemon.cli(&["watch", "list", "--json"]));
    assert!(watches.is_empty(), "the removed watch stopped: {watches}");

    // A broken file changes nothing; the daemon keeps running.
    std::fs::write(
        &config,
        "[[cron]]\nname = \"third\"\nschedule = \"whenever\"\ntext = \"x\"\n",
    )
    .unwrap();
    hup(&daemon);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(names(&daemon), ["second"]);
    assert!(daemon.cli(&["status"]).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_action_runs_where_its_tool_may_run_and_says_only_its_outcome() {
    // Default urgency (parallel): `echo` may run in a side lane; `fs_write` may not, so its
    // job runs in the main trajectory, rather than being refused by the lane.
    let daemon = TestDaemon::start_with(
        "[[cron]]\nname = \"water\"\nschedule = \"at +1s\"\naction = { tool = \"fs_write\", args = { path = \"plants.txt\", content = \"dry\" } }\n\
         [[cron]]\nname = \"ping\"\nschedule = \"at +1s\"\naction = { tool = \"echo\", args = { text = \"pong\" } }\n",
    );
    wait_until(30, "the job's file is written", || async {
        stdout(&daemon.cli(&["outbox", "--json"])).contains(r#"\"created\":true"#)
    })
    .await;
    wait_until(30, "both occurrences are merged", || async {
        let events = daemon.events().await;
        ["water", "ping"].iter().all(|job| {
            events
                .iter()
                .any(|e| e.channel == format!("cron:{job}") && e.state == "merged")
        })
    })
    .await;
    let events = daemon.events().await;
    let trajectory_of = |job: &str| {
        events
            .iter()
            .find(|e| e.channel == format!("cron:{job}"))
            .and_then(|e| e.trajectory.clone())
            .unwrap_or_default()
    };
    assert_eq!(trajectory_of("water"), "main", "{events:#?}");
    assert!(trajectory_of("ping").starts_with("lane:"), "{events:#?}");
    let outbox = stdout(&daemon.cli(&["outbox", "--json"]));
    assert!(
        !outbox.contains("lane.tools"),
        "not refused by the lane: {outbox}"
    );
    assert!(
        !outbox.contains("Reminder ("),
        "an action says its outcome only: {outbox}"
    );
}

//! Scheduled jobs through the real daemon and real time: occurrences become events exactly
//! once across `kill -9`, missed runs follow each job's policy, one-shot jobs go away.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use steward_daemon::protocol::EventRow;

use crate::support::{TestDaemon, stdout};

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
    let restarted_at = Utc::now();
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let during_stop = |rows: &[EventRow]| -> (usize, usize) {
        let rows: Vec<&EventRow> = rows
            .iter()
            .filter(|e| e.occurred_at > stopped_at && e.occurred_at < restarted_at)
            .collect();
        let missed = rows.iter().filter(|e| e.state == "missed").count();
        (rows.len() - missed, missed)
    };
    let (ran, missed) = during_stop(&occurrences(&daemon, "skipper").await);
    assert_eq!(ran, 0, "skip runs none");
    assert!(missed >= 3, "each skipped one is recorded: {missed}");
    let (ran, missed) = during_stop(&occurrences(&daemon, "oncer").await);
    assert_eq!(ran, 1, "once runs the latest");
    assert!(missed >= 2, "{missed}");
    let (ran, missed) = during_stop(&occurrences(&daemon, "aller").await);
    assert!(ran >= 3, "all runs each: {ran}");
    assert_eq!(missed, 0);
    let skipped = occurrences(&daemon, "skipper").await;
    let row = skipped.iter().find(|e| e.state == "missed").unwrap();
    assert!(
        row.detail.as_deref().unwrap().contains("not running"),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_job_fires_once_and_is_gone() {
    let daemon = TestDaemon::start_with(&job("reminder", "at +1s", ""));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let rows = occurrences(&daemon, "reminder").await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].text, "reminder fired");
    let status = stdout(&daemon.cli(&["status"]));
    assert!(status.contains("timer"), "{status}");
}

#[test]
fn a_bad_schedule_or_zone_is_a_config_error() {
    for (config, key) in [
        (job("x", "every fortnight", ""), "cron[0].schedule"),
        (
            job("x", "0 7 * * *", "").replace("tz = \"UTC\"", "tz = \"Mars/Base\""),
            "cron[0].tz",
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

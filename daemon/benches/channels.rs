//! Timer and file-watch benchmarks (targets from their issue; figures, not assertions), on
//! the real binary:
//! - 10,000 scheduled jobs from the config: start-up time, RSS against an empty daemon, and
//!   CPU while idle (no job due during the measurement);
//! - a burst of 10,000 files written into a watched directory: events produced, time from
//!   the last write until the last event, peak RSS.
//!
//! Run: `cargo bench -p steward-daemon --bench channels` (add `-- quick` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::process::{Child, Command};
use std::time::Duration;

use tokio::time::Instant;

mod support;
use support::{cpu_time, ms, spawn_daemon, status_mb};

/// Starts the daemon on `config`; returns it, its data dir and the time to READY=1.
fn start(config: &str) -> (Child, tempfile::TempDir, Duration) {
    start_in(tempfile::tempdir().unwrap(), config)
}

fn start_in(dir: tempfile::TempDir, config: &str) -> (Child, tempfile::TempDir, Duration) {
    let (child, ready) = spawn_daemon(dir.path(), config, &[]);
    (child, dir, ready)
}

/// 10,000 daily jobs spread over the day, none due in the next hour.
fn many_jobs(count: usize) -> String {
    let now = chrono::Utc::now();
    let mut config = String::new();
    for i in 0..count {
        // Minutes from 2 h to ~22 h ahead of now, in UTC.
        let at = now + chrono::Duration::minutes(120 + (i % 1200) as i64);
        config.push_str(&format!(
            "[[cron]]\nname = \"job-{i}\"\nschedule = \"{} {} * * *\"\ntz = \"UTC\"\ntext = \"job {i}\"\n\n",
            at.format("%M"),
            at.format("%H")
        ));
    }
    config
}

/// A data dir holding `count` runtime jobs (as `cron_create` would leave them), so that the
/// daemon starts with them without parsing a config file.
fn data_dir_with_runtime_jobs(count: usize) -> tempfile::TempDir {
    use steward_daemon::channels::timer::control::Scheduler;
    let dir = tempfile::tempdir().unwrap();
    let store = steward_daemon::store::Store::open(&dir.path().join("db")).unwrap();
    let inbox = std::sync::Arc::new(
        steward_daemon::store::Inbox::open(store.clone(), 100, Duration::from_secs(86_400))
            .unwrap(),
    );
    let scheduler = Scheduler {
        jobs: steward_daemon::channels::timer::job_store::JobStore::open(&store).unwrap(),
        submitter: steward_daemon::channels::Submitter::new(inbox, Vec::new()),
        changed: std::sync::Arc::default(),
        default_zone: "UTC".into(),
        settled: steward_daemon::channels::timer::config_jobs::JobsSettled::already(),
    };
    let now = chrono::Utc::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for i in 0..count {
        let at = now + chrono::Duration::minutes(120 + (i % 1200) as i64);
        runtime
            .block_on(scheduler.add(steward_protocol::NewJob {
                name: format!("job-{i}"),
                schedule: format!("{} {} * * *", at.format("%M"), at.format("%H")),
                tz: None,
                text: Some(format!("job {i}")),
                action: None,
                urgency: None,
                missed: None,
                max_lateness_secs: None,
            }))
            .unwrap();
    }
    drop(scheduler);
    // sled releases its lock once every handle is gone and its threads stop.
    drop(store);
    std::thread::sleep(Duration::from_millis(500));
    dir
}

/// Writes 10,000 files into a watched directory; returns (events, quiesce time, peak RSS).
fn file_burst(files: usize) -> (usize, Duration, f64) {
    let watched = tempfile::tempdir().unwrap();
    let config = format!(
        "[[watch]]\nname = \"burst\"\npath = {:?}\n",
        watched.path().display().to_string()
    );
    let (mut daemon, dir, _) = start(&config);
    for i in 0..files {
        std::fs::write(watched.path().join(format!("f{i}.txt")), "x").unwrap();
    }
    let written = Instant::now();
    // Quiet once no new event arrived for two debounce windows.
    let count_events = || {
        let output = Command::new(env!("CARGO_BIN_EXE_steward"))
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .args(["events", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| l.contains("watch:burst"))
            .count()
    };
    let mut events = 0;
    let mut last_change = written;
    while last_change.elapsed() < Duration::from_millis(1000) {
        std::thread::sleep(Duration::from_millis(50));
        let now = count_events();
        if now != events {
            events = now;
            last_change = Instant::now();
        }
    }
    let quiesced = last_change.saturating_duration_since(written);
    let peak = status_mb(daemon.id(), "VmHWM:");
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    (events, quiesced, peak)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let idle = Duration::from_secs(if quick { 5 } else { 30 });

    let (mut empty, _empty_dir, empty_ready) = start("");
    std::thread::sleep(Duration::from_secs(2));
    let empty_rss = status_mb(empty.id(), "VmRSS:");
    empty.kill().unwrap();
    empty.wait().unwrap();

    let count = 10_000;
    let (mut busy, _busy_dir, busy_ready) = start(&many_jobs(count));
    std::thread::sleep(Duration::from_secs(2));
    let cpu_before = cpu_time(busy.id());
    std::thread::sleep(idle);
    let cpu = cpu_time(busy.id()) - cpu_before;
    let rss = status_mb(busy.id(), "VmRSS:");
    busy.kill().unwrap();
    busy.wait().unwrap();

    println!(
        "{count} scheduled jobs: start to READY {} (empty config {}); RSS {rss:.1} MB vs {empty_rss:.1} MB without jobs (+{:.1} MB); CPU while idle for {}s: {} ({:.2}% of one core)",
        ms(busy_ready),
        ms(empty_ready),
        rss - empty_rss,
        idle.as_secs(),
        ms(cpu),
        100.0 * cpu.as_secs_f64() / idle.as_secs_f64()
    );

    let (mut stored, _stored_dir, stored_ready) = start_in(data_dir_with_runtime_jobs(count), "");
    std::thread::sleep(Duration::from_secs(2));
    let cpu_before = cpu_time(stored.id());
    std::thread::sleep(idle);
    let cpu = cpu_time(stored.id()) - cpu_before;
    let rss = status_mb(stored.id(), "VmRSS:");
    stored.kill().unwrap();
    stored.wait().unwrap();
    println!(
        "{count} scheduled jobs made at run time (no config to parse): start to READY {}; RSS {rss:.1} MB vs {empty_rss:.1} MB without jobs (+{:.1} MB); CPU while idle for {}s: {}",
        ms(stored_ready),
        rss - empty_rss,
        idle.as_secs(),
        ms(cpu),
    );

    let files = 10_000;
    let (events, quiesced, peak) = file_burst(files);
    println!(
        "burst of {files} new files in a watched directory: {events} events; last event {} after the last write; peak RSS {peak:.1} MB",
        ms(quiesced)
    );
}

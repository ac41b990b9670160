//! File watches through the real daemon and real files: each kind of change becomes an
//! event, a burst of 10,000 files a handful, excluded paths none, and a removed directory
//! is watched again when it returns.

use std::path::Path;
use std::time::{Duration, Instant};

use steward_protocol::EventRow;

use crate::support::TestDaemon;

fn watch_config(dir: &Path, extra: &str) -> String {
    format!(
        "[[watch]]\nname = \"inbox\"\npath = {:?}\ndebounce_ms = 200\ntext = \"Files changed in the inbox folder.\"\n{extra}\n",
        dir.display().to_string()
    )
}

async fn watch_events(daemon: &TestDaemon) -> Vec<EventRow> {
    daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e.channel == "watch:inbox")
        .collect()
}

async fn wait_for_events(daemon: &TestDaemon, at_least: usize) -> Vec<EventRow> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = watch_events(daemon).await;
        if events.len() >= at_least {
            return events;
        }
        assert!(Instant::now() < deadline, "only {events:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn settle() {
    // Longer than the debounce window.
    tokio::time::sleep(Duration::from_millis(700)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_change_becomes_an_event_and_excluded_paths_none() {
    let files = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_with(&watch_config(files.path(), "exclude = [\"private/**\"]"));
    let dir = files.path();

    std::fs::write(dir.join("a.txt"), "one").unwrap();
    let events = wait_for_events(&daemon, 1).await;
    assert!(events[0].text.contains("create a.txt"), "{events:#?}");
    assert!(
        events[0]
            .text
            .starts_with("Files changed in the inbox folder.")
    );
    settle().await;

    std::fs::write(dir.join("a.txt"), "two").unwrap();
    let events = wait_for_events(&daemon, 2).await;
    assert!(events[1].text.contains("modify a.txt"), "{events:#?}");
    settle().await;

    std::fs::rename(dir.join("a.txt"), dir.join("b.txt")).unwrap();
    let events = wait_for_events(&daemon, 3).await;
    assert!(events[2].text.contains("rename"), "{events:#?}");
    settle().await;

    std::fs::remove_file(dir.join("b.txt")).unwrap();
    let events = wait_for_events(&daemon, 4).await;
    assert!(events[3].text.contains("remove b.txt"), "{events:#?}");
    settle().await;

    // Excluded: the default .git/ and swap files, and the configured private/.
    std::fs::create_dir_all(dir.join(".git/objects")).unwrap();
    std::fs::write(dir.join(".git/objects/x"), "x").unwrap();
    std::fs::write(dir.join(".notes.txt.swp"), "x").unwrap();
    std::fs::create_dir(dir.join("private")).unwrap();
    std::fs::write(dir.join("private/secret.txt"), "x").unwrap();
    settle().await;
    settle().await;
    let events = watch_events(&daemon).await;
    let extra: Vec<&EventRow> = events[4..]
        .iter()
        .filter(|e| {
            !e.text
                .lines()
                .skip(1)
                .all(|l| l.ends_with(" private") || l.ends_with(" .git"))
        })
        .collect();
    assert!(extra.is_empty(), "excluded paths made events: {extra:#?}");
    assert!(
        events
            .iter()
            .all(|e| e.source == steward_events::Source::Watch)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_ten_thousand_files_makes_a_handful_of_events() {
    let files = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_with(&watch_config(files.path(), ""));
    let dir = files.path().join("burst");
    std::fs::create_dir(&dir).unwrap();
    let started = Instant::now();
    for i in 0..10_000 {
        std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
    }
    // One event per 200 ms debounce window while the burst lasts (longer on a loaded
    // machine), plus the window still open when it ends.
    let windows = (started.elapsed().as_millis() / 200) as usize + 2;
    settle().await;
    settle().await;
    let events = watch_events(&daemon).await;
    assert!(
        !events.is_empty() && events.len() <= windows.max(20),
        "{} events for 10,000 files written over {windows} windows",
        events.len()
    );
    // Every event lists at most 200 paths and counts the rest.
    for event in &events {
        assert!(event.text.lines().count() <= 202, "{}", event.text.len());
    }
    assert!(events.iter().any(|e| e.text.contains("more changes")));
}

async fn state(daemon: &TestDaemon) -> String {
    daemon
        .status()
        .await
        .channels
        .into_iter()
        .find(|c| c.name == "watch:inbox")
        .map(|c| c.state)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_directory_is_watched_again_when_it_returns() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("drop");
    // Not there yet at start: waited for.
    let daemon = TestDaemon::start_with(&watch_config(&dir, ""));
    assert!(
        state(&daemon).await.starts_with("waiting for"),
        "{}",
        state(&daemon).await
    );
    std::fs::create_dir(&dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state(&daemon).await.starts_with("watching") {
        assert!(Instant::now() < deadline, "{}", state(&daemon).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(dir.join("new.txt"), "x").unwrap();
    let events = wait_for_events(&daemon, 1).await;
    assert!(events[0].text.contains("create new.txt"), "{events:#?}");

    // Removed while watched: reported, then watched again when it returns.
    std::fs::remove_dir_all(&dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state(&daemon).await.starts_with("waiting for") {
        assert!(Instant::now() < deadline, "{}", state(&daemon).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::create_dir(&dir).unwrap();
    while !state(&daemon).await.starts_with("watching") {
        assert!(Instant::now() < deadline, "{}", state(&daemon).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = watch_events(&daemon).await.len();
    std::fs::write(dir.join("again.txt"), "x").unwrap();
    let events = wait_for_events(&daemon, seen + 1).await;
    assert!(
        events.iter().any(|e| e.text.contains("create again.txt")),
        "{events:#?}"
    );
}

fn listed(daemon: &TestDaemon) -> Vec<serde_json::Value> {
    crate::support::stdout(&daemon.cli(&["watch", "list", "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_made_by_a_tool_run_persist_and_can_be_deleted() {
    let config_dir = tempfile::tempdir().unwrap();
    let made_dir = tempfile::tempdir().unwrap();
    let mut daemon = TestDaemon::start_with(&watch_config(config_dir.path(), ""));
    let args = serde_json::json!({"name": "downloads", "path": made_dir.path(), "include": ["*.pdf"], "debounce_ms": 100});
    let output = daemon.cli(&[
        "tools",
        "call",
        "watch_create",
        "--args",
        &args.to_string(),
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let rows = listed(&daemon);
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["downloads", "inbox"]);
    assert_eq!(rows[0]["origin"], "runtime");

    // Its changes become events; what its include leaves out does not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(made_dir.path().join("paper.pdf"), "x").unwrap();
    std::fs::write(made_dir.path().join("notes.txt"), "x").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let event = loop {
        let events: Vec<EventRow> = daemon
            .events()
            .await
            .into_iter()
            .filter(|e| e.channel == "watch:downloads")
            .collect();
        if let Some(event) = events.first() {
            break event.clone();
        }
        assert!(Instant::now() < deadline, "no event from the new watch");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(event.text.contains("create paper.pdf"), "{event:?}");
    assert!(!event.text.contains("notes.txt"), "{event:?}");

    // It survives a restart; the config's watch cannot be deleted here, this one can.
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    assert_eq!(listed(&daemon).len(), 2);
    assert!(
        listed(&daemon)[0]["state"]
            .as_str()
            .unwrap()
            .starts_with("watching")
    );
    let refused = daemon.cli(&[
        "tools",
        "call",
        "watch_delete",
        "--args",
        r#"{"name":"inbox"}"#,
    ]);
    assert!(!refused.status.success(), "{refused:?}");
    let output = daemon.cli(&[
        "tools",
        "call",
        "watch_delete",
        "--args",
        r#"{"name":"downloads"}"#,
    ]);
    assert!(output.status.success(), "{output:?}");
    let names: Vec<String> = listed(&daemon)
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["inbox"]);
}

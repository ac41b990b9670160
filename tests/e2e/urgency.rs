//! `[[urgency.rules]]` take effect on every channel, because every channel submits through
//! the one submitter that applies them: a `cron:*`, a `watch:*` and a `webhook:*` rule each
//! override the urgency the job, the watch or the route is configured with, and an input
//! no rule matches keeps its configured urgency.

use steward_events::Urgency;
use steward_protocol::EventRow;

use crate::support::TestDaemon;

/// The first event on exactly `channel` (the prefix match also takes longer names).
async fn first_on(daemon: &TestDaemon, channel: &str) -> EventRow {
    daemon
        .events_on(channel, 1)
        .await
        .into_iter()
        .find(|e| e.channel == channel)
        .unwrap_or_else(|| panic!("no event on {channel}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_rule_overrides_the_jobs_urgency_and_others_keep_theirs() {
    let daemon = TestDaemon::start_with(
        "[[cron]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ntext = \"tick\"\nurgency = \"parallel\"\n\n[[cron]]\nname = \"tock\"\nschedule = \"* * * * * *\"\ntext = \"tock\"\nurgency = \"parallel\"\n\n[[urgency.rules]]\nchannel = \"cron:ti*\"\nurgency = \"queue\"\n",
    );
    assert_eq!(first_on(&daemon, "cron:tick").await.urgency, Urgency::Queue);
    assert_eq!(
        first_on(&daemon, "cron:tock").await.urgency,
        Urgency::Parallel,
        "no rule matches: the job's own urgency"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_rule_overrides_the_watchs_urgency() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_with(&format!(
        "[[watch]]\nname = \"drop\"\npath = {:?}\ndebounce_ms = 100\ntext = \"Files changed.\"\n\n[[urgency.rules]]\nchannel = \"watch:*\"\nurgency = \"parallel\"\n",
        dir.path().display().to_string()
    ));
    daemon
        .wait_for_status("the watch running", |s| {
            s.channels
                .iter()
                .any(|c| c.name == "watch:drop" && c.state != "starting")
        })
        .await;
    // The watch starts before its first notification can be seen; write until one lands.
    for i in 0..50 {
        std::fs::write(dir.path().join(format!("note-{i}.txt")), "hello").unwrap();
        let arrived = daemon
            .events()
            .await
            .iter()
            .any(|e| e.channel == "watch:drop");
        if arrived {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        first_on(&daemon, "watch:drop").await.urgency,
        Urgency::Parallel
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_rule_overrides_the_routes_urgency() {
    let daemon = TestDaemon::start_with_env(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"ci\"\nauth = \"bearer\"\nsecret_env = \"T_BEARER\"\n\n[[urgency.rules]]\nchannel = \"webhook:*\"\nurgency = \"parallel\"\n",
        &[("T_BEARER", "ci-token")],
    );
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let response = reqwest::Client::new()
        .post(format!("http://{address}/hooks/ci"))
        .bearer_auth("ci-token")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    assert_eq!(
        first_on(&daemon, "webhook:ci").await.urgency,
        Urgency::Parallel
    );
}

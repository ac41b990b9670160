//! The log follows one input from its channel to its side effect: the submitter's
//! `event stored` line names the event and its channel, and every line of a tool call
//! carries the call id, the tool and that event id in its span, inside the step's span.

use serde_json::Value;

use crate::support::{TestDaemon, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_follows_one_message_to_the_file_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steward.log");
    let daemon = TestDaemon::start_with_log(
        "[daemon]\nlog_format = \"json\"\n",
        &[("RUST_LOG", "info")],
        &log,
    );
    let output = daemon.cli(&[
        "send",
        r#"/tool fs_write {"path":"traced.txt","content":"x"}"#,
    ]);
    assert!(output.status.success(), "{output:?}");
    let event_id = stdout(&output).trim().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !daemon.path().join("workspace/traced.txt").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the file was never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The line is written after the call returns.
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let done = lines
            .iter()
            .any(|l| l["fields"]["message"] == "a tool call that changes something finished");
        if done {
            break lines;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let stored = lines
        .iter()
        .find(|l| {
            l["fields"]["message"] == "event stored" && l["fields"]["event_id"] == event_id.as_str()
        })
        .unwrap_or_else(|| panic!("no `event stored` line for {event_id}: {lines:#?}"));
    assert_eq!(stored["fields"]["channel"], "user:socket", "{stored}");
    // Logged inside the socket channel's span (its session is a task of the channel).
    assert!(
        stored["spans"].as_array().is_some_and(|spans| spans
            .iter()
            .any(|s| s["name"] == "channel" && s["channel"] == "user")),
        "{stored}"
    );
    let finished = lines
        .iter()
        .find(|l| l["fields"]["message"] == "a tool call that changes something finished")
        .unwrap();
    let span = &finished["span"];
    assert_eq!(span["name"], "tool_call", "{finished}");
    assert_eq!(span["tool"], "fs_write", "{finished}");
    assert_eq!(span["event_id"], event_id.as_str(), "{finished}");
    assert!(
        span["call_id"].as_str().is_some_and(|c| !c.is_empty()),
        "{finished}"
    );
    let step = finished["spans"]
        .as_array()
        .and_then(|spans| spans.iter().find(|s| s["name"] == "step"))
        .unwrap_or_else(|| panic!("the call is inside its step's span: {finished}"));
    assert!(
        step["events"]
            .as_str()
            .is_some_and(|e| e.contains(&event_id)),
        "{step}"
    );
}

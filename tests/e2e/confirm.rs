//! Two-phase confirmation through the real binary: a policy rule makes `fs_write` ask; the
//! owner approves (once), denies (with a reason that reaches the trajectory), edits the
//! arguments, or lets the request expire; requests survive a restart.

use serde_json::Value;

use crate::support::{TestDaemon, stderr, stdout};

const CONFIG: &str = r#"
[tools]
confirm_expiry_secs = 3

[[tools.policy]]
id = "careful-writes"
tool = "fs_write"
decision = "confirm"
"#;

fn pending(daemon: &TestDaemon) -> Vec<Value> {
    let output = daemon.cli(&["pending", "--json"]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asks for a write that needs confirmation; returns the pending id.
fn request_write(daemon: &TestDaemon, path: &str, content: &str) -> String {
    let output = daemon.cli(&[
        "send",
        "--wait",
        &format!(r#"/tool fs_write {{"path":"{path}","content":"{content}"}}"#),
    ]);
    let reply = stdout(&output);
    assert!(reply.contains("needs your confirmation"), "{reply}");
    let id = pending(daemon).last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reply.contains(&id), "the reply names the request: {reply}");
    id
}

async fn trajectory_texts(daemon: &TestDaemon) -> Vec<String> {
    daemon
        .trajectory()
        .await
        .into_iter()
        .filter_map(|i| match i.kind {
            steward_events::ItemKind::Event { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_action_runs_exactly_once() {
    let daemon = TestDaemon::start_with(CONFIG);
    let file = daemon.path().join("workspace/a.txt");
    let id = request_write(&daemon, "a.txt", "hello");
    assert!(!file.exists(), "nothing runs before the owner answers");

    let rows = pending(&daemon);
    assert_eq!(rows.len(), 1);
    for field in [
        "id",
        "tool",
        "args",
        "preview",
        "origin_event",
        "requested_at",
        "expires_at",
        "state",
    ] {
        assert!(
            rows[0].get(field).is_some(),
            "pending row lacks {field}: {}",
            rows[0]
        );
    }
    assert_eq!(rows[0]["state"], "pending");
    assert_eq!(rows[0]["tool"], "fs_write");

    let confirmed = daemon.cli(&["confirm", &id, "--json"]);
    assert!(confirmed.status.success(), "{confirmed:?}");
    let row: Value = serde_json::from_str(stdout(&confirmed).trim()).unwrap();
    assert_eq!(row["state"], "completed");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");

    // Confirming again is harmless: nothing runs a second time.
    std::fs::write(&file, "changed by hand").unwrap();
    let again = daemon.cli(&["confirm", &id, "--json"]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "changed by hand");

    let id_text = id.clone();
    daemon
        .wait_for_trajectory("the approval in the trajectory", move |items| {
            items.iter().any(|i| matches!(&i.kind, steward_events::ItemKind::Event { text, .. } if text.contains("approved") && text.contains(&id_text)))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_and_its_reason_reach_the_trajectory() {
    let daemon = TestDaemon::start_with(CONFIG);
    let id = request_write(&daemon, "b.txt", "x");
    let denied = daemon.cli(&["deny", &id, "--reason", "not today", "--json"]);
    assert!(denied.status.success(), "{denied:?}");
    let row: Value = serde_json::from_str(stdout(&denied).trim()).unwrap();
    assert_eq!(row["state"], "denied");
    assert_eq!(row["state_reason"], "not today");
    assert!(!daemon.path().join("workspace/b.txt").exists());
    let late = daemon.cli(&["confirm", &id]);
    assert!(!late.status.success());
    assert!(stderr(&late).contains("denied"), "{late:?}");
    daemon
        .wait_for_trajectory("the denial", |items| {
            items.iter().any(|i| matches!(&i.kind, steward_events::ItemKind::Event { text, .. } if text.contains("denied") && text.contains("not today")))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_expires_as_expired_not_denied() {
    let daemon = TestDaemon::start_with(CONFIG);
    let id = request_write(&daemon, "c.txt", "x");
    let texts = {
        let id = id.clone();
        daemon
            .wait_for_trajectory("the expiry", move |items| {
                items.iter().any(|i| matches!(&i.kind, steward_events::ItemKind::Event { text, .. } if text.contains("expired") && text.contains(&id)))
            })
            .await;
        trajectory_texts(&daemon).await
    };
    assert!(
        texts.iter().any(|t| t.contains("not a denial")),
        "{texts:?}"
    );
    let row = pending(&daemon)
        .into_iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap();
    assert_eq!(row["state"], "expired");
    let late = daemon.cli(&["confirm", &id]);
    assert!(
        !late.status.success(),
        "an expired request cannot be approved"
    );
    assert!(!daemon.path().join("workspace/c.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_survive_a_restart_and_edited_arguments_are_checked() {
    let mut daemon = TestDaemon::start_with(
        &CONFIG.replace("confirm_expiry_secs = 3", "confirm_expiry_secs = 600"),
    );
    let id = request_write(&daemon, "d.txt", "original");
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    assert_eq!(
        pending(&daemon)[0]["state"],
        "pending",
        "still waiting after the restart"
    );

    let invalid = daemon.cli(&["confirm", &id, "--args", r#"{"path":"d.txt"}"#]);
    assert!(!invalid.status.success());
    assert!(
        stderr(&invalid).contains("invalid arguments"),
        "{invalid:?}"
    );

    let edited = daemon.cli(&[
        "confirm",
        &id,
        "--args",
        r#"{"path":"e.txt","content":"edited"}"#,
        "--json",
    ]);
    assert!(edited.status.success(), "{edited:?}");
    assert_eq!(
        std::fs::read_to_string(daemon.path().join("workspace/e.txt")).unwrap(),
        "edited"
    );
    assert!(!daemon.path().join("workspace/d.txt").exists());
}

#[test]
fn the_owner_can_answer_on_the_channel_that_asked() {
    let daemon = TestDaemon::start_with(CONFIG);
    let approve = request_write(&daemon, "f.txt", "via chat");
    let output = daemon.cli(&["send", &format!("/confirm {approve}")]);
    assert!(
        stdout(&output).contains(&format!("action {approve} (fs_write): completed")),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.path().join("workspace/f.txt")).unwrap(),
        "via chat"
    );

    let refuse = request_write(&daemon, "g.txt", "x");
    let output = daemon.cli(&["send", &format!("/deny {refuse} wrong folder")]);
    assert!(stdout(&output).contains("denied"), "{output:?}");
    let row = pending(&daemon)
        .into_iter()
        .find(|r| r["id"] == refuse.as_str())
        .unwrap();
    assert_eq!(row["state_reason"], "wrong folder");
}

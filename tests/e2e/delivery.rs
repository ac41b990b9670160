//! Delivery guarantees: everything accepted is merged, in order, exactly once — also across
//! `kill -9`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use steward_events::EventId;

use crate::support::{TestDaemon, merged_ids, send_to};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_messages_are_all_merged_in_order() {
    let daemon = TestDaemon::start();
    let mut sent = Vec::new();
    for i in 0..1000 {
        sent.push(daemon.send(&format!("message {i}"), None).await);
    }
    let events = daemon
        .wait_for_events("1000 merged events", |events| {
            events.iter().filter(|e| e.state == "merged").count() == 1000
        })
        .await;
    assert_eq!(events.len(), 1000);
    let items = daemon.trajectory().await;
    assert_eq!(merged_ids(&items), sent, "trajectory order is send order");
    let texts: Vec<String> = events.iter().map(|e| e.text.clone()).collect();
    let expected: Vec<String> = (0..1000).map(|i| format!("message {i}")).collect();
    assert_eq!(texts, expected);
    // The none brain answered every plain message, once per step for the messages merged
    // into it together (the sends are sequential, so more than one step).
    let mut answered = Vec::new();
    let mut replies = 0;
    for item in &items {
        if let steward_events::ItemKind::Assistant { reply_to, .. } = &item.kind {
            answered.extend(reply_to.iter().copied());
            replies += 1;
        }
    }
    assert_eq!(answered, sent, "every message answered once, in order");
    assert!((1..=1000).contains(&replies), "{replies} answers");
}

/// Senders keep sending while the daemon is killed; every id a sender got back must be
/// merged exactly once after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_loses_nothing_and_merges_nothing_twice() {
    let mut daemon = TestDaemon::start();
    let acked: Arc<Mutex<Vec<EventId>>> = Arc::default();
    for round in 0..3 {
        let socket = daemon.socket();
        let senders: Vec<_> = (0..4)
            .map(|sender| {
                let socket = socket.clone();
                let acked = acked.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        match send_to(&socket, &format!("r{round} s{sender} m{i}"), None).await {
                            Ok(id) => acked.lock().unwrap().push(id),
                            Err(_) => return,
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        daemon = daemon.crash_and_restart();
        for sender in senders {
            sender.await.unwrap();
        }
    }
    let acked: Vec<EventId> = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "the burst was too small to mean anything: {}",
        acked.len()
    );
    let acked_set: HashSet<EventId> = acked.iter().copied().collect();
    let items = daemon
        .wait_for_trajectory("every acknowledged event merged", |items| {
            let merged: HashSet<EventId> = merged_ids(items).into_iter().collect();
            acked_set.is_subset(&merged)
        })
        .await;
    let merged = merged_ids(&items);
    let unique: HashSet<EventId> = merged.iter().copied().collect();
    assert_eq!(unique.len(), merged.len(), "an event was merged twice");
    let events = daemon.events().await;
    for id in &acked {
        let row = events
            .iter()
            .find(|e| e.id == *id)
            .expect("acked event is in the inbox");
        assert_eq!(row.state, "merged", "{row:?}");
    }
    // Events accepted but never acknowledged (killed mid-flush) may exist; they too must
    // end merged, never pending forever.
    let settled = daemon
        .wait_for_events("no pending events", |events| {
            events.iter().all(|e| e.state != "pending")
        })
        .await;
    assert!(settled.iter().all(|e| e.state == "merged"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_messages_are_rejected_visibly() {
    let daemon = TestDaemon::start();
    let output = daemon.cli(&["send", "   "]);
    assert!(!output.status.success());
    assert!(crate::support::stderr(&output).contains("rejected: empty message"));
    let events = daemon.events().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].state, "rejected");
    assert_eq!(events[0].detail.as_deref(), Some("empty message"));
}

/// Raw bytes on the control socket; returns what the daemon answered.
fn raw_exchange(socket: &std::path::Path, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // The daemon may stop reading once it has seen enough; a failed write is fine.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_control_input_gets_a_clear_error_and_loses_nothing() {
    let daemon = TestDaemon::start();
    let table: Vec<(Vec<u8>, &str)> = vec![
        (b"not json\n".to_vec(), "bad request"),
        (b"{\"op\":\"launch\"}\n".to_vec(), "bad request"),
        (b"{\"op\":\"send\"}\n".to_vec(), "missing field `text`"),
        (vec![0xff, 0xfe, b'\n'], "not UTF-8"),
        (vec![b'x'; 2 * 1024 * 1024], "over"),
    ];
    for (bytes, expected) in table {
        let answer = raw_exchange(&daemon.socket(), &bytes);
        assert!(answer.contains("\"type\":\"error\""), "{answer}");
        assert!(answer.contains(expected), "{expected}: {answer}");
    }
    let long_text = "y".repeat(crate::support::MAX_TEXT + 1);
    let refused = send_to(&daemon.socket(), &long_text, None)
        .await
        .unwrap_err();
    assert!(refused.contains("over the limit"), "{refused}");
    // The daemon still works, and only the refused message was recorded (as rejected).
    let id = daemon.send("still here", None).await;
    let events = daemon
        .wait_for_events("the last message merged", |events| {
            events.iter().any(|e| e.id == id && e.state == "merged")
        })
        .await;
    let states: Vec<&str> = events.iter().map(|e| e.state.as_str()).collect();
    assert_eq!(states, ["rejected", "merged"]);
}

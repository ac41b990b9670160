//! Steps and urgency: CANCEL stops the step in flight, QUEUE waits for the boundary and
//! merges as one batch, PARALLEL runs in a side lane; interrupted steps resume.

use steward_events::{ItemKind, ToolStatus, TrajectoryItem, Urgency};

use crate::support::{TestDaemon, merged_ids};

fn has_tool_call(items: &[TrajectoryItem], tool: &str) -> bool {
    items
        .iter()
        .any(|i| matches!(&i.kind, ItemKind::ToolCall { tool: t, .. } if t == tool))
}

fn position(items: &[TrajectoryItem], pred: impl Fn(&ItemKind) -> bool) -> usize {
    items
        .iter()
        .position(|i| pred(&i.kind))
        .unwrap_or_else(|| panic!("item not found in {items:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_sleeping_tool_at_once() {
    let daemon = TestDaemon::start();
    daemon.send(r#"/tool sleep {"secs":60}"#, None).await;
    daemon
        .wait_for_trajectory("the sleep call", |items| has_tool_call(items, "sleep"))
        .await;

    let output = daemon.cli(&["send", "--urgency", "cancel", "stop"]);
    assert!(output.status.success(), "{output:?}");
    let cancel_id: steward_events::EventId =
        crate::support::stdout(&output).trim().parse().unwrap();

    let items = daemon
        .wait_for_trajectory("step_cancelled", |items| {
            items.iter().any(|i| i.kind.name() == "step_cancelled")
        })
        .await;
    let result = position(&items, |k| matches!(k, ItemKind::ToolResult { .. }));
    let cancelled = position(&items, |k| matches!(k, ItemKind::StepCancelled { .. }));
    let ItemKind::ToolResult {
        status,
        result: content,
        ..
    } = &items[result].kind
    else {
        unreachable!()
    };
    assert_eq!(*status, ToolStatus::Cancelled);
    // The cancel may land after the call was recorded and before the sleep began (a loaded
    // machine): then it never started. Either way it did not sleep its 60 s.
    let never_started = content
        .as_str()
        .is_some_and(|s| s.starts_with("not started"));
    assert!(
        never_started || content["slept_secs"].as_f64().is_some_and(|s| s < 30.0),
        "{content}"
    );
    assert!(
        result < cancelled,
        "the cancelled result comes before step_cancelled"
    );
    let ItemKind::StepCancelled { by, .. } = &items[cancelled].kind else {
        unreachable!()
    };
    assert_eq!(*by, Some(cancel_id));

    // The cancel event's arrival to step_cancelled, by the daemon's own clock.
    let event = daemon
        .events()
        .await
        .into_iter()
        .find(|e| e.id == cancel_id)
        .unwrap();
    let latency = items[cancelled].at - event.received_at;
    assert!(
        latency < chrono::Duration::milliseconds(1000),
        "cancel took {latency}"
    );

    // Then the cancelling event is merged and a new step starts for it (waited for both:
    // the step's start is written just after the merge, and reading between the two
    // writes saw the merge alone).
    let items = daemon
        .wait_for_trajectory("the cancel event merged and a step after it", |items| {
            items
                .iter()
                .position(|item| {
                    matches!(&item.kind, ItemKind::Event { event_id, .. } if *event_id == cancel_id)
                })
                .is_some_and(|merged| items.len() > merged + 1)
        })
        .await;
    let merged_at = position(
        &items,
        |k| matches!(k, ItemKind::Event { event_id, .. } if *event_id == cancel_id),
    );
    assert_eq!(
        merged_at,
        cancelled + 1,
        "the cancelling event follows step_cancelled"
    );
    assert!(
        matches!(&items[merged_at + 1].kind, ItemKind::StepStarted { events } if events == &vec![cancel_id])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_events_wait_for_the_boundary_and_merge_as_one_batch() {
    let daemon = TestDaemon::start();
    daemon.send(r#"/tool sleep {"secs":2}"#, None).await;
    daemon
        .wait_for_trajectory("the sleep call", |items| has_tool_call(items, "sleep"))
        .await;
    let mut queued = Vec::new();
    for i in 0..5 {
        queued.push(
            daemon
                .send(&format!("queued {i}"), Some(Urgency::Queue))
                .await,
        );
    }
    // While the step runs, none of them is merged.
    let during = daemon.trajectory().await;
    assert!(
        !during.iter().any(|i| i.kind.name() == "step_completed"),
        "the sleep ended too soon to test"
    );
    assert_eq!(merged_ids(&during).len(), 1);

    // The batch is merged, then its step starts (a separate write): wait for both.
    let items = daemon
        .wait_for_trajectory("the queued batch and its step", |items| {
            merged_ids(items).len() == 6
                && items.iter().any(
                    |i| matches!(&i.kind, ItemKind::StepStarted { events } if events.len() == 5),
                )
        })
        .await;
    let completed = position(&items, |k| matches!(k, ItemKind::StepCompleted));
    let batch: Vec<_> = items[completed + 1..completed + 6]
        .iter()
        .map(|i| match &i.kind {
            ItemKind::Event { event_id, .. } => *event_id,
            other => panic!("expected the batch of events, got {other:?}"),
        })
        .collect();
    assert_eq!(batch, queued, "one batch, in arrival order");
    assert!(
        matches!(&items[completed + 6].kind, ItemKind::StepStarted { events } if *events == queued)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_event_runs_in_a_lane_while_the_main_step_runs() {
    let daemon = TestDaemon::start();
    daemon.send(r#"/tool sleep {"secs":3}"#, None).await;
    daemon
        .wait_for_trajectory("the sleep call", |items| has_tool_call(items, "sleep"))
        .await;
    let parallel = daemon
        .send(
            r#"/tool echo {"text":"from the lane"}"#,
            Some(Urgency::Parallel),
        )
        .await;

    // The lane finishes and its summary is in the inbox before the main step ends.
    let events = daemon
        .wait_for_events("the lane result and its origin merged", |events| {
            events
                .iter()
                .any(|e| e.channel == format!("lane:{parallel}"))
                && events
                    .iter()
                    .any(|e| e.id == parallel && e.state == "merged")
        })
        .await;
    let main = daemon.trajectory().await;
    assert!(
        !main.iter().any(|i| i.kind.name() == "step_completed"),
        "main step already over"
    );
    let status = daemon.status().await;
    assert!(
        matches!(
            status.step,
            steward_protocol::StepStatus::Running { step: 1, .. }
        ),
        "{status:?}"
    );
    let origin = events.iter().find(|e| e.id == parallel).unwrap();
    assert_eq!(origin.state, "merged");
    assert_eq!(
        origin.trajectory.as_deref(),
        Some(format!("lane:{parallel}").as_str())
    );
    let lane_result = events
        .iter()
        .find(|e| e.source == steward_events::Source::Lane)
        .unwrap();
    assert!(
        lane_result.text.contains("from the lane"),
        "{lane_result:?}"
    );

    // It comes back into the main trajectory as a QUEUE event at the next boundary.
    let items = daemon
        .wait_for_trajectory("the lane result merged", |items| {
            merged_ids(items).contains(&lane_result.id)
        })
        .await;
    let completed = position(&items, |k| matches!(k, ItemKind::StepCompleted));
    let merged_at = position(
        &items,
        |k| matches!(k, ItemKind::Event { event_id, .. } if *event_id == lane_result.id),
    );
    assert_eq!(merged_at, completed + 1);
    assert!(
        !merged_ids(&items).contains(&parallel),
        "the PARALLEL event itself stays in its lane"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_cleanly_and_the_interrupted_step_runs_again() {
    let mut daemon = TestDaemon::start();
    let id = daemon.send(r#"/tool sleep {"secs":1}"#, None).await;
    daemon
        .wait_for_trajectory("the sleep call", |items| has_tool_call(items, "sleep"))
        .await;
    let status = daemon.terminate();
    assert!(status.success(), "{status:?}");
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    let items = daemon
        .wait_for_trajectory("the resumed step to complete", |items| {
            items.iter().any(|i| i.kind.name() == "step_completed")
        })
        .await;
    let interrupted = position(&items, |k| {
        matches!(k, ItemKind::StepCancelled { by: None, .. })
    });
    assert!(
        matches!(&items[interrupted + 1].kind, ItemKind::StepStarted { events } if *events == vec![id])
    );
    assert_eq!(
        merged_ids(&items),
        vec![id],
        "resuming does not merge the event again"
    );
    let results: Vec<_> = items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::ToolResult { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(results.last(), Some(&ToolStatus::Ok), "{items:#?}");
}

/// Queues `texts` while a step runs, so they are merged as one batch and the none brain
/// makes all their calls in one turn; returns the items of that step.
pub(crate) async fn one_batch(daemon: &TestDaemon, texts: &[&str]) -> Vec<TrajectoryItem> {
    daemon.send(r#"/tool sleep {"secs":0.5}"#, None).await;
    daemon
        .wait_for_trajectory("the first step's call", |items| {
            has_tool_call(items, "sleep")
        })
        .await;
    for text in texts {
        daemon.send(text, None).await;
    }
    let items = daemon
        .wait_for_trajectory("the batch step to complete", |items| {
            items
                .iter()
                .filter(|i| i.kind.name() == "step_completed")
                .count()
                == 2
        })
        .await;
    items.into_iter().filter(|i| i.step == 2).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_read_only_calls_in_one_batch_run_together() {
    let daemon = TestDaemon::start();
    let texts = vec![r#"/tool sleep {"secs":0.2}"#; 10];
    let step = one_batch(&daemon, &texts).await;
    let calls: Vec<_> = step
        .iter()
        .filter(|i| i.kind.name() == "tool_call")
        .collect();
    let results: Vec<_> = step
        .iter()
        .filter(|i| i.kind.name() == "tool_result")
        .collect();
    assert_eq!((calls.len(), results.len()), (10, 10));
    // Ten 200 ms sleeps one after the other take 2 s; together about 200 ms.
    let took = results.last().unwrap().at - calls.last().unwrap().at;
    assert!(
        took < chrono::Duration::milliseconds(1000),
        "the batch took {took}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_in_the_middle_of_a_batch_keeps_the_order() {
    let daemon = TestDaemon::start();
    let texts = [
        r#"/tool sleep {"secs":0.2}"#,
        r#"/tool fs_write {"path":"order.txt","content":"written"}"#,
        r#"/tool fs_read {"path":"order.txt"}"#,
    ];
    let step = one_batch(&daemon, &texts).await;
    let results: Vec<(String, ToolStatus, serde_json::Value)> = step
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::ToolResult {
                tool,
                status,
                result,
                ..
            } => Some((tool.clone(), *status, result.clone())),
            _ => None,
        })
        .collect();
    let tools: Vec<&str> = results.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        tools,
        ["sleep", "fs_write", "fs_read"],
        "results in call order"
    );
    assert!(
        results.iter().all(|(_, s, _)| *s == ToolStatus::Ok),
        "{results:?}"
    );
    assert_eq!(
        results[2].2["content"], "written",
        "the read ran after the write"
    );
}

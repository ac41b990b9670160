//! The inbox and trajectory against a real sled database in a temp dir, including reopening
//! it as a restart would.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use steward_events::{Event, EventState, Payload, Sender, Source, Trust};

use super::{EventRecord, Inbox, Store, Trajectory, keys};

const DAY: Duration = Duration::from_secs(86_400);

fn event(text: &str, dedupe: Option<&str>) -> Event {
    let mut event = Event::new(
        Source::Webhook,
        "webhook:test",
        Sender {
            identity: "test".into(),
            authenticated_by: "test".into(),
        },
        Trust::Untrusted,
        Payload::Message { text: text.into() },
    );
    event.dedupe_key = dedupe.map(str::to_owned);
    event
}

fn open(dir: &Path, capacity: usize, retention: Duration) -> (Store, Arc<Inbox>) {
    // Reopening in the same process: sled's background threads may hold the directory lock
    // for a moment after the last handle is dropped.
    let mut attempts = 0;
    let store = loop {
        match Store::open(&dir.join("db")) {
            Ok(store) => break store,
            Err(e) if attempts < 100 => {
                attempts += 1;
                eprintln!("reopen attempt {attempts}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("cannot reopen the store: {e}"),
        }
    };
    let inbox = Arc::new(Inbox::open(store.clone(), capacity, retention).unwrap());
    (store, inbox)
}

#[tokio::test]
async fn submitted_events_survive_a_reopen_and_are_pending_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let ids = {
        let (_store, inbox) = open(dir.path(), 100, DAY);
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(
                inbox
                    .submit(event(&format!("e{i}"), None))
                    .await
                    .unwrap()
                    .id,
            );
        }
        ids
    };
    let (store, inbox) = open(dir.path(), 100, DAY);
    assert_eq!(inbox.pending_count(), 3);
    assert_eq!(inbox.events_total(), 3);
    let pending: Vec<_> = inbox
        .read_pending(0, 10)
        .unwrap()
        .iter()
        .map(|r| r.event.id)
        .collect();
    assert_eq!(pending, ids);

    // Merge the first; after another reopen only the other two are pending.
    let trajectory = Trajectory::main(&store).unwrap();
    let first = inbox.read_pending(0, 1).unwrap();
    let items = trajectory.merge_events(&inbox, 1, first).await.unwrap();
    assert_eq!(items[0].seq, 1);
    drop((store, inbox, trajectory));
    let (store, inbox) = open(dir.path(), 100, DAY);
    let pending: Vec<_> = inbox
        .read_pending(0, 10)
        .unwrap()
        .iter()
        .map(|r| r.event.id)
        .collect();
    assert_eq!(pending, ids[1..]);
    let merged = inbox.get(ids[0]).unwrap().unwrap();
    assert!(
        matches!(merged.state, EventState::Merged { seq: 1, .. }),
        "{merged:?}"
    );
    assert_eq!(
        Trajectory::main(&store).unwrap().list(None).unwrap().len(),
        1
    );
}

/// A merge larger than one write (the backlog of a model outage) is written in several
/// batches: every event is merged once, in arrival order, at consecutive positions, and
/// stays so after a reopen.
#[tokio::test]
async fn a_merge_of_many_events_keeps_arrival_order_across_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let count = 2 * super::trajectory::EVENTS_PER_WRITE + 3;
    let mut ids = Vec::new();
    {
        let (store, inbox) = open(dir.path(), count, DAY);
        for i in 0..count {
            ids.push(
                inbox
                    .submit(event(&format!("e{i}"), None))
                    .await
                    .unwrap()
                    .id,
            );
        }
        let trajectory = Trajectory::main(&store).unwrap();
        let items = trajectory
            .merge_events(&inbox, 1, inbox.read_pending(0, count).unwrap())
            .await
            .unwrap();
        let seqs: Vec<u64> = items.iter().map(|i| i.seq).collect();
        assert_eq!(seqs, (1..=count as u64).collect::<Vec<_>>());
        assert_eq!(inbox.pending_count(), 0, "the whole merge left the inbox");
        store.flush().await.unwrap();
    }
    let (store, inbox) = open(dir.path(), count, DAY);
    assert!(inbox.read_pending(0, count).unwrap().is_empty());
    let merged: Vec<_> = Trajectory::main(&store)
        .unwrap()
        .list(None)
        .unwrap()
        .into_iter()
        .map(|item| match item.kind {
            steward_events::ItemKind::Event { event_id, .. } => (item.seq, event_id),
            other => panic!("expected an event item, got {other:?}"),
        })
        .collect();
    let expected: Vec<_> = (1..=count as u64).zip(ids.iter().copied()).collect();
    assert_eq!(merged, expected, "each event once, in arrival order");
    for (seq, id) in expected {
        let record = inbox.get(id).unwrap().unwrap();
        assert!(
            matches!(record.state, EventState::Merged { seq: s, .. } if s == seq),
            "{record:?}"
        );
    }
}

/// A step's events read back in one pass keep the step's order; an unknown id is left out.
#[tokio::test]
async fn many_events_are_read_back_in_the_order_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, inbox) = open(dir.path(), 100, DAY);
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            inbox
                .submit(event(&format!("e{i}"), None))
                .await
                .unwrap()
                .id,
        );
    }
    let unknown = event("never submitted", None).id;
    let asked = [ids[3], ids[0], unknown, ids[4]];
    let found: Vec<_> = inbox
        .get_many(&asked)
        .unwrap()
        .into_iter()
        .map(|record| record.event.id)
        .collect();
    assert_eq!(found, vec![ids[3], ids[0], ids[4]]);
}

#[tokio::test]
async fn a_dedupe_key_seen_within_retention_is_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, inbox) = open(dir.path(), 100, DAY);
    let first = inbox.submit(event("a", Some("delivery-1"))).await.unwrap();
    let again = inbox
        .submit(event("a again", Some("delivery-1")))
        .await
        .unwrap();
    let other = inbox.submit(event("b", Some("delivery-2"))).await.unwrap();
    assert_eq!(first.duplicate_of, None);
    assert_eq!(again.duplicate_of, Some(first.id));
    assert_eq!(other.duplicate_of, None);
    assert_eq!(inbox.pending_count(), 2, "the duplicate is not processed");
    let record = inbox.get(again.id).unwrap().unwrap();
    assert_eq!(
        record.state,
        EventState::Duplicate { of: first.id },
        "it is recorded, visibly"
    );

    let dir = tempfile::tempdir().unwrap();
    let (_store, inbox) = open(dir.path(), 100, Duration::ZERO);
    inbox.submit(event("a", Some("k"))).await.unwrap();
    let later = inbox.submit(event("a", Some("k"))).await.unwrap();
    assert_eq!(
        later.duplicate_of, None,
        "outside the retention window it is new"
    );
}

#[tokio::test]
async fn a_dedupe_entry_lost_in_a_crash_is_restored_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let first_id = {
        let (store, inbox) = open(dir.path(), 100, DAY);
        let first = inbox.submit(event("a", Some("delivery-9"))).await.unwrap();
        // As if the process died between the record's insert and its dedupe entry's.
        store.log.remove(keys::dedupe("delivery-9")).unwrap();
        store.flush().await.unwrap();
        first.id
    };
    let (_store, inbox) = open(dir.path(), 100, DAY);
    let redelivered = inbox.submit(event("a", Some("delivery-9"))).await.unwrap();
    assert_eq!(redelivered.duplicate_of, Some(first_id));
}

#[tokio::test]
async fn a_full_inbox_makes_senders_wait_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, inbox) = open(dir.path(), 2, DAY);
    inbox.submit(event("1", None)).await.unwrap();
    inbox.submit(event("2", None)).await.unwrap();
    let waiting = {
        let inbox = inbox.clone();
        tokio::spawn(async move { inbox.submit(event("3", None)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "the third submit must wait for room"
    );
    assert_eq!(inbox.events_total(), 2);

    let oldest = inbox.read_pending(0, 1).unwrap().remove(0);
    inbox
        .finish(
            oldest,
            EventState::Dead {
                error: "test".into(),
            },
        )
        .unwrap();
    let third = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("room was freed")
        .unwrap();
    assert_eq!(third.arrival, 3);
    assert_eq!(inbox.pending_count(), 2);
}

#[tokio::test]
async fn more_pending_than_capacity_after_a_restart_is_honoured_as_debt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_store, inbox) = open(dir.path(), 10, DAY);
        for i in 0..3 {
            inbox.submit(event(&format!("{i}"), None)).await.unwrap();
        }
    }
    let (_store, inbox) = open(dir.path(), 2, DAY);
    let blocked = {
        let inbox = inbox.clone();
        tokio::spawn(async move { inbox.submit(event("new", None)).await.unwrap() })
    };
    let mut pending = inbox.read_pending(0, 3).unwrap().into_iter();
    let settle = |record| {
        inbox
            .finish(
                record,
                EventState::Dead {
                    error: "test".into(),
                },
            )
            .unwrap()
    };
    settle(pending.next().unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !blocked.is_finished(),
        "2 still pending at capacity 2: no room yet"
    );
    settle(pending.next().unwrap());
    tokio::time::timeout(Duration::from_secs(5), blocked)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_unreadable_pending_record_is_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let (store, inbox) = open(dir.path(), 100, DAY);
    inbox.submit(event("good", None)).await.unwrap();
    store
        .log
        .insert(keys::event(1), b"{not json".to_vec())
        .unwrap();
    let good = inbox.submit(event("good too", None)).await.unwrap();
    let pending = inbox.read_pending(0, 10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event.id, good.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_and_settles_do_not_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let (store, inbox) = open(dir.path(), 1000, DAY);
    let trajectory = Arc::new(Trajectory::main(&store).unwrap());
    let submitters: Vec<_> = (0..8)
        .map(|s| {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                for i in 0..200 {
                    inbox
                        .submit(event(&format!("{s}-{i}"), None))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let merger = {
        let inbox = inbox.clone();
        let trajectory = trajectory.clone();
        tokio::spawn(async move {
            let (mut cursor, mut merged) = (0, 0);
            while merged < 1600 {
                let batch: Vec<EventRecord> = inbox.read_pending(cursor, 64).unwrap();
                if let Some(last) = batch.last() {
                    cursor = last.arrival;
                }
                merged += batch.len();
                trajectory.merge_events(&inbox, 1, batch).await.unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        for s in submitters {
            s.await.unwrap();
        }
        merger.await.unwrap();
    })
    .await
    .expect("no deadlock");
    assert_eq!(inbox.pending_count(), 0);
    assert_eq!(trajectory.list(None).unwrap().len(), 1600);
}

#[tokio::test]
async fn the_model_context_starts_at_the_latest_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _inbox) = open(dir.path(), 10, DAY);
    let trajectory = Trajectory::main(&store).unwrap();
    let text = |t: &str| steward_events::ItemKind::Assistant {
        text: t.into(),
        reply_to: vec![],
        canned: false,
    };
    let summary = |t: &str, covers_through| steward_events::ItemKind::Summary {
        text: t.into(),
        covers_through,
    };
    for t in ["a", "b", "c"] {
        trajectory.append(1, text(t)).unwrap(); // seq 1..=3
    }
    trajectory.append(1, summary("ab", 2)).unwrap(); // 4: c stays in view
    trajectory.append(2, text("d")).unwrap(); // 5
    let names = |items: Vec<steward_events::TrajectoryItem>| {
        items
            .into_iter()
            .map(|i| match i.kind {
                steward_events::ItemKind::Assistant { text, .. } => text,
                steward_events::ItemKind::Summary { text, .. } => format!("S:{text}"),
                other => other.name().to_owned(),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(trajectory.context_items(100).unwrap()),
        ["S:ab", "c", "d"]
    );
    // A newer summary covers the older one.
    trajectory.append(2, summary("abc", 3)).unwrap(); // 6
    trajectory.append(2, text("e")).unwrap(); // 7
    assert_eq!(
        names(trajectory.context_items(100).unwrap()),
        ["S:abc", "d", "e"]
    );
    // The item bound is a safety net for a trajectory that was never compacted.
    assert_eq!(names(trajectory.context_items(1).unwrap()), ["e"]);
}

#[tokio::test]
async fn purge_drops_settled_records_and_expired_keys_but_never_pending_or_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let (store, inbox) = open(dir.path(), 100, Duration::from_millis(1));
    for i in 0..4 {
        inbox
            .submit(event(&format!("e{i}"), Some(&format!("k{i}"))))
            .await
            .unwrap();
    }
    let trajectory = Trajectory::main(&store).unwrap();
    let first_three = inbox.read_pending(0, 3).unwrap();
    trajectory
        .merge_events(&inbox, 1, first_three)
        .await
        .unwrap();
    let pending = inbox.submit(event("still pending", None)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;

    let removed = inbox.purge(chrono::Utc::now()).unwrap();
    assert_eq!(removed, 3, "the three merged records");
    let left: Vec<String> = inbox
        .list(None, None)
        .unwrap()
        .iter()
        .map(|r| r.event.payload.text().to_owned())
        .collect();
    assert_eq!(left, ["e3", "still pending"]);
    let keys_left = || {
        store
            .log
            .scan_prefix([keys::DEDUPE])
            .map(|e| String::from_utf8_lossy(&e.unwrap().0[1..]).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys_left(), ["k3"], "keys went with their records");
    // The sweep at start takes every expired key, a pending event's too (it no longer
    // dedupes anything).
    assert_eq!(inbox.sweep_expired_keys(chrono::Utc::now()).unwrap(), 1);
    assert!(keys_left().is_empty());
    assert_eq!(inbox.events_total(), 5, "arrival numbers continue");
    assert_eq!(inbox.read_pending(0, 10).unwrap().len(), 2);
    assert!(inbox.get(pending.id).unwrap().is_some());

    drop((store, inbox, trajectory));
    let (_store, inbox) = open(dir.path(), 100, Duration::from_millis(1));
    assert_eq!(inbox.events_total(), 5);
    let next = inbox.submit(event("after", None)).await.unwrap();
    assert_eq!(next.arrival, 6);
}

#[tokio::test]
async fn trajectory_purge_keeps_the_last_step_the_newest_summary_and_recent_lanes() {
    use steward_events::{EventId, ItemKind};
    let dir = tempfile::tempdir().unwrap();
    let (store, _inbox) = open(dir.path(), 100, DAY);
    let main = Trajectory::main(&store).unwrap();
    let say = |text: &str| ItemKind::Assistant {
        text: text.into(),
        reply_to: Vec::new(),
        canned: false,
    };
    let summary = |text: &str, covers_through| ItemKind::Summary {
        text: text.into(),
        covers_through,
    };
    main.append(1, ItemKind::StepStarted { events: Vec::new() })
        .unwrap();
    main.append(1, say("one")).unwrap();
    main.append(1, summary("old summary", 2)).unwrap();
    main.append(1, ItemKind::StepCompleted).unwrap();
    main.append(2, ItemKind::StepStarted { events: Vec::new() })
        .unwrap();
    main.append(2, say("two")).unwrap();
    main.append(2, summary("new summary", 6)).unwrap();
    main.append(2, ItemKind::StepCompleted).unwrap();
    main.append(3, ItemKind::StepStarted { events: Vec::new() })
        .unwrap();
    main.append(3, say("three, still running")).unwrap();
    let old_lane = Trajectory::lane(&store, EventId::generate()).unwrap();
    old_lane.append(1, say("lane done long ago")).unwrap();
    old_lane.append(1, ItemKind::StepCompleted).unwrap();

    let before_anything = chrono::Utc::now() - chrono::Duration::hours(1);
    assert_eq!(
        super::purge_trajectories(&store, before_anything).unwrap(),
        0
    );

    tokio::time::sleep(Duration::from_millis(5)).await;
    let cutoff = chrono::Utc::now();
    let recent_lane = Trajectory::lane(&store, EventId::generate()).unwrap();
    recent_lane.append(1, say("lane of now")).unwrap();
    // Steps 1 and 2 go except the newer summary; step 3 (the last) and the recent lane stay.
    assert_eq!(super::purge_trajectories(&store, cutoff).unwrap(), 9);
    let text = |item: &steward_events::TrajectoryItem| match &item.kind {
        ItemKind::Assistant { text, .. } | ItemKind::Summary { text, .. } => text.clone(),
        other => other.name().to_owned(),
    };
    let left: Vec<String> = main.list(None).unwrap().iter().map(text).collect();
    assert_eq!(
        left,
        ["new summary", "step_started", "three, still running"]
    );
    assert!(old_lane.list(None).unwrap().is_empty());
    assert_eq!(recent_lane.list(None).unwrap().len(), 1);
    // What the model sees still starts from the summary.
    assert_eq!(main.context_items(100).unwrap().len(), 3);
    // New items continue the numbering.
    assert_eq!(main.append(3, say("after")).unwrap().seq, 11);
}

#[tokio::test]
async fn purging_an_old_record_leaves_a_dedupe_key_a_later_event_took_over() {
    let dir = tempfile::tempdir().unwrap();
    // Retention long enough that a loaded machine does not expire the second claim too
    // before the third event arrives.
    let (store, inbox) = open(dir.path(), 100, Duration::from_millis(500));
    let trajectory = Trajectory::main(&store).unwrap();
    inbox.submit(event("first", Some("k"))).await.unwrap();
    trajectory
        .merge_events(&inbox, 1, inbox.read_pending(0, 10).unwrap())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The first claim has expired: the same key is a new event, which now owns it.
    let second = inbox.submit(event("second", Some("k"))).await.unwrap();
    assert_eq!(second.duplicate_of, None);
    trajectory
        .merge_events(&inbox, 2, inbox.read_pending(0, 10).unwrap())
        .await
        .unwrap();
    inbox.submit(event("newest", None)).await.unwrap();

    assert_eq!(
        inbox.purge(chrono::Utc::now()).unwrap(),
        1,
        "only the first"
    );
    let duplicate = inbox.submit(event("third", Some("k"))).await.unwrap();
    assert_eq!(
        duplicate.duplicate_of,
        Some(second.id),
        "the key still names the second event"
    );
}

/// A tree several times sled's cache (4 MB; 256 shards of 16 KB, each a leaf of these
/// records) has its pages paged out as it is written and read; what was paged out must come
/// back from disk intact and in order, before and after a restart.
#[tokio::test]
async fn a_tree_several_times_the_cache_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let record = |i: u32| format!("{i:06}:{}", "x".repeat(1000)).into_bytes();
    const RECORDS: u32 = 12_000; // ~12 MB of values
    {
        let (store, _inbox) = open(dir.path(), 100, DAY);
        let tree = store.cron_tree().unwrap();
        for i in 0..RECORDS {
            tree.insert(i.to_be_bytes(), record(i)).unwrap();
        }
        tree.flush().unwrap();
        // Read out of order so that every page is pulled again after others pushed it out.
        for i in (0..RECORDS).rev().step_by(7) {
            assert_eq!(tree.get(i.to_be_bytes()).unwrap().unwrap(), record(i));
        }
    }
    let (store, _inbox) = open(dir.path(), 100, DAY);
    let tree = store.cron_tree().unwrap();
    let mut expected: u32 = 0;
    for entry in tree.iter() {
        let (key, value) = entry.unwrap();
        assert_eq!(&*key, expected.to_be_bytes());
        assert_eq!(value, record(expected));
        expected += 1;
    }
    assert_eq!(expected, RECORDS);
}

/// Records are encoded through one buffer per thread: a short record after a long one must
/// carry nothing of the long one, and a buffer a large record grew is not kept.
#[test]
fn records_encoded_one_after_another_read_back_exactly() {
    let medium = "m".repeat(2_000);
    let long = "x".repeat(200_000);
    let short = "y".to_owned();
    for text in [&medium, &short, &long, &short] {
        let bytes = super::encode(text).unwrap();
        let back: String = super::decode("test", &bytes).unwrap();
        assert_eq!(&back, text);
    }
    let kept = super::ENCODE_BUFFER.with(|cell| cell.borrow().capacity());
    assert!(kept < super::KEPT_ENCODE_BUFFER, "kept {kept} bytes");
}

/// A writer that leads a group commit and is dropped before its flush ends (its request
/// went away) must not leave the others waiting for a flush nobody will make: one of them
/// takes the lead and flushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_go_on_when_the_writer_leading_the_flush_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _inbox) = open(dir.path(), 10, DAY);
    let ticket = store.note_write();
    let lead = super::FlushLead::take(&store.commit).expect("nobody leads yet");
    assert!(
        super::FlushLead::take(&store.commit).is_none(),
        "two writers lead at once"
    );
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.sync(ticket).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "a write was called durable while nobody had flushed it"
    );
    drop(lead);
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter took the lead once it was let go")
        .unwrap()
        .unwrap();
    assert!(*store.commit.durable.borrow() >= ticket);
}

/// Writes spread over several batches all land, in the order they were made: a key written,
/// removed and written again ends with its last value; one written then removed is gone.
#[test]
fn batched_writes_land_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = super::Store::open(dir.path()).unwrap();
    let tree = store.cron_config_tree().unwrap();
    let mut writes = super::BatchedWrites::new(&tree);
    for i in 0..700u32 {
        writes
            .insert(&i.to_be_bytes(), sled::IVec::from(&b"first"[..]))
            .unwrap();
    }
    for i in (0..700u32).step_by(2) {
        writes.remove(&i.to_be_bytes()).unwrap();
    }
    writes
        .insert(&0u32.to_be_bytes(), sled::IVec::from(&b"last"[..]))
        .unwrap();
    writes.finish().unwrap();
    assert_eq!(tree.len(), 351);
    assert_eq!(&*tree.get(0u32.to_be_bytes()).unwrap().unwrap(), b"last");
    assert_eq!(&*tree.get(699u32.to_be_bytes()).unwrap().unwrap(), b"first");
    assert!(tree.get(698u32.to_be_bytes()).unwrap().is_none());
}

/// Records that stay (owner messages kept for months) among records that come and go (events
/// purged a minute after they settle): sled keeps a log segment while any page in it is live,
/// so the kept records' pages must be moved out of segments that are otherwise dead. Its
/// cleaner used to move the pages of one segment a second, and under a burst the data dir grew
/// by ~0.6 MB per 1,000 events for a few hundred bytes kept (the soak's 61,844 owner messages
/// took 1.6 GB; see vendor/sled/STEWARD.md, change 5).
#[test]
fn records_kept_among_records_that_come_and_go_do_not_grow_the_data_dir() {
    const WINDOW: u64 = 40_000;
    const MEASURED: u64 = 80_000;
    const KEEP_EVERY: u64 = 16;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db")).unwrap();
    let kept = store.db.open_tree("kept").unwrap();
    let size = || dir_bytes(&dir.path().join("db"));
    let key = |prefix: u8, n: u64| {
        let mut key = [prefix; 9];
        key[1..].copy_from_slice(&n.to_be_bytes());
        key
    };
    let mut size_after_warm_up = 0;
    for n in 1..=WINDOW + MEASURED {
        store.log.insert(key(b'e', n), vec![1u8; 300]).unwrap();
        store.log.insert(key(b't', n), vec![2u8; 200]).unwrap();
        if n % KEEP_EVERY == 0 {
            kept.insert(n.to_be_bytes(), vec![3u8; 400]).unwrap();
        }
        if n % 5 == 0 {
            store.db.flush().unwrap();
        }
        if let Some(old) = n.checked_sub(WINDOW) {
            store.log.remove(key(b'e', old)).unwrap();
            store.log.remove(key(b't', old)).unwrap();
        }
        if n == WINDOW {
            size_after_warm_up = size();
        }
    }
    let grown = size().saturating_sub(size_after_warm_up) as f64 / 1e6;
    let kept_mb = (MEASURED / KEEP_EVERY * 400) as f64 / 1e6;
    assert!(
        grown < 16.0,
        "the data dir grew by {grown:.1} MB over {MEASURED} events that kept {kept_mb:.1} MB \
         (from {:.1} MB after the first {WINDOW})",
        size_after_warm_up as f64 / 1e6
    );
}

/// Set in the child process of the cache test below: the data dir it reads.
const CACHE_PROBE_DIR: &str = "STEWARD_TEST_CACHE_PROBE_DIR";

/// Reading a large store once (a listing of every owner message, retention walking old
/// records, sled's cleaner moving kept pages) must leave the process near the store's
/// configured cache, not holding every page it read. sled's cache counted a page only once
/// 64 reads of its shard had queued up, across 256 shards, so up to ~16,000 pages read stayed
/// in memory uncounted: this read left 42.9 MB more resident under the 4 MB cache (see
/// vendor/sled/STEWARD.md, change 6).
///
/// The read runs in a child process (this test binary run again for this test alone, with
/// [`CACHE_PROBE_DIR`] set), whose resident memory is its own whatever else this binary's
/// tests do at the same time.
#[test]
fn reading_a_large_store_once_keeps_memory_near_the_configured_cache() {
    const RECORDS: u64 = 40_000;
    const RECORD_BYTES: usize = 1_000;
    if let Some(dir) = std::env::var_os(CACHE_PROBE_DIR) {
        let store = Store::open(Path::new(&dir)).unwrap();
        let before = resident_kb();
        let read: usize = store.log.iter().map(|item| item.unwrap().1.len()).sum();
        println!(
            "read {read} bytes; resident grew by {} kB",
            resident_kb() - before
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let store = Store::open(&db).unwrap();
        let mut writes = super::BatchedWrites::new(&store.log);
        for n in 0..RECORDS {
            let record = sled::IVec::from(vec![(n % 251) as u8; RECORD_BYTES]);
            writes.insert(&keys::event(n), record).unwrap();
        }
        writes.finish().unwrap();
        store.db.flush().unwrap();
    }
    let line = measured_in_child(
        "store::tests::reading_a_large_store_once_keeps_memory_near_the_configured_cache",
        CACHE_PROBE_DIR,
        &db,
        "read ",
    );
    assert!(
        line.starts_with(&format!("read {} bytes", RECORDS as usize * RECORD_BYTES)),
        "{line}"
    );
    let grown_kb: u64 = line
        .rsplit_once("grew by ")
        .and_then(|(_, rest)| rest.strip_suffix(" kB")?.parse().ok())
        .unwrap_or_else(|| panic!("unreadable measurement: {line}"));
    let grown_mb = grown_kb as f64 / 1024.0;
    assert!(
        grown_mb < 12.0,
        "reading a {} MB store once left {grown_mb:.1} MB more resident (cache: 4 MB)",
        RECORDS as usize * RECORD_BYTES / 1_000_000
    );
}

/// Runs `test` — a test of this binary, by its full name — again in a child process with the
/// environment variable `probe` set to `dir`, and returns what the child printed from `marker`
/// on. The child measures its own memory or CPU time, which in this process would count
/// whatever the other tests run alongside do.
fn measured_in_child(test: &str, probe: &str, dir: &Path, marker: &str) -> String {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(probe, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "the child failed: {stdout}");
    // libtest prints the test's name on the same line, before what the test prints.
    let line = stdout
        .lines()
        .find_map(|line| line.get(line.find(marker)?..))
        .unwrap_or_else(|| panic!("no measurement in the child's output: {stdout}"))
        .to_owned();
    println!("{line}");
    line
}

/// The bytes of the files directly in `dir` (sled's data dir has no subdirectories).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum()
}

/// This process's resident memory (`VmRSS`), in kB.
fn resident_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().strip_suffix(" kB")?.parse().ok())
        .unwrap()
}

/// Set in the child process of the idle test below: the data dir it uses.
const IDLE_PROBE_DIR: &str = "STEWARD_TEST_IDLE_PROBE_DIR";

/// After a burst has come and gone (events written, then purged), an idle store must cost
/// next to no CPU. sled's rule that shrinks the file moved its last live segment even when
/// no free segment lay below it, so the pages went to the tip above it, which made another
/// segment the last, and so on: the soak's idle daemon spent half a core on 17-26 million
/// page moves a minute (see vendor/sled/STEWARD.md, change 7).
///
/// Runs in a child process, as the cache test above, so that the CPU time is the store's own.
#[test]
fn an_idle_store_after_a_burst_spends_no_cpu() {
    const EVENTS: u64 = 60_000;
    const IDLE: Duration = Duration::from_secs(4);
    if let Some(dir) = std::env::var_os(IDLE_PROBE_DIR) {
        let store = Store::open(Path::new(&dir)).unwrap();
        let kept = store.db.open_tree("kept").unwrap();
        for n in 0..EVENTS {
            store.log.insert(keys::event(n), vec![1u8; 300]).unwrap();
            if n % 4 == 0 {
                kept.insert(n.to_be_bytes(), vec![3u8; 400]).unwrap();
            }
            if n % 5 == 0 {
                store.db.flush().unwrap();
            }
        }
        for n in 0..EVENTS {
            store.log.remove(keys::event(n)).unwrap();
        }
        store.db.flush().unwrap();
        // The cleaning the purge calls for, then the idle that is measured.
        std::thread::sleep(Duration::from_secs(3));
        let before = cpu_ms();
        std::thread::sleep(IDLE);
        let cpu = cpu_ms() - before;
        let size = dir_bytes(Path::new(&dir));
        println!("idle cpu {cpu} ms, data dir {:.1} MB", size as f64 / 1e6);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let line = measured_in_child(
        "store::tests::an_idle_store_after_a_burst_spends_no_cpu",
        IDLE_PROBE_DIR,
        &dir.path().join("db"),
        "idle cpu ",
    );
    let cpu_ms: u64 = line
        .strip_prefix("idle cpu ")
        .and_then(|rest| rest.split_once(" ms")?.0.parse().ok())
        .unwrap_or_else(|| panic!("unreadable measurement: {line}"));
    assert!(
        cpu_ms * 10 < IDLE.as_millis() as u64,
        "an idle store spent {cpu_ms} ms of CPU in {} ms after a burst",
        IDLE.as_millis()
    );
}

/// This process's CPU time (user and system, `/proc/self/stat`), in ms.
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command's name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Clock ticks are 100 a second on Linux (USER_HZ), whatever the kernel's HZ.
    ticks * 10
}

//! Trajectories: append-only, numbered items in the store's log tree, the main one under its
//! own prefix and each side lane's under its origin event's id.
//!
//! Merging an event appends its `event` item and marks it `merged` with its seq in one
//! atomic batch — so after a crash an event is either merged exactly once or still pending,
//! never both, never twice. A merge of many events is written as several such batches of at
//! most [`EVENTS_PER_WRITE`] events, in arrival order: sled holds a whole batch and the
//! copies of every tree node it touches in memory until it is applied, and one batch for
//! the 17,000 webhook deliveries that waited out a model outage peaked at ~120 MB (measured
//! 2026-12-04, kept resident by the allocator afterwards). A crash between two of them
//! leaves the first events merged and the rest pending, as a crash between a merge and its
//! `step_started` does. Between two writes the merge yields to the runtime: a write costs
//! ~35 µs an event, and a merge of hundreds in one go held one of the daemon's two runtime
//! workers for tens of milliseconds while webhook deliveries queued behind it (their p99 with
//! the model unreachable went from ~24 to ~13 ms when it stopped, see BENCHMARKS.md).

use chrono::{DateTime, Utc};
use steward_events::{EventId, EventState, ItemKind, TrajectoryId, TrajectoryItem};
use tokio::sync::watch;

use super::{EventRecord, Inbox, Store, StoreError, decode, encode, keys};

/// The most events one write of a merge holds (see the module docs). The dispatcher reads
/// as many in a turn, so that a turn's merge is one write.
pub(crate) const EVENTS_PER_WRITE: usize = 16;

#[derive(Debug)]
pub struct Trajectory {
    id: TrajectoryId,
    tree: sled::Tree,
    /// The key prefix of this trajectory's items in the log tree.
    prefix: Vec<u8>,
    next_seq: std::sync::Mutex<u64>,
    latest: watch::Sender<u64>,
    last_step: u64,
}

impl Trajectory {
    pub fn main(store: &Store) -> Result<Self, StoreError> {
        Self::open(TrajectoryId::main(), store.log.clone(), keys::main_prefix())
    }

    pub fn lane(store: &Store, origin: EventId) -> Result<Self, StoreError> {
        Self::open(
            TrajectoryId::lane(origin),
            store.log.clone(),
            keys::lane_prefix(origin),
        )
    }

    fn open(id: TrajectoryId, tree: sled::Tree, prefix: Vec<u8>) -> Result<Self, StoreError> {
        let last = match tree.scan_prefix(&prefix).next_back() {
            Some(entry) => Some(decode::<TrajectoryItem>("trajectory", &entry?.1)?),
            None => None,
        };
        let next = last.as_ref().map_or(1, |item| item.seq + 1);
        Ok(Self {
            id,
            tree,
            prefix,
            next_seq: std::sync::Mutex::new(next),
            latest: watch::channel(next - 1).0,
            last_step: last.map_or(0, |item| item.step),
        })
    }

    pub fn id(&self) -> &TrajectoryId {
        &self.id
    }

    /// The step number of the last item found when the trajectory was opened.
    pub fn last_step_on_open(&self) -> u64 {
        self.last_step
    }

    fn key(&self, seq: u64) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.extend_from_slice(&seq.to_be_bytes());
        key
    }

    pub fn append(&self, step: u64, kind: ItemKind) -> Result<TrajectoryItem, StoreError> {
        let mut next = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let item = TrajectoryItem {
            seq: *next,
            at: Utc::now(),
            step,
            kind,
        };
        self.tree.insert(self.key(item.seq), encode(&item)?)?;
        *next += 1;
        self.latest.send_replace(item.seq);
        Ok(item)
    }

    /// Appends the events' items and marks them merged, each event atomically (see the
    /// module docs); returns the items in arrival order. Nothing else may write this
    /// trajectory until it returns: the items take consecutive positions.
    pub async fn merge_events(
        &self,
        inbox: &Inbox,
        step: u64,
        records: Vec<EventRecord>,
    ) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut items = Vec::with_capacity(records.len());
        let mut records = records.into_iter().peekable();
        while records.peek().is_some() {
            if !items.is_empty() {
                tokio::task::yield_now().await;
            }
            let chunk: Vec<EventRecord> = records.by_ref().take(EVENTS_PER_WRITE).collect();
            items.extend(self.merge_chunk(inbox, step, chunk)?);
        }
        Ok(items)
    }

    fn merge_chunk(
        &self,
        inbox: &Inbox,
        step: u64,
        records: Vec<EventRecord>,
    ) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut next = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let now = Utc::now();
        let mut items = Vec::with_capacity(records.len());
        let mut merged = Vec::with_capacity(records.len());
        let mut batch = sled::Batch::default();
        for (i, mut record) in records.into_iter().enumerate() {
            let item = TrajectoryItem {
                seq: *next + i as u64,
                at: now,
                step,
                kind: event_item(&record),
            };
            record.state = EventState::Merged {
                trajectory: self.id.clone(),
                seq: item.seq,
            };
            record.updated_at = now;
            batch.insert(self.key(item.seq), encode(&item)?);
            batch.insert(&keys::event(record.arrival), encode(&record)?);
            items.push(item);
            merged.push(record);
        }
        self.tree.apply_batch(batch)?;
        *next += items.len() as u64;
        self.latest.send_replace(*next - 1);
        drop(next);
        inbox.store().note_write();
        inbox.settled(merged)?;
        Ok(items)
    }

    /// The most recent `limit` items (all when `None`), oldest first.
    pub fn list(&self, limit: Option<usize>) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut items = Vec::new();
        for entry in self.tree.scan_prefix(&self.prefix).rev() {
            items.push(decode("trajectory", &entry?.1)?);
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        items.reverse();
        Ok(items)
    }

    /// Up to `limit` items before seq `before` (the newest when `None`), oldest first: a
    /// page of a long trajectory, read without touching the rest.
    pub fn page(
        &self,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<TrajectoryItem>, StoreError> {
        let end = self.key(before.unwrap_or(u64::MAX));
        let mut items = Vec::new();
        for entry in self.tree.range(self.prefix.clone()..end).rev().take(limit) {
            items.push(decode("trajectory", &entry?.1)?);
        }
        items.reverse();
        Ok(items)
    }

    /// The items from seq `from` on, up to `limit` of them, oldest first.
    pub fn from_seq(&self, from: u64, limit: usize) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut items = Vec::new();
        for entry in self.tree.range(self.key(from)..).take(limit) {
            let (key, value) = entry?;
            if !key.starts_with(&self.prefix) {
                break;
            }
            items.push(decode("trajectory", &value)?);
        }
        Ok(items)
    }

    /// The items a model sees, oldest first: back to the latest summary, which comes first
    /// and stands in for everything it covers (older summaries included) — or back `max`
    /// items, if that comes first.
    pub fn context_items(&self, max: usize) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut items = Vec::new();
        let mut summary: Option<TrajectoryItem> = None;
        for entry in self.tree.scan_prefix(&self.prefix).rev() {
            let item: TrajectoryItem = decode("trajectory", &entry?.1)?;
            match (&item.kind, &summary) {
                (
                    _,
                    Some(TrajectoryItem {
                        kind: ItemKind::Summary { covers_through, .. },
                        ..
                    }),
                ) if item.seq <= *covers_through => break,
                (ItemKind::Summary { .. }, None) => summary = Some(item),
                (ItemKind::Summary { .. }, Some(_)) => {}
                _ => {
                    items.push(item);
                    if items.len() >= max {
                        break;
                    }
                }
            }
        }
        items.extend(summary);
        items.reverse();
        Ok(items)
    }

    /// Items with a seq greater than `seq`, oldest first.
    pub fn after(&self, seq: u64) -> Result<Vec<TrajectoryItem>, StoreError> {
        let mut end = self.prefix.clone();
        end.extend_from_slice(&[0xff; 8]);
        self.tree
            .range(self.key(seq + 1)..=end)
            .map(|entry| decode("trajectory", &entry?.1))
            .collect()
    }

    /// Wakes when items are appended; holds the last seq.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }
}

/// How an event appears in a trajectory.
pub fn event_item(record: &EventRecord) -> ItemKind {
    let e = &record.event;
    ItemKind::Event {
        event_id: e.id,
        source: e.source,
        channel: e.channel.clone(),
        sender: e.sender.clone(),
        trust: e.trust,
        urgency: e.urgency,
        text: e.payload.text().to_owned(),
        occurred_at: matches!(e.payload, steward_events::Payload::Scheduled { .. })
            .then_some(e.occurred_at),
    }
}

impl Trajectory {
    /// The last step, when it has events still to be answered: started and never ended
    /// (the daemon stopped while it ran), or put off to run again (see
    /// `ItemKind::StepCancelled::runs_again`). Events merged after the last step marker
    /// (joining a put-off step, or merged just before a stop came between the merge and
    /// its `step_started`) belong to it too: they were merged for a step that has not
    /// started, and nothing else would ever answer them.
    pub fn unfinished_step(&self) -> Result<Option<UnfinishedStep>, StoreError> {
        let mut late = Vec::new();
        let mut put_off = false;
        for entry in self.tree.scan_prefix(&self.prefix).rev() {
            let item: TrajectoryItem = decode("trajectory", &entry?.1)?;
            match item.kind {
                ItemKind::Event { event_id, .. } if !put_off => late.push(event_id),
                ItemKind::StepStarted { mut events } => {
                    events.extend(late.into_iter().rev());
                    return Ok(Some(if put_off {
                        UnfinishedStep::PutOff(events)
                    } else {
                        UnfinishedStep::Interrupted(events)
                    }));
                }
                ItemKind::StepCancelled {
                    runs_again: true, ..
                } if !put_off => put_off = true,
                ItemKind::StepCompleted | ItemKind::StepCancelled { .. } => break,
                _ => {}
            }
        }
        Ok((!late.is_empty()).then(|| UnfinishedStep::PutOff(late.into_iter().rev().collect())))
    }
}

/// The last step of a trajectory, found unfinished when the daemon starts.
#[derive(Debug)]
pub enum UnfinishedStep {
    /// It was running when the daemon stopped; these are its events.
    Interrupted(Vec<EventId>),
    /// It was waiting to run again (for the model, for the budget), or its events were
    /// merged and it had not started; these are its events.
    PutOff(Vec<EventId>),
}

/// Removes trajectory items older than `cutoff` (`trajectory.retention_days`): from the
/// main trajectory the oldest items up to the first newer one, but never anything from the
/// last `step_started` on (a step in flight, or the one crash recovery looks at) and never
/// the newest summary among them (it stands in for what went before); side lanes go whole,
/// once their last item is older than `cutoff`. Returns how many items went.
pub fn purge(store: &Store, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
    Ok(purge_main(store, cutoff)? + purge_lanes(store, cutoff)?)
}

fn purge_main(store: &Store, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
    let prefix = keys::main_prefix();
    let mut floor = u64::MAX;
    for entry in store.log.scan_prefix(&prefix).rev() {
        let item: TrajectoryItem = decode("trajectory", &entry?.1)?;
        if matches!(item.kind, ItemKind::StepStarted { .. }) {
            floor = item.seq;
            break;
        }
    }
    let mut removed = 0;
    let mut kept_summary: Option<sled::IVec> = None;
    for entry in store.log.scan_prefix(&prefix) {
        let (key, bytes) = entry?;
        let item: TrajectoryItem = decode("trajectory", &bytes)?;
        if item.seq >= floor || item.at >= cutoff {
            break;
        }
        if matches!(item.kind, ItemKind::Summary { .. }) {
            // An older summary is superseded by this one.
            if let Some(previous) = kept_summary.replace(key) {
                store.log.remove(previous)?;
                removed += 1;
            }
            continue;
        }
        store.log.remove(key)?;
        removed += 1;
    }
    Ok(removed)
}

fn purge_lanes(store: &Store, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
    // Keys are `l` + origin event id + seq: one lane's items are contiguous, oldest first.
    let mut expired: Vec<Vec<u8>> = Vec::new();
    let mut current: Option<(Vec<u8>, DateTime<Utc>)> = None;
    for entry in store.log.scan_prefix([keys::LANE]) {
        let (key, bytes) = entry?;
        let lane = key[..key.len().saturating_sub(8)].to_vec();
        let item: TrajectoryItem = decode("trajectory", &bytes)?;
        match &mut current {
            Some((prefix, last_at)) if *prefix == lane => *last_at = item.at,
            _ => {
                if let Some((prefix, last_at)) = current.replace((lane, item.at))
                    && last_at < cutoff
                {
                    expired.push(prefix);
                }
            }
        }
    }
    if let Some((prefix, last_at)) = current
        && last_at < cutoff
    {
        expired.push(prefix);
    }
    let mut removed = 0;
    for prefix in expired {
        for entry in store.log.scan_prefix(&prefix) {
            store.log.remove(entry?.0)?;
            removed += 1;
        }
    }
    Ok(removed)
}

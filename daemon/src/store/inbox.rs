//! The inbox: where every event becomes durable before anyone acknowledges it upstream.
//!
//! - `submit` returns only after the event is on disk (group commit via `Store::sync`).
//! - Arrival order is a dense sequence assigned under one lock together with the write, so
//!   the dispatcher, reading pending events in arrival order up to the last durable one, can
//!   never skip an event that committed late.
//! - A dedupe key seen within the retention window makes the new event a `duplicate` of the
//!   first; it is stored (visible), never processed.
//! - Backpressure: at most `capacity` events may be pending; `submit` waits for room. On start,
//!   pending events beyond the capacity are honoured as debt, so the bound holds across
//!   restarts. Nothing is ever discarded.
//! - Pending events survive a crash and are read again by the dispatcher on start. The set of
//!   pending arrivals is kept in memory; on open it is rebuilt by scanning from the persisted
//!   `settled` watermark (every arrival below it is terminal), so start-up reads only the tail.
//! - Bounded: settled records whose last change is older than the retention
//!   (`inbox.dedupe_retention_days`) and expired dedupe keys are purged soon after start
//!   and periodically ([`Inbox::purge`], run by `crate::retention`); pending events and the
//!   newest record always stay.
//! - An event is one insert: its record (and, with a dedupe key, the key's entry right after,
//!   restored on open if a crash fell between the two). Lookup by id (`get`) scans from the newest record back; it serves rare
//!   paths (resuming an interrupted step), not the hot one.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_events::{Event, EventId, EventState, Source};
use tokio::sync::{Semaphore, broadcast, watch};
use tracing::error;

use std::collections::BTreeSet;

use super::{Store, StoreError, decode, encode, keys};

/// An event with where it is in its life.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Position in the inbox's arrival order (1-based, dense).
    pub arrival: u64,
    pub event: Event,
    pub state: EventState,
    pub updated_at: DateTime<Utc>,
}

/// The answer to a submit: the event is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub id: EventId,
    pub arrival: u64,
    /// Set when the event was recorded as a duplicate of an earlier one.
    pub duplicate_of: Option<EventId>,
}

/// Changes kept for followers that fall behind (`steward events --follow`); a follower
/// further behind is told how many it missed.
const CHANGES_BUFFER: usize = 1024;

/// A new or changed event record, for `steward events --follow`. Shared, not copied: the
/// channel writes every one of its slots when it is made, so a slot is a pointer (32 bytes
/// with its lock) rather than a whole record (~400) — 30 KB a daemon holds from its start
/// instead of 400.
#[derive(Clone, Debug)]
pub struct InboxChange(pub Arc<EventRecord>);

#[derive(Serialize, Deserialize)]
struct DedupeEntry {
    id: EventId,
    at_ms: i64,
}

#[derive(Debug)]
pub struct Inbox {
    store: Store,
    /// The next arrival seq; held while an event is assigned its seq and written.
    next_arrival: std::sync::Mutex<u64>,
    durable_arrival: watch::Sender<u64>,
    room: Arc<Semaphore>,
    /// Permits owed because more events were pending at start than the capacity allows.
    debt: std::sync::Mutex<usize>,
    /// Arrivals not yet in a terminal state.
    pending: std::sync::Mutex<BTreeSet<u64>>,
    retention: Duration,
    changes: broadcast::Sender<InboxChange>,
    /// Events that reached each terminal state since start, by source (for `/metrics`).
    outcomes: std::sync::Mutex<std::collections::BTreeMap<(Source, &'static str), u64>>,
    /// Refuses new input when the disk is nearly full (see `crate::disk`).
    disk: Option<crate::disk::DiskGuard>,
}

impl Inbox {
    pub fn open(store: Store, capacity: usize, retention: Duration) -> Result<Self, StoreError> {
        let next_arrival = match store.log.scan_prefix([keys::EVENT]).next_back() {
            Some(entry) => arrival_of(&entry?.0)? + 1,
            None => 1,
        };
        let settled = match store.log.get(keys::SETTLED)? {
            Some(bytes) => keys::trailing_u64(&bytes).unwrap_or(0),
            None => 0,
        };
        let mut pending = BTreeSet::new();
        for entry in store
            .log
            .range(keys::event(settled + 1)..keys::event(next_arrival))
        {
            let (key, bytes) = entry?;
            match decode::<EventRecord>("events", &bytes) {
                Ok(record) if record.state == EventState::Pending => {
                    restore_dedupe_entry(&store, &record)?;
                    pending.insert(record.arrival);
                }
                Ok(_) => {}
                Err(e) => {
                    error!(arrival = arrival_of(&key)?, error = %e, "unreadable event record; it cannot be replayed")
                }
            }
        }
        let count = pending.len();
        Ok(Self {
            store,
            next_arrival: std::sync::Mutex::new(next_arrival),
            // Everything already on disk at open is durable.
            durable_arrival: watch::channel(next_arrival - 1).0,
            room: Arc::new(Semaphore::new(capacity.saturating_sub(count))),
            debt: std::sync::Mutex::new(count.saturating_sub(capacity)),
            pending: std::sync::Mutex::new(pending),
            retention,
            changes: broadcast::channel(CHANGES_BUFFER).0,
            outcomes: Default::default(),
            disk: None,
        })
    }

    /// Refuses new input (with [`StoreError::DiskFull`]) while `guard` says the disk is
    /// nearly full.
    pub fn with_disk_guard(mut self, guard: crate::disk::DiskGuard) -> Self {
        self.disk = Some(guard);
        self
    }

    /// Makes `event` durable and returns its identity; waits while the inbox is full.
    pub async fn submit(&self, event: Event) -> Result<Submitted, StoreError> {
        let permit = self
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Corrupt {
                tree: "inbox",
                reason: "the inbox is closed".into(),
            })?;
        let (record, ticket) = self.store.watch_fault(self.write(event, None))?;
        let duplicate_of = match &record.state {
            EventState::Duplicate { of } => Some(*of),
            _ => None,
        };
        if duplicate_of.is_none() {
            permit.forget();
        }
        self.store.watch_fault(self.store.sync(ticket).await)?;
        self.durable_arrival
            .send_if_modified(|d| std::mem::replace(d, (*d).max(record.arrival)) < record.arrival);
        let submitted = Submitted {
            id: record.event.id,
            arrival: record.arrival,
            duplicate_of,
        };
        let _ = self.changes.send(InboxChange(Arc::new(record)));
        Ok(submitted)
    }

    /// Records an event that was refused at the channel: stored, terminal, visible.
    pub async fn reject(&self, event: Event, reason: String) -> Result<Submitted, StoreError> {
        self.record_terminal(event, EventState::Rejected { reason })
            .await
    }

    /// Records an event straight into a terminal state (rejected, dead, missed, handled):
    /// durable, visible, never processed. Its dedupe key is kept, like a pending event's, so
    /// that a channel reading the same input again (a mailbox rescanned) can tell it was
    /// recorded.
    pub async fn record_terminal(
        &self,
        event: Event,
        state: EventState,
    ) -> Result<Submitted, StoreError> {
        let (record, ticket) = self.write(event, Some(state))?;
        self.store.sync(ticket).await?;
        let submitted = Submitted {
            id: record.event.id,
            arrival: record.arrival,
            duplicate_of: None,
        };
        let _ = self.changes.send(InboxChange(Arc::new(record)));
        Ok(submitted)
    }

    /// Assigns the arrival seq and writes the record, its index entries and its dedupe key
    /// in one transaction, under the arrival lock.
    fn write(
        &self,
        event: Event,
        state: Option<EventState>,
    ) -> Result<(EventRecord, u64), StoreError> {
        if let Some(guard) = &self.disk {
            guard.check()?;
        }
        let now = Utc::now();
        let mut next = lock(&self.next_arrival);
        let arrival = *next;
        let state = match state {
            Some(state) => state,
            None => match self.live_duplicate(event.dedupe_key.as_deref(), now)? {
                Some(of) => EventState::Duplicate { of },
                None => EventState::Pending,
            },
        };
        let record = EventRecord {
            arrival,
            event,
            state,
            updated_at: now,
        };
        let bytes = encode(&record)?;
        let dedupe = match (&record.event.dedupe_key, &record.state) {
            (Some(key), state) if !matches!(state, EventState::Duplicate { .. }) => Some((
                keys::dedupe(key),
                encode(&DedupeEntry {
                    id: record.event.id,
                    at_ms: now.timestamp_millis(),
                })?,
            )),
            _ => None,
        };
        // Two single inserts, not a batch (see `Store`). The record goes first: if a crash
        // falls between the two, the record is pending and `open` restores its dedupe entry.
        self.store.log.insert(keys::event(arrival), bytes)?;
        if let Some((key, entry)) = dedupe {
            self.store.log.insert(key, entry)?;
        }
        if record.state == EventState::Pending {
            lock(&self.pending).insert(arrival);
        } else {
            self.count_outcome(&record);
        }
        *next += 1;
        let ticket = self.store.note_write();
        Ok((record, ticket))
    }

    /// Whether an event with this dedupe key was recorded within the retention: a timer's
    /// occurrence key, for instance, is its claim.
    pub fn is_claimed(&self, dedupe_key: &str) -> Result<bool, StoreError> {
        Ok(self.live_duplicate(Some(dedupe_key), Utc::now())?.is_some())
    }

    fn live_duplicate(
        &self,
        key: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<EventId>, StoreError> {
        let Some(key) = key else {
            return Ok(None);
        };
        let Some(bytes) = self.store.log.get(keys::dedupe(key))? else {
            return Ok(None);
        };
        let entry: DedupeEntry = decode("dedupe", &bytes)?;
        let age_ms = now.timestamp_millis().saturating_sub(entry.at_ms);
        Ok((u128::from(age_ms.max(0) as u64) < self.retention.as_millis()).then_some(entry.id))
    }

    /// Pending events after arrival `after`, in arrival order, that are already durable.
    pub fn read_pending(&self, after: u64, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        let durable = *self.durable_arrival.borrow();
        if durable <= after {
            return Ok(Vec::new());
        }
        let mut records = Vec::new();
        for entry in self
            .store
            .log
            .range(keys::event(after + 1)..=keys::event(durable))
        {
            let (key, bytes) = entry?;
            match decode::<EventRecord>("events", &bytes) {
                Ok(record) if record.state == EventState::Pending => records.push(record),
                Ok(_) => {}
                Err(e) => {
                    // sled checksums its log, so this means a bug or tampering; keep the
                    // dispatcher going and say so loudly rather than wedge on one record.
                    let arrival = arrival_of(&key)?;
                    error!(arrival, error = %e, "unreadable pending event record; skipping it");
                    lock(&self.pending).remove(&arrival);
                }
            }
            if records.len() >= limit {
                break;
            }
        }
        Ok(records)
    }

    /// The record of event `id`, searched from the newest back (see the module docs).
    pub fn get(&self, id: EventId) -> Result<Option<EventRecord>, StoreError> {
        Ok(self.get_many(&[id])?.pop())
    }

    /// The records of `ids`, found in one pass from the newest back (stopping once all are
    /// found), in the order of `ids`; an id with no record is left out. A step with
    /// thousands of events is read back after a restart this way, where one [`Inbox::get`]
    /// per event would read the log once per event.
    pub fn get_many(&self, ids: &[EventId]) -> Result<Vec<EventRecord>, StoreError> {
        let mut wanted: std::collections::HashSet<EventId> = ids.iter().copied().collect();
        let mut found = std::collections::HashMap::with_capacity(wanted.len());
        for entry in self.store.log.scan_prefix([keys::EVENT]).rev() {
            if wanted.is_empty() {
                break;
            }
            let record: EventRecord = decode("events", &entry?.1)?;
            if wanted.remove(&record.event.id) {
                found.insert(record.event.id, record);
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// The most recent `limit` records (all when `None`) in `state` if given, oldest first.
    pub fn list(
        &self,
        limit: Option<usize>,
        state: Option<steward_events::StateKind>,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let mut records = Vec::new();
        for entry in self.store.log.scan_prefix([keys::EVENT]).rev() {
            let (_, bytes) = entry?;
            let record: EventRecord = decode("events", &bytes)?;
            if state.is_none_or(|s| record.state.kind() == s) {
                records.push(record);
                if limit.is_some_and(|l| records.len() >= l) {
                    break;
                }
            }
        }
        records.reverse();
        Ok(records)
    }

    /// Called once records left the pending state on disk: frees their room, advances the
    /// settled watermark and tells followers.
    pub(crate) fn settled(&self, records: Vec<EventRecord>) -> Result<(), StoreError> {
        let n = records.len();
        // Read before taking `pending`: `write` holds `next_arrival` while it takes `pending`,
        // so taking them in the other order here could deadlock. An older value only makes
        // the watermark lower, which is always safe.
        let accepted = *lock(&self.next_arrival) - 1;
        let watermark = {
            let mut pending = lock(&self.pending);
            for record in &records {
                pending.remove(&record.arrival);
            }
            pending.first().map_or(accepted, |first| first - 1)
        };
        // After the state changes in sled's log order, so a recovered watermark never runs
        // ahead of the states it vouches for.
        self.store
            .log
            .insert(keys::SETTLED, &watermark.to_be_bytes())?;
        let repaid = {
            let mut debt = lock(&self.debt);
            let repaid = (*debt).min(n);
            *debt -= repaid;
            repaid
        };
        self.room.add_permits(n - repaid);
        for record in &records {
            self.count_outcome(record);
        }
        for record in records {
            let _ = self.changes.send(InboxChange(Arc::new(record)));
        }
        Ok(())
    }

    /// Moves one pending event to a terminal state outside any trajectory (e.g. `dead`).
    pub fn finish(&self, mut record: EventRecord, state: EventState) -> Result<(), StoreError> {
        record.state = state;
        record.updated_at = Utc::now();
        self.store
            .log
            .insert(keys::event(record.arrival), encode(&record)?)?;
        self.store.note_write();
        self.settled(vec![record])
    }

    fn count_outcome(&self, record: &EventRecord) {
        *lock(&self.outcomes)
            .entry((record.event.source, record.state.name()))
            .or_default() += 1;
    }

    /// How many events reached each terminal state since start, by source.
    pub fn outcome_counts(&self) -> Vec<(Source, &'static str, u64)> {
        lock(&self.outcomes)
            .iter()
            .map(|((source, state), n)| (*source, *state, *n))
            .collect()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<InboxChange> {
        self.changes.subscribe()
    }

    /// Wakes when more events became durable.
    pub fn durable_arrivals(&self) -> watch::Receiver<u64> {
        self.durable_arrival.subscribe()
    }

    pub fn pending_count(&self) -> u64 {
        lock(&self.pending).len() as u64
    }

    /// Removes terminal records whose last change is older than the retention, each with
    /// its dedupe entry, so the data dir stays bounded. It walks from the oldest record and
    /// stops at the first one still within the retention, so it reads only what it removes:
    /// a record that settled late holds back the ones after it until it expires too (at
    /// most one retention later). Pending events are never touched, and the newest record
    /// always stays (arrival numbers continue from it). Returns how many records went.
    pub fn purge(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let cutoff = self.cutoff(now);
        let settled = match self.store.log.get(keys::SETTLED)? {
            Some(bytes) => keys::trailing_u64(&bytes).unwrap_or(0),
            None => 0,
        };
        let newest = lock(&self.next_arrival).saturating_sub(1);
        let last = settled.min(newest.saturating_sub(1));
        let mut removed = 0;
        if last == 0 {
            return Ok(0);
        }
        for entry in self.store.log.range(keys::event(1)..=keys::event(last)) {
            let (key, bytes) = entry?;
            let Ok(record) = decode::<EventRecord>("events", &bytes) else {
                continue;
            };
            if record.updated_at >= cutoff {
                break;
            }
            if !record.state.is_terminal() {
                continue;
            }
            self.store.log.remove(key)?;
            removed += 1;
            if let Some(dedupe) = &record.event.dedupe_key {
                // Only if the key still names this event: a later one may have taken it over.
                let dedupe = keys::dedupe(dedupe);
                if let Some(entry) = self.store.log.get(&dedupe)?
                    && decode::<DedupeEntry>("dedupe", &entry)
                        .is_ok_and(|e| e.id == record.event.id)
                {
                    self.store.log.remove(dedupe)?;
                }
            }
        }
        Ok(removed)
    }

    /// Removes every dedupe entry past the retention, reading them all: for entries whose
    /// record went without them (a crash between the two removals), run once at start.
    pub fn sweep_expired_keys(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let cutoff_ms = self.cutoff(now).timestamp_millis();
        let mut removed = 0;
        for entry in self.store.log.scan_prefix([keys::DEDUPE]) {
            let (key, bytes) = entry?;
            if decode::<DedupeEntry>("dedupe", &bytes).is_ok_and(|e| e.at_ms < cutoff_ms) {
                self.store.log.remove(key)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// How long settled events and their dedupe keys are kept.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    fn cutoff(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - chrono::Duration::from_std(self.retention).unwrap_or(chrono::Duration::MAX)
    }

    /// Every event ever accepted, in any state.
    pub fn events_total(&self) -> u64 {
        *lock(&self.next_arrival) - 1
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }
}

/// A pending event's dedupe entry is written just after its record; a crash in between
/// leaves the record without it. Only pending records can be in that state: anything that
/// settled was written later in sled's log order, so its dedupe entry survived too.
pub(super) fn restore_dedupe_entry(store: &Store, record: &EventRecord) -> Result<(), StoreError> {
    let Some(key) = &record.event.dedupe_key else {
        return Ok(());
    };
    let key = keys::dedupe(key);
    if store.log.get(&key)?.is_none() {
        let entry = DedupeEntry {
            id: record.event.id,
            at_ms: record.event.received_at.timestamp_millis(),
        };
        store.log.insert(key, encode(&entry)?)?;
    }
    Ok(())
}

fn arrival_of(key: &[u8]) -> Result<u64, StoreError> {
    keys::trailing_u64(key).ok_or_else(|| StoreError::Corrupt {
        tree: "log",
        reason: format!("event key of {} bytes", key.len()),
    })
}

/// The guarded values stay consistent even if a holder panicked (each update is one step).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

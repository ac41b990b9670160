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
//! - Pending events survive a crash and are read again by the dispatcher on start.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sled::Transactional;
use sled::transaction::ConflictableTransactionError;
use steward_events::{Event, EventId, EventState};
use tokio::sync::{Semaphore, broadcast, watch};
use tracing::error;

use super::{Store, StoreError, decode, encode, seq_from_key, seq_key};

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

/// A new or changed event record, for `steward events --follow`.
#[derive(Clone, Debug)]
pub struct InboxChange(pub EventRecord);

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
    pending: std::sync::atomic::AtomicU64,
    retention: Duration,
    changes: broadcast::Sender<InboxChange>,
}

impl Inbox {
    pub fn open(store: Store, capacity: usize, retention: Duration) -> Result<Self, StoreError> {
        let next_arrival = match store.events.last()? {
            Some((key, _)) => seq_from_key("events", &key)? + 1,
            None => 1,
        };
        let pending = store.pending.len();
        Ok(Self {
            store,
            next_arrival: std::sync::Mutex::new(next_arrival),
            // Everything already on disk at open is durable.
            durable_arrival: watch::channel(next_arrival - 1).0,
            room: Arc::new(Semaphore::new(capacity.saturating_sub(pending))),
            debt: std::sync::Mutex::new(pending.saturating_sub(capacity)),
            pending: std::sync::atomic::AtomicU64::new(pending as u64),
            retention,
            changes: broadcast::channel(4096).0,
        })
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
        let (record, ticket) = self.write(event, None)?;
        let duplicate_of = match &record.state {
            EventState::Duplicate { of } => Some(*of),
            _ => None,
        };
        if duplicate_of.is_none() {
            permit.forget();
            self.pending
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.store.sync(ticket).await?;
        self.durable_arrival
            .send_if_modified(|d| std::mem::replace(d, (*d).max(record.arrival)) < record.arrival);
        let submitted = Submitted {
            id: record.event.id,
            arrival: record.arrival,
            duplicate_of,
        };
        let _ = self.changes.send(InboxChange(record));
        Ok(submitted)
    }

    /// Records an event that was refused at the channel: stored, terminal, visible.
    pub async fn reject(&self, event: Event, reason: String) -> Result<Submitted, StoreError> {
        let (record, ticket) = self.write(event, Some(EventState::Rejected { reason }))?;
        self.store.sync(ticket).await?;
        let submitted = Submitted {
            id: record.event.id,
            arrival: record.arrival,
            duplicate_of: None,
        };
        let _ = self.changes.send(InboxChange(record));
        Ok(submitted)
    }

    /// Assigns the arrival seq and writes the record, its index entries and its dedupe key
    /// in one transaction, under the arrival lock.
    fn write(
        &self,
        event: Event,
        state: Option<EventState>,
    ) -> Result<(EventRecord, u64), StoreError> {
        let now = Utc::now();
        // A poisoned lock only means another submit panicked; the counter itself is intact.
        let mut next = self.next_arrival.lock().unwrap_or_else(|p| p.into_inner());
        let arrival = *next;
        let state = match state {
            Some(state) => state,
            None => match self.live_duplicate(&event, now)? {
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
            (Some(key), EventState::Pending) => Some((
                key.as_bytes().to_vec(),
                encode(&DedupeEntry {
                    id: record.event.id,
                    at_ms: now.timestamp_millis(),
                })?,
            )),
            _ => None,
        };
        let is_pending = record.state == EventState::Pending;
        let id = record.event.id.to_bytes();
        let s = &self.store;
        (&s.events, &s.event_index, &s.pending, &s.dedupe).transaction(
            |(events, index, pending, dedupe_tree)| {
                events.insert(&seq_key(arrival), bytes.as_slice())?;
                index.insert(&id, &seq_key(arrival))?;
                if is_pending {
                    pending.insert(&seq_key(arrival), &[])?;
                }
                if let Some((key, entry)) = &dedupe {
                    dedupe_tree.insert(key.as_slice(), entry.as_slice())?;
                }
                Ok::<_, ConflictableTransactionError<StoreError>>(())
            },
        )?;
        *next += 1;
        let ticket = self.store.note_write();
        Ok((record, ticket))
    }

    fn live_duplicate(
        &self,
        event: &Event,
        now: DateTime<Utc>,
    ) -> Result<Option<EventId>, StoreError> {
        let Some(key) = &event.dedupe_key else {
            return Ok(None);
        };
        let Some(bytes) = self.store.dedupe.get(key.as_bytes())? else {
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
            .pending
            .range(seq_key(after + 1)..=seq_key(durable))
        {
            let (key, _) = entry?;
            let arrival = seq_from_key("pending", &key)?;
            match self.record_at(arrival) {
                Ok(Some(record)) => records.push(record),
                Ok(None) | Err(StoreError::Corrupt { .. }) => {
                    // sled checksums its log, so this means a bug or tampering; keep the
                    // dispatcher going and say so loudly rather than wedge on one record.
                    error!(
                        arrival,
                        "pending event record is missing or unreadable; dropping it from the pending index"
                    );
                    self.store.pending.remove(key)?;
                }
                Err(e) => return Err(e),
            }
            if records.len() >= limit {
                break;
            }
        }
        Ok(records)
    }

    pub fn record_at(&self, arrival: u64) -> Result<Option<EventRecord>, StoreError> {
        match self.store.events.get(seq_key(arrival))? {
            Some(bytes) => decode("events", &bytes).map(Some),
            None => Ok(None),
        }
    }

    pub fn get(&self, id: EventId) -> Result<Option<EventRecord>, StoreError> {
        match self.store.event_index.get(id.to_bytes())? {
            Some(key) => self.record_at(seq_from_key("event_index", &key)?),
            None => Ok(None),
        }
    }

    /// The most recent `limit` records (all when `None`) in `state` if given, oldest first.
    pub fn list(
        &self,
        limit: Option<usize>,
        state: Option<&str>,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let mut records = Vec::new();
        for entry in self.store.events.iter().rev() {
            let (_, bytes) = entry?;
            let record: EventRecord = decode("events", &bytes)?;
            if state.is_none_or(|s| record.state.name() == s) {
                records.push(record);
                if limit.is_some_and(|l| records.len() >= l) {
                    break;
                }
            }
        }
        records.reverse();
        Ok(records)
    }

    /// Called after records left the pending state (in a transaction that also removed them
    /// from the pending index): frees their room and tells followers.
    pub(crate) fn settled(&self, records: Vec<EventRecord>) {
        let n = records.len();
        self.pending
            .fetch_sub(n as u64, std::sync::atomic::Ordering::SeqCst);
        let repaid = {
            let mut debt = self.debt.lock().unwrap_or_else(|p| p.into_inner());
            let repaid = (*debt).min(n);
            *debt -= repaid;
            repaid
        };
        self.room.add_permits(n - repaid);
        for record in records {
            let _ = self.changes.send(InboxChange(record));
        }
    }

    /// Moves one pending event to a terminal state outside any trajectory (e.g. `dead`).
    pub fn finish(&self, mut record: EventRecord, state: EventState) -> Result<(), StoreError> {
        record.state = state;
        record.updated_at = Utc::now();
        let bytes = encode(&record)?;
        let key = seq_key(record.arrival);
        (&self.store.events, &self.store.pending).transaction(|(events, pending)| {
            events.insert(&key, bytes.as_slice())?;
            pending.remove(&key)?;
            Ok::<_, ConflictableTransactionError<StoreError>>(())
        })?;
        self.store.note_write();
        self.settled(vec![record]);
        Ok(())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<InboxChange> {
        self.changes.subscribe()
    }

    /// Wakes when more events became durable.
    pub fn durable_arrivals(&self) -> watch::Receiver<u64> {
        self.durable_arrival.subscribe()
    }

    pub fn pending_count(&self) -> u64 {
        self.pending.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every event ever accepted, in any state.
    pub fn events_total(&self) -> u64 {
        *self.next_arrival.lock().unwrap_or_else(|p| p.into_inner()) - 1
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }
}

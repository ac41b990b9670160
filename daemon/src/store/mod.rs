//! Durable state in one sled database under the data dir: the inbox (events, their states,
//! dedupe keys, what is still pending) and the trajectories (main and side lanes).
//!
//! Writes become durable through [`Store::sync`], a group commit: any number of writers may
//! wait on one `fsync`, but none is told "durable" before a flush that began after its write.

mod inbox;
mod trajectory;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Mutex, watch};

pub use inbox::{EventRecord, Inbox, InboxChange, Submitted};
pub use trajectory::{Trajectory, event_item};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record in `{tree}`: {reason}")]
    Corrupt { tree: &'static str, reason: String },
    #[error("cannot encode record: {0}")]
    Encode(#[from] serde_json::Error),
}

impl From<sled::transaction::TransactionError<StoreError>> for StoreError {
    fn from(e: sled::transaction::TransactionError<StoreError>) -> Self {
        match e {
            sled::transaction::TransactionError::Abort(inner) => inner,
            sled::transaction::TransactionError::Storage(inner) => StoreError::Sled(inner),
        }
    }
}

/// The sled database and its trees. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: sled::Db,
    /// arrival seq → `EventRecord`
    pub(crate) events: sled::Tree,
    /// event id → arrival seq
    pub(crate) event_index: sled::Tree,
    /// arrival seq → () for events not yet in a terminal state
    pub(crate) pending: sled::Tree,
    /// dedupe key → `DedupeEntry`
    pub(crate) dedupe: sled::Tree,
    /// seq → main trajectory item
    pub(crate) main_trajectory: sled::Tree,
    /// lane origin event id (16 bytes) ++ seq → lane trajectory item
    pub(crate) lane_trajectories: sled::Tree,
    commit: Arc<GroupCommit>,
}

#[derive(Debug)]
struct GroupCommit {
    /// Bumped after every write that must become durable.
    written: AtomicU64,
    /// The highest `written` value known to be on disk.
    durable: watch::Sender<u64>,
    /// Held by the one writer currently flushing for everybody.
    leader: Mutex<()>,
}

impl Store {
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .path(dir)
            // Small cache: the daemon is meant to live in a few MB. Recent items are what is
            // read; old ones can come from disk.
            .cache_capacity(4 * 1024 * 1024)
            // Durability comes from `sync`; the background flush only bounds what an
            // un-synced write (trajectory bookkeeping between steps) can lose.
            .flush_every_ms(Some(1000))
            .open()?;
        Ok(Self {
            events: db.open_tree("events")?,
            event_index: db.open_tree("event_index")?,
            pending: db.open_tree("pending")?,
            dedupe: db.open_tree("dedupe")?,
            main_trajectory: db.open_tree("trajectory")?,
            lane_trajectories: db.open_tree("lane_trajectories")?,
            db,
            commit: Arc::new(GroupCommit {
                written: AtomicU64::new(0),
                durable: watch::channel(0).0,
                leader: Mutex::new(()),
            }),
        })
    }

    /// Records that a write happened; pass the returned ticket to [`Store::sync`].
    pub(crate) fn note_write(&self) -> u64 {
        self.commit.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Returns once every write noted up to `ticket` is on disk.
    pub(crate) async fn sync(&self, ticket: u64) -> Result<(), StoreError> {
        loop {
            if *self.commit.durable.borrow() >= ticket {
                return Ok(());
            }
            let _leader = self.commit.leader.lock().await;
            if *self.commit.durable.borrow() >= ticket {
                return Ok(());
            }
            // Everything noted before this load is covered by the flush that follows.
            let covered = self.commit.written.load(Ordering::SeqCst);
            self.db.flush_async().await?;
            self.commit.durable.send_if_modified(|d| {
                let advanced = covered > *d;
                *d = (*d).max(covered);
                advanced
            });
        }
    }

    /// Makes everything written so far durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let ticket = self.note_write();
        self.sync(ticket).await
    }
}

pub(crate) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub(crate) fn seq_from_key(tree: &'static str, key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| StoreError::Corrupt {
        tree,
        reason: format!("key of {} bytes, expected 8", key.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    Ok(serde_json::to_vec(value)?)
}

pub(crate) fn decode<T: DeserializeOwned>(
    tree: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        tree,
        reason: e.to_string(),
    })
}

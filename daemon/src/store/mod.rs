//! Durable state in one sled database under the data dir: the inbox (events, their states,
//! dedupe keys, what is still pending) and the trajectories (main and side lanes).
//!
//! Writes become durable through `Store::sync`, a group commit: any number of writers may
//! wait on one `fsync`, but none is told "durable" before a flush that began after its write.

mod inbox;
pub mod schema;
mod trajectory;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

pub use inbox::{EventRecord, Inbox, InboxChange, Submitted};
pub(crate) use trajectory::EVENTS_PER_WRITE;
pub use trajectory::{Trajectory, UnfinishedStep, event_item, purge as purge_trajectories};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record in `{tree}`: {reason}")]
    Corrupt { tree: &'static str, reason: String },
    #[error("cannot encode record: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    DiskFull(#[from] crate::disk::DiskFull),
}

/// The sled database. Everything lives in one tree, `log`, under key prefixes (see
/// `keys`), because sled applies a batch atomically only within one tree, and merging an
/// event (its trajectory item plus its new state) must be atomic.
///
/// Batches are used only where atomicity needs them (a merge, once per step), never per
/// event: sled writes and syncs its IO buffer twice for every batch, which measured at ~10k
/// events/s when each submit was a batch. A submit is a single insert. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: sled::Db,
    pub(crate) log: sled::Tree,
    commit: Arc<GroupCommit>,
    /// Fired when sled reports an I/O error: sled takes no writes after one, so the daemon
    /// stops (non-zero exit) for its service manager to restart it, whichever task met it.
    fault: tokio_util::sync::CancellationToken,
}

/// Key layout of the `log` tree. Numbers are big-endian so keys sort numerically.
pub(crate) mod keys {
    use steward_events::EventId;

    /// `e` + arrival → `EventRecord`
    pub const EVENT: u8 = b'e';
    /// `d` + dedupe key → `DedupeEntry`
    pub const DEDUPE: u8 = b'd';
    /// `t` + seq → main trajectory item
    const MAIN: u8 = b't';
    /// `l` + origin event id + seq → lane trajectory item
    pub const LANE: u8 = b'l';
    /// Every arrival up to this one is in a terminal state (a lower bound: only ever behind).
    pub const SETTLED: &[u8] = b"m/settled";

    pub fn event(arrival: u64) -> [u8; 9] {
        let mut key = [EVENT; 9];
        key[1..].copy_from_slice(&arrival.to_be_bytes());
        key
    }

    pub fn dedupe(key: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(key.len() + 1);
        out.push(DEDUPE);
        out.extend_from_slice(key.as_bytes());
        out
    }

    pub fn main_prefix() -> Vec<u8> {
        vec![MAIN]
    }

    pub fn lane_prefix(origin: EventId) -> Vec<u8> {
        let mut prefix = vec![LANE];
        prefix.extend_from_slice(&origin.to_bytes());
        prefix
    }

    /// The number that ends a key of the form prefix + u64.
    pub fn trailing_u64(key: &[u8]) -> Option<u64> {
        let tail: [u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
        Some(u64::from_be_bytes(tail))
    }
}

#[derive(Debug)]
struct GroupCommit {
    /// Bumped after every write that must become durable.
    written: AtomicU64,
    /// The highest `written` value known to be on disk.
    durable: watch::Sender<u64>,
    /// Set while one writer flushes for everybody (see [`FlushLead`]).
    flushing: AtomicBool,
}

/// The lead of a group commit, held by the writer that flushes. Let go — after the flush,
/// after a failed one or when the writer's future is dropped — it clears the flag first and
/// then changes `durable` (advanced by what the flush covered, if it ended), so that every
/// waiter wakes to find the lead free.
struct FlushLead<'a> {
    commit: &'a GroupCommit,
    /// Set once the flush ended: every write noted up to here is on disk.
    covered: Option<u64>,
}

impl<'a> FlushLead<'a> {
    fn take(commit: &'a GroupCommit) -> Option<Self> {
        commit
            .flushing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| Self {
                commit,
                covered: None,
            })
    }
}

impl Drop for FlushLead<'_> {
    fn drop(&mut self) {
        self.commit.flushing.store(false, Ordering::SeqCst);
        let covered = self.covered;
        self.commit.durable.send_modify(|durable| {
            if let Some(covered) = covered {
                *durable = (*durable).max(covered);
            }
        });
    }
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
            log: db.open_tree("log")?,
            fault: tokio_util::sync::CancellationToken::new(),
            db,
            commit: Arc::new(GroupCommit {
                written: AtomicU64::new(0),
                durable: watch::channel(0).0,
                flushing: AtomicBool::new(false),
            }),
        })
    }

    /// Records that a write happened; pass the returned ticket to [`Store::sync`].
    pub(crate) fn note_write(&self) -> u64 {
        self.commit.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Returns once every write noted up to `ticket` is on disk.
    ///
    /// One writer at a time flushes (the leader); the others wait for its flush to end and
    /// are all woken by it together, each going on at once when the flush covered its write
    /// and one of them taking the lead when it did not. They used to queue on a lock held
    /// by the leader, which, handed from one waiter to the next, woke them one after another.
    pub(crate) async fn sync(&self, ticket: u64) -> Result<(), StoreError> {
        let mut durable = self.commit.durable.subscribe();
        loop {
            if *durable.borrow_and_update() >= ticket {
                return Ok(());
            }
            let Some(mut lead) = FlushLead::take(&self.commit) else {
                // The leader's flush ends with a change of `durable` (see `FlushLead`), after
                // it let go of the lead; this writer saw `durable` before it tried to take
                // the lead, so it cannot miss that change.
                // An error means the sender is gone, which cannot happen while `self` lives.
                durable.changed().await.map_err(|_| StoreError::Corrupt {
                    tree: "store",
                    reason: "the store's group commit is gone".into(),
                })?;
                continue;
            };
            if *self.commit.durable.borrow() >= ticket {
                // A flush ended between the check above and taking the lead.
                return Ok(());
            }
            // Everything noted before this load is covered by the flush that follows.
            let covered = self.commit.written.load(Ordering::SeqCst);
            self.db.flush_async().await?;
            lead.covered = Some(covered);
        }
    }

    /// The tree of the tool layer's idempotency ledger.
    pub fn ledger_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("ledger")?)
    }

    /// The tree of file watches made at run time.
    pub fn watch_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("watches")?)
    }

    /// The tree of scheduled jobs made at run time (the timer channel).
    pub fn cron_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("cron_jobs")?)
    }

    /// The tree of the config file's jobs' progress (the timer channel).
    pub fn cron_config_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("cron_config")?)
    }

    /// The tree of the memory tools' notes.
    pub fn memory_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("memory")?)
    }

    /// The tree of each trajectory's task list (`todo_write`).
    pub fn todo_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("todos")?)
    }

    /// Fired once sled has failed an I/O operation (see the field).
    pub fn fault(&self) -> &tokio_util::sync::CancellationToken {
        &self.fault
    }

    /// Passes `result` on, firing [`Store::fault`] when it is an I/O error of sled's.
    pub(crate) fn watch_fault<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::Sled(sled::Error::Io(e))) = &result
            && !self.fault.is_cancelled()
        {
            tracing::error!(error = %e, "the store failed an I/O operation; stopping");
            self.fault.cancel();
        }
        result
    }

    /// The tree of `tool_search` requests learnt per tool (usage learning).
    pub fn tool_usage_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("tool_usage")?)
    }

    /// The tree of requests for the owner's confirmation.
    pub fn pending_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("pending_actions")?)
    }

    /// The tree of the email channel's watermarks and outbox.
    pub fn email_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("email")?)
    }

    /// The tree of the Matrix channel's sync position, deliveries and rooms.
    pub fn matrix_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("matrix")?)
    }

    /// The tree of the Telegram channel's offset, deliveries, sends and paired owners.
    pub fn telegram_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("telegram")?)
    }

    /// The tree of the web page's login links and sessions.
    pub fn web_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("web")?)
    }

    /// The tree of model calls' usage (`steward usage`).
    pub fn usage_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("usage")?)
    }

    /// The tree of the owner outbox.
    pub fn outbox_tree(&self) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree("outbox")?)
    }

    /// Makes everything written so far durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let ticket = self.note_write();
        self.sync(ticket).await
    }
}

/// The key under which a secret (a login link, a pairing code) is kept: `kind:` and the
/// secret's SHA-256, so that a copy of the database gives none of them away.
pub(crate) fn secret_key(kind: &str, secret: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(secret.as_bytes());
    format!("{kind}:{}", steward_events::to_hex(&digest))
}

/// A buffer this large or larger is not kept for the next record (see [`encode`]).
const KEPT_ENCODE_BUFFER: usize = 64 * 1024;

/// Writes to one tree, applied in batches of [`Self::PER_BATCH`]. One write per record made
/// 10,000 config jobs slow to start; one batch for all made sled keep every intermediate
/// version of its nodes until the batch ended (60 MB at 10,000 records; 32 to 1,024 per
/// batch measured alike). Each batch is applied whole and in order, so a write made last
/// lands with or after every other; a crash part-way leaves the batches applied so far.
pub(crate) struct BatchedWrites<'a> {
    tree: &'a sled::Tree,
    batch: sled::Batch,
    pending: usize,
}

impl<'a> BatchedWrites<'a> {
    const PER_BATCH: usize = 256;

    pub(crate) fn new(tree: &'a sled::Tree) -> Self {
        Self {
            tree,
            batch: sled::Batch::default(),
            pending: 0,
        }
    }

    pub(crate) fn insert(&mut self, key: &[u8], value: sled::IVec) -> Result<(), StoreError> {
        self.batch.insert(key, value);
        self.count()
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Result<(), StoreError> {
        self.batch.remove(key);
        self.count()
    }

    fn count(&mut self) -> Result<(), StoreError> {
        self.pending += 1;
        if self.pending == Self::PER_BATCH {
            self.tree.apply_batch(std::mem::take(&mut self.batch))?;
            self.pending = 0;
        }
        Ok(())
    }

    /// Applies what is left.
    pub(crate) fn finish(self) -> Result<(), StoreError> {
        Ok(self.tree.apply_batch(self.batch)?)
    }
}

thread_local! {
    /// Each thread's buffer for [`encode`].
    static ENCODE_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A value's stored form, as sled keeps it. The JSON is written into a buffer each thread
/// keeps and then copied once into sled's shared bytes, which sled would have copied a fresh
/// vector into anyway: an event record of a kilobyte or two otherwise grows its vector four
/// or five times on the way (a share of the allocator's time on the webhook path, see
/// BENCHMARKS.md). A buffer grown past [`KEPT_ENCODE_BUFFER`] by an unusually large record
/// is given back rather than kept for the life of the thread.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<sled::IVec, StoreError> {
    ENCODE_BUFFER.with(|cell| {
        // Serializing never encodes another value, so the buffer is free; if that ever
        // changed, the nested call would use a vector of its own rather than panic.
        let Ok(mut buffer) = cell.try_borrow_mut() else {
            return Ok(sled::IVec::from(serde_json::to_vec(value)?));
        };
        buffer.clear();
        let written = serde_json::to_writer(&mut *buffer, value);
        let bytes = written.map(|()| sled::IVec::from(buffer.as_slice()));
        if buffer.capacity() >= KEPT_ENCODE_BUFFER {
            *buffer = Vec::new();
        }
        Ok(bytes?)
    })
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

#[cfg(test)]
mod tests;

//! The owner outbox (DESIGN.md §7): everything meant for the owner, kept durably with an id
//! that only grows, and where it has been delivered.
//!
//! Decided here:
//! - A message is stored (and flushed) before anyone is told it exists, so a `kill -9`
//!   between queueing and delivery loses nothing: the next session replays it.
//! - Delivery is recorded per channel (`socket`, `http`, `email`, later `matrix`, …): a
//!   channel marks a message once it handed it to the owner. A session that connects is
//!   given what no channel delivered yet (then what arrives live); a client that resumes
//!   names the last id it saw and is given everything after it.
//! - Answers to the owner's own interactive requests are kept too, already delivered to the
//!   channel that asked (the asking session shows them as its reply), so they are never
//!   shown twice.
//! - Ids come from a counter stored with the messages (the highest id + 1 at open), so they
//!   grow across restarts; retention (`owner.outbox_retention_days`) never removes the
//!   newest message, so the counter survives it.
//! - Which channel pushes which messages is the owner's `[owner.deliver]`
//!   ([`Outbox::routes`]); every message is kept whatever the routing, for `steward outbox`.
//! - `changes` tells viewers (`steward outbox --follow`) of every new message and every
//!   new delivery, each as the whole message as it now stands.
//! - Both broadcasts carry a shared message, not a copy: a channel writes every one of its
//!   slots when it is made, and a slot of a pointer is 32 bytes against ~150 for a whole
//!   message (two channels of 1,024 slots held from the start: 64 KB instead of 300).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;
use steward_events::{DeliveryRules, EventId};
pub use steward_protocol::{MessageKind, OwnerMessage};
use tokio::sync::broadcast;

use crate::store::{Store, StoreError};

/// A message to queue (the outbox gives it its id and time).
#[derive(Clone, Debug, Default)]
pub struct NewMessage {
    pub text: String,
    pub origin: Option<EventId>,
    pub pending_id: Option<String>,
    /// Already delivered there (the session that asked shows its own answer).
    pub delivered_to: Option<&'static str>,
}

/// The outbox. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    tree: sled::Tree,
    next: AtomicU64,
    rules: DeliveryRules,
    queued: broadcast::Sender<Arc<OwnerMessage>>,
    changes: broadcast::Sender<Arc<OwnerMessage>>,
}

impl Outbox {
    pub fn open(store: &Store, rules: DeliveryRules) -> Result<Self, StoreError> {
        let tree = store.outbox_tree()?;
        let last = match tree.last()? {
            Some((key, _)) => id_of(&key),
            None => 0,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store: store.clone(),
                tree,
                next: AtomicU64::new(last + 1),
                rules,
                queued: broadcast::channel(1024).0,
                changes: broadcast::channel(1024).0,
            }),
        })
    }

    /// Stores a message durably, then tells whoever listens; returns it with its id.
    pub async fn queue(
        &self,
        kind: MessageKind,
        message: NewMessage,
    ) -> Result<OwnerMessage, StoreError> {
        let queued = self.write(kind, message, Utc::now())?;
        self.inner.store.flush().await?;
        self.tell(&queued);
        Ok(queued)
    }

    /// Stores several messages of one kind with a single flush, then tells whoever listens
    /// of each, in order. A turn that answers a batch of requests (a burst of owner messages
    /// merged into one step) costs one `fsync` rather than one per answer: with one flush
    /// per answer, `--bench foundation`'s durable ingest (50,000 owner messages, no model)
    /// had fallen to ~2,000 events/s, the step's flushes one after another.
    pub async fn queue_all(
        &self,
        kind: MessageKind,
        messages: Vec<NewMessage>,
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let now = Utc::now();
        let queued = messages
            .into_iter()
            .map(|message| self.write(kind, message, now))
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.store.flush().await?;
        queued.iter().for_each(|message| self.tell(message));
        Ok(())
    }

    /// Gives `message` its id and writes it (not yet flushed).
    fn write(
        &self,
        kind: MessageKind,
        message: NewMessage,
        now: chrono::DateTime<Utc>,
    ) -> Result<OwnerMessage, StoreError> {
        let message = OwnerMessage {
            id: self.inner.next.fetch_add(1, Ordering::SeqCst),
            at: now,
            kind,
            text: message.text,
            origin: message.origin,
            pending_id: message.pending_id,
            delivered: message
                .delivered_to
                .map(|channel| BTreeMap::from([(channel.to_owned(), now)]))
                .unwrap_or_default(),
        };
        self.inner
            .tree
            .insert(message.id.to_be_bytes(), crate::store::encode(&message)?)?;
        Ok(message)
    }

    /// Tells viewers and delivering channels of a message now on disk.
    fn tell(&self, message: &OwnerMessage) {
        let message = Arc::new(message.clone());
        let _ = self.inner.changes.send(message.clone());
        let _ = self.inner.queued.send(message);
    }

    /// Whether `channel` pushes this message to the owner (`[owner.deliver]`).
    pub fn routes(&self, channel: &str, message: &OwnerMessage) -> bool {
        self.inner.rules.delivers(channel, message.kind.class())
    }

    /// Every new message and every new delivery, as the message now stands.
    pub fn changes(&self) -> broadcast::Receiver<Arc<OwnerMessage>> {
        self.inner.changes.subscribe()
    }

    /// Messages as they are queued (after [`Self::undelivered`] or [`Self::after`] for what
    /// came before: subscribe first, then read, and skip ids already seen).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<OwnerMessage>> {
        self.inner.queued.subscribe()
    }

    /// Every message after `id`, oldest first.
    pub fn after(&self, id: u64) -> Result<Vec<OwnerMessage>, StoreError> {
        self.inner
            .tree
            .range((id + 1).to_be_bytes()..)
            .values()
            .map(|bytes| crate::store::decode("outbox", &bytes?))
            .collect()
    }

    /// Message `id`, if it is still kept.
    pub fn get(&self, id: u64) -> Result<Option<OwnerMessage>, StoreError> {
        self.inner
            .tree
            .get(id.to_be_bytes())?
            .map(|bytes| crate::store::decode("outbox", &bytes))
            .transpose()
    }

    /// Messages no channel delivered yet that `channel` pushes, oldest first.
    pub fn undelivered(&self, channel: &str) -> Result<Vec<OwnerMessage>, StoreError> {
        Ok(self
            .after(0)?
            .into_iter()
            .filter(|m| !m.is_delivered() && self.routes(channel, m))
            .collect())
    }

    /// The newest `limit` messages (all when `None`), oldest first.
    pub fn list(&self, limit: Option<usize>) -> Result<Vec<OwnerMessage>, StoreError> {
        let mut newest: Vec<OwnerMessage> = self
            .inner
            .tree
            .iter()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .map(|item| crate::store::decode("outbox", &item?.1))
            .collect::<Result<_, _>>()?;
        newest.reverse();
        Ok(newest)
    }

    /// Records that `channel` delivered message `id` (the first delivery there counts).
    pub async fn delivered(&self, id: u64, channel: &str) -> Result<(), StoreError> {
        let key = id.to_be_bytes();
        let Some(bytes) = self.inner.tree.get(key)? else {
            return Ok(());
        };
        let mut message: OwnerMessage = crate::store::decode("outbox", &bytes)?;
        if message.delivered.contains_key(channel) {
            return Ok(());
        }
        message.delivered.insert(channel.to_owned(), Utc::now());
        self.inner
            .tree
            .insert(key, crate::store::encode(&message)?)?;
        self.inner.store.flush().await?;
        let _ = self.inner.changes.send(Arc::new(message));
        Ok(())
    }

    /// Removes messages queued before `cutoff`, oldest first, never the newest; how many.
    /// Reads only what it removes (ids grow with time).
    pub fn purge(&self, cutoff: chrono::DateTime<Utc>) -> Result<usize, StoreError> {
        let Some((newest, _)) = self.inner.tree.last()? else {
            return Ok(0);
        };
        let mut removed = 0;
        for entry in self.inner.tree.range(..newest) {
            let (key, bytes) = entry?;
            let message: OwnerMessage = crate::store::decode("outbox", &bytes)?;
            if message.at >= cutoff {
                break;
            }
            self.inner.tree.remove(key)?;
            removed += 1;
        }
        Ok(removed)
    }
}

fn id_of(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (slot, byte) in bytes.iter_mut().zip(key) {
        *slot = *byte;
    }
    u64::from_be_bytes(bytes)
}

impl steward_tools::OwnerChannel for Outbox {
    fn notify<'a>(
        &'a self,
        text: &'a str,
        origin: Option<EventId>,
    ) -> steward_tools::OwnerFuture<'a> {
        Box::pin(async move {
            let message = NewMessage {
                text: text.to_owned(),
                origin,
                ..NewMessage::default()
            };
            self.queue(MessageKind::Notice, message)
                .await
                .map(|queued| queued.id)
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ids_grow_across_a_reopen_and_delivery_is_recorded_per_channel() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let outbox = Outbox::open(&store, DeliveryRules::default()).unwrap();
        let note = |text: &str| NewMessage {
            text: text.into(),
            ..NewMessage::default()
        };
        let first = outbox
            .queue(MessageKind::Notice, note("one"))
            .await
            .unwrap();
        let second = outbox
            .queue(MessageKind::Answer, note("two"))
            .await
            .unwrap();
        assert!(second.id > first.id);
        assert_eq!(outbox.get(first.id).unwrap().unwrap().text, "one");
        assert!(outbox.get(second.id + 10).unwrap().is_none());
        outbox.delivered(first.id, "socket").await.unwrap();
        outbox.delivered(first.id, "socket").await.unwrap();
        let undelivered: Vec<u64> = outbox
            .undelivered("socket")
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(undelivered, vec![second.id]);
        drop(outbox);
        let reopened = Outbox::open(&store, DeliveryRules::default()).unwrap();
        let third = reopened
            .queue(MessageKind::Notice, note("three"))
            .await
            .unwrap();
        assert!(third.id > second.id, "{} after {}", third.id, second.id);
        let after: Vec<u64> = reopened
            .after(first.id)
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(after, vec![second.id, third.id]);
        let listed = reopened.list(Some(2)).unwrap();
        assert_eq!(
            listed.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["two", "three"]
        );
        assert!(listed[0].delivered.is_empty());
        assert!(
            reopened.after(0).unwrap()[0]
                .delivered
                .contains_key("socket")
        );
    }

    #[tokio::test]
    async fn retention_removes_old_messages_but_never_the_newest_so_ids_keep_growing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let outbox = Outbox::open(&store, DeliveryRules::default()).unwrap();
        for text in ["old", "older", "newest"] {
            let message = NewMessage {
                text: text.into(),
                ..NewMessage::default()
            };
            outbox.queue(MessageKind::Notice, message).await.unwrap();
        }
        let before_any = Utc::now() - chrono::Duration::hours(1);
        assert_eq!(outbox.purge(before_any).unwrap(), 0);
        let after_all = Utc::now() + chrono::Duration::hours(1);
        assert_eq!(outbox.purge(after_all).unwrap(), 2);
        let left = outbox.list(None).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].text, "newest");
        drop(outbox);
        let reopened = Outbox::open(&store, DeliveryRules::default()).unwrap();
        let next = reopened
            .queue(MessageKind::Notice, NewMessage::default())
            .await
            .unwrap();
        assert_eq!(next.id, left[0].id + 1);
    }

    #[tokio::test]
    async fn a_channel_replays_only_the_kinds_routed_to_it() {
        use steward_events::DeliveryClass;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let rules = DeliveryRules::new(BTreeMap::from([(
            "socket".to_owned(),
            std::collections::BTreeSet::from([DeliveryClass::Confirmations]),
        )]));
        let outbox = Outbox::open(&store, rules).unwrap();
        for kind in [
            MessageKind::Answer,
            MessageKind::Confirmation,
            MessageKind::Notice,
            MessageKind::Outcome,
        ] {
            outbox.queue(kind, NewMessage::default()).await.unwrap();
        }
        let kinds = |channel| -> Vec<MessageKind> {
            outbox
                .undelivered(channel)
                .unwrap()
                .iter()
                .map(|m| m.kind)
                .collect()
        };
        assert_eq!(
            kinds("socket"),
            [MessageKind::Confirmation, MessageKind::Outcome]
        );
        assert_eq!(kinds("http").len(), 4);
    }
}

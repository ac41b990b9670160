//! What the Matrix channel keeps in sled (tree `matrix`), beside the SDK's own stores:
//! the sync position it has taken everything up to, how far it delivered the owner outbox,
//! the owner's direct room, which outbox message each sent event carried (so a reaction or
//! a reply to a request for confirmation finds the action), events waiting for their
//! keys, and which changes of an owner's identity the owner was told of.
//!
//! The sync position is this channel's, not the SDK's: it is written only after every
//! event of the sync it ends is durable in the inbox, so a crash re-reads that sync.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

const SYNC: &str = "sync";
const DELIVERED: &str = "delivered";

/// An event that could not be decrypted yet: retried until its keys arrive or it is too old.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Undecrypted {
    pub event_id: String,
    pub room: String,
    /// Who sent it (absent in what a daemon before 2026-12-07 kept).
    #[serde(default)]
    pub sender: Option<String>,
    pub first_seen: DateTime<Utc>,
}

#[derive(Clone, Debug)]
pub struct ChannelState {
    store: Store,
    tree: sled::Tree,
}

impl ChannelState {
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self {
            store: store.clone(),
            tree: store.matrix_tree()?,
        })
    }

    fn text(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .tree
            .get(key)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// The position after the last sync whose events are all durable.
    pub fn sync_token(&self) -> Result<Option<String>, StoreError> {
        self.text(SYNC)
    }

    pub async fn set_sync_token(&self, token: &str) -> Result<(), StoreError> {
        self.tree.insert(SYNC, token.as_bytes())?;
        self.store.flush().await
    }

    /// Every outbox message up to this id was delivered or is not owed; `None` before the
    /// channel first ran.
    pub fn delivered_up_to(&self) -> Result<Option<u64>, StoreError> {
        Ok(self.tree.get(DELIVERED)?.map(|bytes| id_of(&bytes)))
    }

    pub async fn set_delivered_up_to(&self, id: u64) -> Result<(), StoreError> {
        self.tree.insert(DELIVERED, &id.to_be_bytes())?;
        self.store.flush().await
    }

    /// The direct room the assistant made with `user`.
    pub fn direct_room(&self, user: &str) -> Result<Option<String>, StoreError> {
        self.text(&format!("dm:{user}"))
    }

    pub async fn set_direct_room(&self, user: &str, room: &str) -> Result<(), StoreError> {
        self.tree.insert(format!("dm:{user}"), room.as_bytes())?;
        self.store.flush().await
    }

    /// Remembers that the Matrix event `event_id` carried outbox message `message` (made
    /// durable with the delivery that follows).
    pub fn note_sent(&self, event_id: &str, message: u64) -> Result<(), StoreError> {
        self.tree
            .insert(format!("sent:{event_id}"), &message.to_be_bytes())?;
        Ok(())
    }

    /// The outbox message a Matrix event of the assistant's carried.
    pub fn sent_message(&self, event_id: &str) -> Result<Option<u64>, StoreError> {
        Ok(self
            .tree
            .get(format!("sent:{event_id}"))?
            .map(|bytes| id_of(&bytes)))
    }

    /// Whether the owner was told that `user`'s identity changed to `master_key`.
    pub fn identity_change_told(&self, user: &str, master_key: &str) -> Result<bool, StoreError> {
        Ok(self
            .tree
            .contains_key(format!("identity-told:{user}:{master_key}"))?)
    }

    pub async fn note_identity_change_told(
        &self,
        user: &str,
        master_key: &str,
    ) -> Result<(), StoreError> {
        self.tree
            .insert(format!("identity-told:{user}:{master_key}"), &[])?;
        self.store.flush().await
    }

    pub fn note_undecrypted(&self, waiting: &Undecrypted) -> Result<(), StoreError> {
        self.tree.insert(
            format!("utd:{}", waiting.event_id),
            crate::store::encode(waiting)?,
        )?;
        Ok(())
    }

    pub fn undecrypted(&self) -> Result<Vec<Undecrypted>, StoreError> {
        self.tree
            .scan_prefix("utd:")
            .values()
            .map(|bytes| crate::store::decode("matrix", &bytes?))
            .collect()
    }

    pub fn forget_undecrypted(&self, event_id: &str) -> Result<(), StoreError> {
        self.tree.remove(format!("utd:{event_id}"))?;
        Ok(())
    }

    pub async fn flush(&self) -> Result<(), StoreError> {
        self.store.flush().await
    }
}

fn id_of(bytes: &[u8]) -> u64 {
    let mut id = [0u8; 8];
    for (slot, byte) in id.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    u64::from_be_bytes(id)
}

//! What the Telegram channel keeps in sled (tree `telegram`): the bot it last polled for,
//! the update offset it has taken everything before, how far it delivered the owner
//! outbox, every send (so that one whose answer was lost is never sent again), which outbox
//! message each sent Telegram message carried (so a button press or a reply finds its
//! request), and the owners paired with a one-time code.
//!
//! Decided here:
//! - A send is recorded `sending` (flushed) before the request goes out, and `sent` with
//!   its message ids once Telegram answered. A record found `sending` — the daemon died
//!   while the request was out — is `unknown`: it may have arrived, and Telegram has no key
//!   that would make a second try harmless, so it is never sent again.
//! - Pairing codes are kept as their SHA-256 only, with their expiry; a code works once.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError, decode, encode, secret_key};

const BOT: &str = "bot";
const OFFSET: &str = "offset";
const DELIVERED: &str = "delivered";
/// How long a pairing code works.
pub const PAIRING_VALID: Duration = Duration::minutes(10);

/// Where one outbox message stands in one chat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SendState {
    /// The request for part `part` is out (or was, when the daemon died).
    Sending {
        part: usize,
    },
    /// Part `part` could not go out (no connection): it is sent when delivery resumes.
    Retrying {
        part: usize,
    },
    Sent,
    /// It may or may not have arrived; never sent again.
    Unknown {
        why: String,
    },
    /// Telegram refused it (a chat the bot cannot write to): it did not arrive.
    Refused {
        why: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendRecord {
    pub message: u64,
    pub chat: i64,
    /// Telegram message ids of the parts sent so far.
    pub parts: Vec<i64>,
    pub state: SendState,
}

/// An owner who paired with a code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairedOwner {
    pub user_id: i64,
    #[serde(default)]
    pub username: Option<String>,
    pub paired_at: DateTime<Utc>,
}

/// The channel's state. Cheap to clone; clones share the running section's owners.
#[derive(Clone, Debug)]
pub struct TelegramState {
    store: Store,
    tree: sled::Tree,
    /// `telegram.owners` of the running channel; `None` while no `[telegram]` runs.
    configured: std::sync::Arc<std::sync::RwLock<Option<Vec<i64>>>>,
}

fn number(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    for (slot, byte) in out.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    out
}

fn code_key(code: &str) -> String {
    secret_key("pair", &code.trim().to_ascii_uppercase())
}

fn send_key(message: u64, chat: i64) -> String {
    format!("send:{message:020}:{chat}")
}

impl TelegramState {
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self {
            store: store.clone(),
            tree: store.telegram_tree()?,
            configured: std::sync::Arc::default(),
        })
    }

    /// The running section's owners (`None`: the channel was stopped for good).
    pub fn set_configured(&self, owners: Option<Vec<i64>>) {
        *self.configured.write().unwrap_or_else(|p| p.into_inner()) = owners;
    }

    /// `telegram.owners` of the running channel; `None` while no `[telegram]` runs.
    pub fn configured(&self) -> Option<Vec<i64>> {
        self.configured
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn i64_at(&self, key: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .tree
            .get(key)?
            .map(|bytes| i64::from_be_bytes(number(&bytes))))
    }

    pub async fn flush(&self) -> Result<(), StoreError> {
        self.store.flush().await
    }

    /// The bot the offset belongs to.
    pub fn bot(&self) -> Result<Option<i64>, StoreError> {
        self.i64_at(BOT)
    }

    /// Starts over for another bot: its updates are numbered apart from the old one's.
    pub async fn switch_bot(&self, bot: i64) -> Result<(), StoreError> {
        self.tree.remove(OFFSET)?;
        self.tree.insert(BOT, &bot.to_be_bytes())?;
        self.flush().await
    }

    /// The next update to ask for: everything before it is durable (or was skipped).
    pub fn offset(&self) -> Result<Option<i64>, StoreError> {
        self.i64_at(OFFSET)
    }

    pub async fn set_offset(&self, offset: i64) -> Result<(), StoreError> {
        self.tree.insert(OFFSET, &offset.to_be_bytes())?;
        self.flush().await
    }

    /// Every outbox message up to this id was handled; `None` before the channel first ran.
    pub fn delivered_up_to(&self) -> Result<Option<u64>, StoreError> {
        Ok(self
            .tree
            .get(DELIVERED)?
            .map(|bytes| u64::from_be_bytes(number(&bytes))))
    }

    pub async fn set_delivered_up_to(&self, id: u64) -> Result<(), StoreError> {
        self.tree.insert(DELIVERED, &id.to_be_bytes())?;
        self.flush().await
    }

    pub fn send(&self, message: u64, chat: i64) -> Result<Option<SendRecord>, StoreError> {
        self.tree
            .get(send_key(message, chat))?
            .map(|bytes| decode("telegram", &bytes))
            .transpose()
    }

    /// Records `record`, durably before the caller goes on (a request may follow).
    pub async fn put_send(&self, record: &SendRecord) -> Result<(), StoreError> {
        self.tree
            .insert(send_key(record.message, record.chat), encode(record)?)?;
        self.flush().await
    }

    /// Sends the daemon died in the middle of, now `unknown` (see the module docs).
    pub async fn settle_interrupted_sends(&self) -> Result<Vec<SendRecord>, StoreError> {
        let mut settled = Vec::new();
        for entry in self.tree.scan_prefix("send:").values() {
            let mut record: SendRecord = decode("telegram", &entry?)?;
            if let SendState::Sending { part } = record.state {
                record.state = SendState::Unknown {
                    why: format!("the daemon stopped while part {} was being sent", part + 1),
                };
                self.tree
                    .insert(send_key(record.message, record.chat), encode(&record)?)?;
                settled.push(record);
            }
        }
        self.flush().await?;
        Ok(settled)
    }

    /// Remembers that Telegram message `message_id` in `chat` carried outbox message `outbox`.
    pub fn note_sent(&self, chat: i64, message_id: i64, outbox: u64) -> Result<(), StoreError> {
        self.tree
            .insert(format!("msg:{chat}:{message_id}"), &outbox.to_be_bytes())?;
        Ok(())
    }

    /// The outbox message a Telegram message of the bot's carried.
    pub fn sent_message(&self, chat: i64, message_id: i64) -> Result<Option<u64>, StoreError> {
        Ok(self
            .tree
            .get(format!("msg:{chat}:{message_id}"))?
            .map(|bytes| u64::from_be_bytes(number(&bytes))))
    }

    /// A new pairing code, valid for [`PAIRING_VALID`] from `now`.
    pub async fn new_pairing_code(
        &self,
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>), StoreError> {
        // Codes that expired are of no use to anyone.
        for entry in self.tree.scan_prefix("pair:") {
            let (key, value) = entry?;
            let expires: DateTime<Utc> = decode("telegram", &value)?;
            if expires <= now {
                self.tree.remove(key)?;
            }
        }
        // 40 random bits in 8 characters people can read out (no 0/O, 1/I).
        const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let random = ulid::Ulid::generate().random();
        let code: String = (0..8)
            .map(|i| {
                let index = usize::try_from((random >> (i * 5)) & 31).unwrap_or(0);
                char::from(ALPHABET.get(index).copied().unwrap_or(b'A'))
            })
            .collect();
        let expires = now + PAIRING_VALID;
        self.tree.insert(code_key(&code), encode(&expires)?)?;
        self.flush().await?;
        Ok((code, expires))
    }

    /// Uses `code` for `user`: `true` when it was valid, and the user is now an owner.
    pub async fn redeem(
        &self,
        code: &str,
        now: DateTime<Utc>,
        user_id: i64,
        username: Option<String>,
    ) -> Result<bool, StoreError> {
        let key = code_key(code);
        let Some(value) = self.tree.remove(&key)? else {
            return Ok(false);
        };
        let expires: DateTime<Utc> = decode("telegram", &value)?;
        if expires <= now {
            self.flush().await?;
            return Ok(false);
        }
        let owner = PairedOwner {
            user_id,
            username,
            paired_at: now,
        };
        self.tree
            .insert(format!("owner:{user_id}"), encode(&owner)?)?;
        self.flush().await?;
        Ok(true)
    }

    pub fn paired_owners(&self) -> Result<Vec<PairedOwner>, StoreError> {
        self.tree
            .scan_prefix("owner:")
            .values()
            .map(|bytes| decode("telegram", &bytes?))
            .collect()
    }

    /// Removes a paired owner; `false` when there was none with that id.
    pub async fn remove_owner(&self, user_id: i64) -> Result<bool, StoreError> {
        let removed = self.tree.remove(format!("owner:{user_id}"))?.is_some();
        self.flush().await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> TelegramState {
        let dir = tempfile::tempdir().expect("a dir").keep();
        TelegramState::open(&Store::open(&dir.join("db")).expect("a store")).expect("the tree")
    }

    #[tokio::test]
    async fn a_pairing_code_works_once_and_only_in_time() {
        let state = state();
        let now = Utc::now();
        let (code, expires) = state.new_pairing_code(now).await.unwrap();
        assert_eq!(code.len(), 8);
        assert_eq!(expires, now + PAIRING_VALID);
        assert!(!state.redeem("WRONG123", now, 1, None).await.unwrap());
        assert!(
            state
                .redeem(&code.to_lowercase(), now, 7, Some("ann".into()))
                .await
                .unwrap()
        );
        assert!(
            !state.redeem(&code, now, 8, None).await.unwrap(),
            "used once"
        );
        let owners = state.paired_owners().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].user_id, 7);

        let (late, _) = state.new_pairing_code(now).await.unwrap();
        let after = now + PAIRING_VALID + Duration::seconds(1);
        assert!(
            !state.redeem(&late, after, 9, None).await.unwrap(),
            "expired"
        );
        assert!(state.remove_owner(7).await.unwrap());
        assert!(!state.remove_owner(7).await.unwrap());
        assert!(state.paired_owners().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_send_the_daemon_died_in_is_settled_unknown() {
        let state = state();
        let out = SendRecord {
            message: 3,
            chat: 42,
            parts: vec![],
            state: SendState::Sending { part: 0 },
        };
        state.put_send(&out).await.unwrap();
        state
            .put_send(&SendRecord {
                message: 2,
                state: SendState::Sent,
                parts: vec![11],
                ..out.clone()
            })
            .await
            .unwrap();
        let settled = state.settle_interrupted_sends().await.unwrap();
        assert_eq!(settled.len(), 1);
        assert!(matches!(
            state.send(3, 42).unwrap().unwrap().state,
            SendState::Unknown { .. }
        ));
        assert_eq!(state.send(2, 42).unwrap().unwrap().state, SendState::Sent);
        assert!(state.settle_interrupted_sends().await.unwrap().is_empty());
    }
}

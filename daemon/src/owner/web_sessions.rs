//! Who is logged in to the owner's web page: one-time login links and the sessions they
//! open, kept in sled (tree `web`) so that a restart logs nobody out.
//!
//! Decided here:
//! - `steward web login` (through the control socket, so only the owner can ask) makes a
//!   link token valid [`LINK_VALID`] and good once; opening it makes a session. Only the
//!   SHA-256 of a link token or a session id is stored: a copy of the database logs nobody in.
//! - A session carries its own CSRF token (every form posts it back) and ends after
//!   [`IDLE`] without use; its last use is written at most every [`TOUCH_EVERY`], so reading
//!   pages does not write to disk on every request.
//! - `steward web logout --all` ends every session at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError, decode, encode, secret_key};

/// How long a login link works.
pub const LINK_VALID: Duration = Duration::minutes(5);
/// A session unused this long is over.
pub const IDLE: Duration = Duration::days(30);
const TOUCH_EVERY: Duration = Duration::hours(1);

/// One logged-in browser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebSession {
    /// Posted back by every form of this session's pages.
    pub csrf: String,
    pub created: DateTime<Utc>,
    pub last_used: DateTime<Utc>,
}

/// The sessions. Cheap to clone; clones share whether the page is served.
#[derive(Clone, Debug)]
pub struct WebSessions {
    store: Store,
    tree: sled::Tree,
    served: Arc<AtomicBool>,
}

/// 160 random bits as hex.
fn random_token() -> String {
    let a = ulid::Ulid::generate().random();
    let b = ulid::Ulid::generate().random();
    format!("{a:020x}{b:020x}")
}

fn hashed(kind: &str, secret: &str) -> String {
    secret_key(kind, secret.trim())
}

impl WebSessions {
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self {
            store: store.clone(),
            tree: store.web_tree()?,
            served: Arc::default(),
        })
    }

    /// Whether the HTTP server serves the page now (`steward web login` needs it).
    pub fn served(&self) -> bool {
        self.served.load(Ordering::Relaxed)
    }

    pub fn set_served(&self, served: bool) {
        self.served.store(served, Ordering::Relaxed);
    }

    /// A new login link's token and when it stops working.
    pub async fn new_link(
        &self,
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>), StoreError> {
        for entry in self.tree.scan_prefix("link:") {
            let (key, value) = entry?;
            let expires: DateTime<Utc> = decode("web", &value)?;
            if expires <= now {
                self.tree.remove(key)?;
            }
        }
        let token = random_token();
        let expires = now + LINK_VALID;
        self.tree
            .insert(hashed("link", &token), encode(&expires)?)?;
        self.store.flush().await?;
        Ok((token, expires))
    }

    /// Uses a login link: a new session's id and the session, or `None` for a link that is
    /// unknown, used or expired.
    pub async fn redeem(
        &self,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, WebSession)>, StoreError> {
        let Some(value) = self.tree.remove(hashed("link", token))? else {
            return Ok(None);
        };
        let expires: DateTime<Utc> = decode("web", &value)?;
        if expires <= now {
            self.store.flush().await?;
            return Ok(None);
        }
        let id = random_token();
        let session = WebSession {
            csrf: random_token(),
            created: now,
            last_used: now,
        };
        self.tree
            .insert(hashed("session", &id), encode(&session)?)?;
        self.store.flush().await?;
        Ok(Some((id, session)))
    }

    /// The session `id` names, if it is live (and notes its use).
    pub fn check(&self, id: &str, now: DateTime<Utc>) -> Result<Option<WebSession>, StoreError> {
        let key = hashed("session", id);
        let Some(value) = self.tree.get(&key)? else {
            return Ok(None);
        };
        let mut session: WebSession = decode("web", &value)?;
        if now - session.last_used > IDLE {
            self.tree.remove(&key)?;
            return Ok(None);
        }
        if now - session.last_used > TOUCH_EVERY {
            session.last_used = now;
            self.tree.insert(&key, encode(&session)?)?;
        }
        Ok(Some(session))
    }

    /// Ends the session `id`.
    pub async fn end(&self, id: &str) -> Result<(), StoreError> {
        self.tree.remove(hashed("session", id))?;
        self.store.flush().await
    }

    /// Ends every session; how many there were.
    pub async fn end_all(&self) -> Result<usize, StoreError> {
        let mut ended = 0;
        for key in self.tree.scan_prefix("session:").keys() {
            self.tree.remove(key?)?;
            ended += 1;
        }
        self.store.flush().await?;
        Ok(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions() -> WebSessions {
        let dir = tempfile::tempdir().expect("a dir").keep();
        WebSessions::open(&Store::open(&dir.join("db")).expect("a store")).expect("the tree")
    }

    #[tokio::test]
    async fn a_link_logs_in_once_within_five_minutes_and_sessions_end_when_idle_or_revoked() {
        let web = sessions();
        let now = Utc::now();
        let (token, expires) = web.new_link(now).await.unwrap();
        assert_eq!(expires, now + LINK_VALID);
        assert!(web.redeem("0123", now).await.unwrap().is_none());
        let (id, session) = web.redeem(&token, now).await.unwrap().expect("a session");
        assert_ne!(session.csrf, id);
        assert!(
            web.redeem(&token, now).await.unwrap().is_none(),
            "used once"
        );
        assert_eq!(web.check(&id, now).unwrap(), Some(session.clone()));
        assert!(web.check("forged", now).unwrap().is_none());

        let (late, _) = web.new_link(now).await.unwrap();
        let after = now + LINK_VALID + Duration::seconds(1);
        assert!(web.redeem(&late, after).await.unwrap().is_none(), "expired");

        let day = now + Duration::days(1);
        assert!(web.check(&id, day).unwrap().is_some(), "used a day later");
        assert!(
            web.check(&id, day + IDLE + Duration::seconds(1))
                .unwrap()
                .is_none(),
            "idle for 30 days"
        );

        let (a, _) = web.new_link(now).await.unwrap();
        let (b, _) = web.new_link(now).await.unwrap();
        let (a, _) = web.redeem(&a, now).await.unwrap().unwrap();
        let (b, _) = web.redeem(&b, now).await.unwrap().unwrap();
        web.end(&a).await.unwrap();
        assert!(web.check(&a, now).unwrap().is_none());
        assert_eq!(web.end_all().await.unwrap(), 1);
        assert!(web.check(&b, now).unwrap().is_none());
    }
}

//! Two-phase confirmation (pipeline step 7): a call that policy says must be confirmed is
//! stored as a [`PendingAction`] — id, unguessable token, tool, arguments and their hash, a
//! human-readable preview, the origin, an expiry — and the caller gets a `pending` result
//! naming it. The owner approves (optionally with edited arguments, checked again) or
//! denies; an action nobody answered becomes `expired`, never "denied by the user".
//! Pending actions live in sled, so they survive restarts. State changes use
//! compare-and-swap: approving twice runs the action once.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use steward_events::{EventId, ToolCallRequest, ToolOutcome, TrajectoryId};

use crate::ledger::{args_hash, key_for};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingState {
    Pending,
    Approved,
    Denied,
    Expired,
    Completed,
    Failed,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingAction {
    pub id: String,
    /// The ledger key of the call: the same call for the same event reuses its request.
    pub key: String,
    /// 128 random bits; proves an answer came from someone who saw the request.
    pub token: String,
    pub tool: String,
    pub args: Value,
    pub args_hash: String,
    pub preview: String,
    /// Why confirmation is needed.
    pub reason: String,
    pub origin_event: Option<EventId>,
    pub trajectory: TrajectoryId,
    pub requested_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub state: PendingState,
    /// Why it was denied, or what went wrong.
    pub state_reason: Option<String>,
    pub result: Option<ToolOutcome>,
}

#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    #[error("pending-action storage error: {0}")]
    Storage(#[from] sled::Error),
    #[error("pending action record is unreadable: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("no pending action {0}")]
    NotFound(String),
    #[error("{0} is the start of more than one pending action's id; give more of it")]
    Ambiguous(String),
}

#[derive(Clone, Debug)]
pub struct PendingStore {
    tree: sled::Tree,
}

fn token() -> String {
    let a = ulid::Ulid::generate().random();
    let b = ulid::Ulid::generate().random();
    // 80 + 48 random bits.
    format!("{a:020x}{:012x}", b & 0xffff_ffff_ffff)
}

/// A one-line description of what would happen, for the owner.
fn preview(tool: &str, args: &Value) -> String {
    let mut text = format!("{tool} {args}");
    if text.len() > 300 {
        let mut cut = 297;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// What [`PendingStore::expire_due`] did, and what it leaves to wait for.
#[derive(Debug)]
pub struct Expiry {
    /// The requests it marked `expired`.
    pub expired: Vec<PendingAction>,
    /// When the next request still pending expires; `None` when none is pending.
    pub next_due: Option<DateTime<Utc>>,
}

impl PendingStore {
    pub fn new(tree: sled::Tree) -> Self {
        Self { tree }
    }

    pub fn create(
        &self,
        call: &ToolCallRequest,
        reason: &str,
        trajectory: &TrajectoryId,
        expiry: std::time::Duration,
    ) -> Result<PendingAction, PendingError> {
        let key = key_for(call);
        if let Some(open) = self
            .list()?
            .into_iter()
            .find(|a| a.key == key && a.state == PendingState::Pending)
        {
            return Ok(open);
        }
        let now = Utc::now();
        let action = PendingAction {
            id: ulid::Ulid::generate().to_string(),
            key,
            token: token(),
            tool: call.tool.clone(),
            args: call.args.clone(),
            args_hash: args_hash(&call.args),
            preview: preview(&call.tool, &call.args),
            reason: reason.to_owned(),
            origin_event: call.origin,
            trajectory: trajectory.clone(),
            requested_at: now,
            expires_at: now + ChronoDuration::from_std(expiry).unwrap_or(ChronoDuration::hours(1)),
            state: PendingState::Pending,
            state_reason: None,
            result: None,
        };
        self.tree
            .insert(action.id.as_bytes(), serde_json::to_vec(&action)?)?;
        Ok(action)
    }

    /// The action a token was issued for (an answer by email carries the token, not the id).
    pub fn find_by_token(&self, token: &str) -> Result<Option<PendingAction>, PendingError> {
        Ok(self
            .list()?
            .into_iter()
            .find(|a| !token.is_empty() && a.token.eq_ignore_ascii_case(token)))
    }

    /// The full id `id` names: itself, or the one id it is a prefix of (six characters at
    /// least: what people are shown).
    pub fn resolve(&self, id: &str) -> Result<String, PendingError> {
        if self.tree.contains_key(id.as_bytes())? {
            return Ok(id.to_owned());
        }
        if id.chars().count() < 6 {
            return Err(PendingError::NotFound(id.to_owned()));
        }
        let mut matches = self.tree.scan_prefix(id.as_bytes()).keys();
        let first = match matches.next() {
            Some(key) => key?,
            None => return Err(PendingError::NotFound(id.to_owned())),
        };
        if matches.next().is_some() {
            return Err(PendingError::Ambiguous(id.to_owned()));
        }
        Ok(String::from_utf8_lossy(&first).into_owned())
    }

    pub fn get(&self, id: &str) -> Result<PendingAction, PendingError> {
        match self.tree.get(id.as_bytes())? {
            Some(bytes) => Ok(serde_json::from_slice(&bytes)?),
            None => Err(PendingError::NotFound(id.to_owned())),
        }
    }

    /// All actions, oldest first (ids are ULIDs).
    pub fn list(&self) -> Result<Vec<PendingAction>, PendingError> {
        self.tree
            .iter()
            .map(|item| Ok(serde_json::from_slice(&item?.1)?))
            .collect()
    }

    /// Moves `id` from `from` to the state `change` sets, atomically. `Ok(None)`: it was not
    /// in `from` (someone answered first); the current record is returned in the error arm.
    pub fn transition(
        &self,
        id: &str,
        from: PendingState,
        change: impl Fn(&mut PendingAction),
    ) -> Result<Result<PendingAction, PendingAction>, PendingError> {
        loop {
            let current_bytes = self
                .tree
                .get(id.as_bytes())?
                .ok_or_else(|| PendingError::NotFound(id.to_owned()))?;
            let current: PendingAction = serde_json::from_slice(&current_bytes)?;
            if current.state != from {
                return Ok(Err(current));
            }
            let mut next = current.clone();
            change(&mut next);
            let swapped = self.tree.compare_and_swap(
                id.as_bytes(),
                Some(current_bytes),
                Some(serde_json::to_vec(&next)?),
            )?;
            if swapped.is_ok() {
                return Ok(Ok(next));
            }
        }
    }

    /// Makes the recorded answers durable.
    pub async fn sync(&self) -> Result<(), PendingError> {
        self.tree.flush_async().await?;
        Ok(())
    }

    /// Marks every pending action past its expiry as `expired`; returns them, and when the
    /// next of those still pending expires (one pass over the requests for both).
    pub fn expire_due(&self, now: DateTime<Utc>) -> Result<Expiry, PendingError> {
        let mut expired = Vec::new();
        let mut next_due: Option<DateTime<Utc>> = None;
        for action in self.list()? {
            if action.state != PendingState::Pending {
                continue;
            }
            if action.expires_at > now {
                next_due = Some(next_due.map_or(action.expires_at, |d| d.min(action.expires_at)));
                continue;
            }
            let answered = self.transition(&action.id, PendingState::Pending, |a| {
                a.state = PendingState::Expired;
                a.state_reason = Some("nobody answered before it expired".into());
            })?;
            if let Ok(done) = answered {
                expired.push(done);
            }
        }
        Ok(Expiry { expired, next_due })
    }

    /// Removes answered actions (anything not `pending` or `approved`) requested longer ago
    /// than `retention`, so listing and the expiry scan stay bounded.
    pub fn purge(&self, retention: std::time::Duration) -> Result<usize, PendingError> {
        let cutoff =
            Utc::now() - ChronoDuration::from_std(retention).unwrap_or(ChronoDuration::days(7));
        let mut removed = 0;
        for action in self.list()? {
            let open = matches!(action.state, PendingState::Pending | PendingState::Approved);
            if !open && action.requested_at <= cutoff {
                self.tree.remove(action.id.as_bytes())?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// At start: an action approved but never finished (a crash while it ran) is `unknown`.
    pub fn recover(&self) -> Result<Vec<PendingAction>, PendingError> {
        let mut unknown = Vec::new();
        for action in self.list()? {
            if action.state == PendingState::Approved
                && let Ok(done) = self.transition(&action.id, PendingState::Approved, |a| {
                    a.state = PendingState::Unknown;
                    a.state_reason = Some("the daemon stopped while it ran; not retried".into());
                })?
            {
                unknown.push(done);
            }
        }
        Ok(unknown)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn store() -> (tempfile::TempDir, PendingStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        (dir, PendingStore::new(db.open_tree("pending").unwrap()))
    }

    fn call() -> ToolCallRequest {
        ToolCallRequest {
            call_id: "c".into(),
            tool: "http_request".into(),
            args: json!({"method": "POST", "url": "https://example.com"}),
            origin: Some(EventId::generate()),
        }
    }

    #[test]
    fn an_action_is_answered_once() {
        let (_dir, store) = store();
        let action = store
            .create(
                &call(),
                "not idempotent",
                &TrajectoryId::main(),
                std::time::Duration::from_secs(3600),
            )
            .unwrap();
        assert_eq!(action.token.len(), 32);
        assert!(action.preview.starts_with("http_request {"));
        let approved = store
            .transition(&action.id, PendingState::Pending, |a| {
                a.state = PendingState::Approved
            })
            .unwrap();
        assert!(approved.is_ok());
        let again = store
            .transition(&action.id, PendingState::Pending, |a| {
                a.state = PendingState::Denied
            })
            .unwrap();
        assert_eq!(
            again.unwrap_err().state,
            PendingState::Approved,
            "the first answer stands"
        );
        assert_eq!(
            store.recover().unwrap().len(),
            1,
            "approved but never finished: unknown"
        );
        assert_eq!(store.get(&action.id).unwrap().state, PendingState::Unknown);
    }

    #[test]
    fn unanswered_actions_expire_as_expired() {
        let (_dir, store) = store();
        let action = store
            .create(
                &call(),
                "r",
                &TrajectoryId::main(),
                std::time::Duration::ZERO,
            )
            .unwrap();
        let same = store
            .create(
                &call(),
                "r",
                &TrajectoryId::main(),
                std::time::Duration::from_secs(3600),
            )
            .unwrap();
        assert_ne!(same.id, action.id, "a different event: a different request");
        let later = store
            .create(
                &call(),
                "r",
                &TrajectoryId::main(),
                std::time::Duration::from_secs(3600),
            )
            .unwrap();
        let before = store
            .expire_due(action.expires_at - chrono::Duration::seconds(1))
            .unwrap();
        assert!(before.expired.is_empty());
        assert_eq!(before.next_due, Some(action.expires_at));
        let Expiry { expired, next_due } = store.expire_due(Utc::now()).unwrap();
        assert_eq!(
            next_due,
            Some(same.expires_at.min(later.expires_at)),
            "the expired one is no longer waited for"
        );
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].id, action.id);
        assert_eq!(store.get(&action.id).unwrap().state, PendingState::Expired);
        assert_eq!(store.get(&later.id).unwrap().state, PendingState::Pending);
        assert_eq!(
            store.purge(std::time::Duration::ZERO).unwrap(),
            1,
            "only the answered one goes"
        );
        assert_eq!(store.list().unwrap().len(), 2);
        for open in [&same, &later] {
            let denied = store
                .transition(&open.id, PendingState::Pending, |a| {
                    a.state = PendingState::Denied
                })
                .unwrap();
            assert!(denied.is_ok());
        }
        assert_eq!(
            store.expire_due(Utc::now()).unwrap().next_due,
            None,
            "nothing pending"
        );
    }
}

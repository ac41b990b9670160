//! The idempotency ledger (pipeline step 6): every call that changes something is recorded
//! under a key before it runs, so that it never runs twice by accident.
//!
//! - Key: `hash(tool, canonical arguments, origin event)` — the same call made again for the
//!   same event (a step re-run after a restart, a retried model turn) finds its record.
//! - States: `prepared → confirmed → in_progress(deadline) → completed | failed | unknown`.
//!   (`prepared`/`confirmed` are the two phases of confirmation; a call that needs none
//!   starts at `in_progress`.)
//! - A completed key returns the stored result and does not run again. The same key with
//!   other arguments is refused, naming the mismatch. An in-progress key is never run a
//!   second time. A failed call may be retried.
//! - After a crash, a non-idempotent call found `in_progress` becomes `unknown` and is
//!   reported, never blindly retried; an idempotent one is cleared so it may run again.
//! - Records older than the retention (default 7 days) are purged.
//!
//! Transitions use compare-and-swap on the record, so two callers racing for one key cannot
//! both win.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use steward_events::{ToolCallRequest, ToolOutcome, ToolStatus, to_hex};

pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 86_400);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ActionState {
    Prepared,
    Confirmed,
    InProgress { deadline_ms: i64 },
    Completed { result: ToolOutcome },
    Failed { error: String },
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub key: String,
    pub tool: String,
    pub args_hash: String,
    pub idempotent: bool,
    #[serde(flatten)]
    pub state: ActionState,
    pub updated_at_ms: i64,
}

/// What the pipeline should do with a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Begin {
    /// Run it; the record is now `in_progress`.
    Run,
    /// Already done: return this stored result.
    Replay(ToolOutcome),
    /// Must not run: the reason, for the caller.
    Refuse(String),
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger storage error: {0}")]
    Storage(#[from] sled::Error),
    #[error("ledger record is unreadable: {0}")]
    Corrupt(#[from] serde_json::Error),
}

#[derive(Clone, Debug)]
pub struct Ledger {
    tree: sled::Tree,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Hash of the arguments in canonical form (object keys sorted: serde_json maps are ordered).
pub fn args_hash(args: &serde_json::Value) -> String {
    to_hex(&Sha256::digest(args.to_string().as_bytes())[..16])
}

/// The ledger key of a call: tool, canonical arguments and origin event.
pub fn key_for(call: &ToolCallRequest) -> String {
    let mut hasher = Sha256::new();
    hasher.update(call.tool.as_bytes());
    hasher.update([0]);
    hasher.update(call.args.to_string().as_bytes());
    hasher.update([0]);
    if let Some(origin) = call.origin {
        hasher.update(origin.to_string().as_bytes());
    }
    to_hex(&hasher.finalize()[..16])
}

impl Ledger {
    pub fn new(tree: sled::Tree) -> Self {
        Self { tree }
    }

    pub fn get(&self, key: &str) -> Result<Option<LedgerEntry>, LedgerError> {
        match self.tree.get(key.as_bytes())? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Claims `key` for a run, or says why not (see the module docs).
    pub fn begin(
        &self,
        key: &str,
        tool: &str,
        args_hash: &str,
        idempotent: bool,
        deadline: Duration,
    ) -> Result<Begin, LedgerError> {
        loop {
            let current = self.tree.get(key.as_bytes())?;
            let entry: Option<LedgerEntry> = match &current {
                Some(bytes) => Some(serde_json::from_slice(bytes)?),
                None => None,
            };
            if let Some(entry) = &entry {
                if entry.args_hash != args_hash || entry.tool != tool {
                    return Ok(Begin::Refuse(format!(
                        "idempotency key {key} was used for `{}` with other arguments; refusing to reuse it",
                        entry.tool
                    )));
                }
                match &entry.state {
                    ActionState::Completed { result } => return Ok(Begin::Replay(result.clone())),
                    ActionState::InProgress { .. } => {
                        return Ok(Begin::Refuse(format!(
                            "`{tool}` with these arguments is already in progress; it is never run twice"
                        )));
                    }
                    ActionState::Unknown => {
                        return Ok(Begin::Refuse(format!(
                            "an earlier `{tool}` call with these arguments was interrupted and its outcome is unknown; it is not retried automatically"
                        )));
                    }
                    ActionState::Prepared | ActionState::Confirmed | ActionState::Failed { .. } => {
                    }
                }
            }
            let next = LedgerEntry {
                key: key.to_owned(),
                tool: tool.to_owned(),
                args_hash: args_hash.to_owned(),
                idempotent,
                state: ActionState::InProgress {
                    deadline_ms: now_ms() + deadline.as_millis() as i64,
                },
                updated_at_ms: now_ms(),
            };
            let swapped = self.tree.compare_and_swap(
                key.as_bytes(),
                current,
                Some(serde_json::to_vec(&next)?),
            )?;
            if swapped.is_ok() {
                return Ok(Begin::Run);
            }
            // Someone else changed the record in between: look again.
        }
    }

    /// Makes the ledger durable: a non-idempotent call's `in_progress` record must be on
    /// disk before the call may leave the machine, or a crash could let it run twice.
    pub async fn sync(&self) -> Result<(), LedgerError> {
        self.tree.flush_async().await?;
        Ok(())
    }

    /// Records how the run ended.
    pub fn finish(&self, key: &str, outcome: &ToolOutcome) -> Result<(), LedgerError> {
        let Some(mut entry) = self.get(key)? else {
            return Ok(());
        };
        entry.state = match outcome.status {
            ToolStatus::Ok => ActionState::Completed {
                result: outcome.clone(),
            },
            ToolStatus::Error
            | ToolStatus::Cancelled
            | ToolStatus::Pending
            | ToolStatus::Denied
            | ToolStatus::Blocked => ActionState::Failed {
                error: outcome.content_text(),
            },
        };
        entry.updated_at_ms = now_ms();
        self.tree
            .insert(key.as_bytes(), serde_json::to_vec(&entry)?)?;
        Ok(())
    }

    /// At start: settles records a crash left `in_progress`. Returns the entries that became
    /// `unknown` (non-idempotent), for the owner to be told; idempotent ones are cleared.
    pub fn recover(&self) -> Result<Vec<LedgerEntry>, LedgerError> {
        let mut unknown = Vec::new();
        for item in self.tree.iter() {
            let (key, bytes) = item?;
            let mut entry: LedgerEntry = serde_json::from_slice(&bytes)?;
            if !matches!(entry.state, ActionState::InProgress { .. }) {
                continue;
            }
            if entry.idempotent {
                self.tree.remove(&key)?;
            } else {
                entry.state = ActionState::Unknown;
                entry.updated_at_ms = now_ms();
                self.tree.insert(&key, serde_json::to_vec(&entry)?)?;
                unknown.push(entry);
            }
        }
        Ok(unknown)
    }

    /// The actions whose outcome a crash left unknown, for a channel that can look (an email
    /// channel searches its Sent mailbox).
    pub fn unknown(&self) -> Result<Vec<LedgerEntry>, LedgerError> {
        let mut unknown = Vec::new();
        for item in self.tree.iter() {
            let (_, bytes) = item?;
            let entry: LedgerEntry = serde_json::from_slice(&bytes)?;
            if entry.state == ActionState::Unknown {
                unknown.push(entry);
            }
        }
        Ok(unknown)
    }

    /// Settles an `unknown` action as completed with `result` once the world shows it
    /// happened (reconciliation). Only `unknown` records change; returns whether it did.
    pub fn settle_unknown(&self, key: &str, result: &ToolOutcome) -> Result<bool, LedgerError> {
        let Some(current) = self.tree.get(key.as_bytes())? else {
            return Ok(false);
        };
        let mut entry: LedgerEntry = serde_json::from_slice(&current)?;
        if entry.state != ActionState::Unknown {
            return Ok(false);
        }
        entry.state = ActionState::Completed {
            result: result.clone(),
        };
        entry.updated_at_ms = now_ms();
        let swapped = self.tree.compare_and_swap(
            key.as_bytes(),
            Some(current),
            Some(serde_json::to_vec(&entry)?),
        )?;
        Ok(swapped.is_ok())
    }

    /// How many recorded actions are in each state (a scan: the ledger holds only the
    /// retention window).
    pub fn state_counts(
        &self,
    ) -> Result<std::collections::BTreeMap<&'static str, u64>, LedgerError> {
        let mut counts = std::collections::BTreeMap::new();
        for item in self.tree.iter() {
            let (_, bytes) = item?;
            let entry: LedgerEntry = serde_json::from_slice(&bytes)?;
            let state = match entry.state {
                ActionState::Prepared => "prepared",
                ActionState::Confirmed => "confirmed",
                ActionState::InProgress { .. } => "in_progress",
                ActionState::Completed { .. } => "completed",
                ActionState::Failed { .. } => "failed",
                ActionState::Unknown => "unknown",
            };
            *counts.entry(state).or_default() += 1;
        }
        Ok(counts)
    }

    /// Removes settled records not touched for `retention`.
    pub fn purge(&self, retention: Duration) -> Result<usize, LedgerError> {
        let cutoff = now_ms() - retention.as_millis() as i64;
        let mut removed = 0;
        for item in self.tree.iter() {
            let (key, bytes) = item?;
            let entry: LedgerEntry = serde_json::from_slice(&bytes)?;
            let settled = !matches!(
                entry.state,
                ActionState::InProgress { .. } | ActionState::Prepared | ActionState::Confirmed
            );
            if settled && entry.updated_at_ms <= cutoff {
                self.tree.remove(&key)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use steward_events::EventId;

    use super::*;

    fn ledger() -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        (dir, Ledger::new(db.open_tree("ledger").unwrap()))
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn keys_depend_on_tool_arguments_and_origin_not_key_order() {
        let origin = EventId::generate();
        let call = |tool: &str, args: serde_json::Value, origin: Option<EventId>| ToolCallRequest {
            call_id: "c".into(),
            tool: tool.into(),
            args,
            origin,
        };
        let a = key_for(&call("t", json!({"x": 1, "y": 2}), Some(origin)));
        assert_eq!(
            a,
            key_for(&call("t", json!({"y": 2, "x": 1}), Some(origin))),
            "canonical"
        );
        assert_ne!(
            a,
            key_for(&call("u", json!({"x": 1, "y": 2}), Some(origin)))
        );
        assert_ne!(
            a,
            key_for(&call("t", json!({"x": 1, "y": 3}), Some(origin)))
        );
        assert_ne!(
            a,
            key_for(&call(
                "t",
                json!({"x": 1, "y": 2}),
                Some(EventId::generate())
            ))
        );
    }

    #[test]
    fn a_completed_call_replays_its_result_and_never_runs_twice() {
        let (_dir, ledger) = ledger();
        let h = args_hash(&json!({"to": "x"}));
        assert_eq!(
            ledger.begin("k", "send", &h, false, MINUTE).unwrap(),
            Begin::Run
        );
        assert!(
            matches!(ledger.begin("k", "send", &h, false, MINUTE).unwrap(), Begin::Refuse(r) if r.contains("in progress"))
        );
        let result = ToolOutcome::ok(json!({"sent": true}));
        ledger.finish("k", &result).unwrap();
        assert_eq!(
            ledger.begin("k", "send", &h, false, MINUTE).unwrap(),
            Begin::Replay(result)
        );
        let other = args_hash(&json!({"to": "y"}));
        assert!(
            matches!(ledger.begin("k", "send", &other, false, MINUTE).unwrap(), Begin::Refuse(r) if r.contains("other arguments"))
        );
    }

    #[test]
    fn a_failed_call_may_be_retried() {
        let (_dir, ledger) = ledger();
        let h = args_hash(&json!({}));
        assert_eq!(
            ledger.begin("k", "t", &h, false, MINUTE).unwrap(),
            Begin::Run
        );
        ledger
            .finish("k", &ToolOutcome::error("refused by server"))
            .unwrap();
        assert!(matches!(
            ledger.get("k").unwrap().unwrap().state,
            ActionState::Failed { .. }
        ));
        assert_eq!(
            ledger.begin("k", "t", &h, false, MINUTE).unwrap(),
            Begin::Run
        );
    }

    #[test]
    fn after_a_crash_in_progress_becomes_unknown_or_retryable() {
        let (_dir, ledger) = ledger();
        let h = args_hash(&json!({}));
        ledger
            .begin("post", "http_request", &h, false, MINUTE)
            .unwrap();
        ledger.begin("write", "fs_write", &h, true, MINUTE).unwrap();
        let unknown = ledger.recover().unwrap();
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].tool, "http_request");
        assert!(
            matches!(ledger.begin("post", "http_request", &h, false, MINUTE).unwrap(), Begin::Refuse(r) if r.contains("unknown"))
        );
        assert_eq!(
            ledger.begin("write", "fs_write", &h, true, MINUTE).unwrap(),
            Begin::Run,
            "idempotent: may run again"
        );
    }

    #[test]
    fn reconciliation_settles_only_unknown_actions_and_they_then_replay() {
        let (_dir, ledger) = ledger();
        let h = args_hash(&json!({}));
        ledger
            .begin("sent", "email_send", &h, false, MINUTE)
            .unwrap();
        ledger
            .begin("lost", "email_send", &h, false, MINUTE)
            .unwrap();
        ledger.recover().unwrap();
        let keys: Vec<String> = ledger
            .unknown()
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(keys, ["lost", "sent"]);
        let found = ToolOutcome::ok(json!({"found_in_sent": true}));
        assert!(ledger.settle_unknown("sent", &found).unwrap());
        assert!(
            !ledger.settle_unknown("sent", &found).unwrap(),
            "settled once"
        );
        assert!(!ledger.settle_unknown("missing", &found).unwrap());
        assert_eq!(
            ledger
                .begin("sent", "email_send", &h, false, MINUTE)
                .unwrap(),
            Begin::Replay(found),
            "a settled send is never sent again"
        );
        assert_eq!(ledger.unknown().unwrap().len(), 1);
    }

    #[test]
    fn settled_records_are_purged_after_the_retention() {
        let (_dir, ledger) = ledger();
        let h = args_hash(&json!({}));
        ledger.begin("done", "t", &h, true, MINUTE).unwrap();
        ledger.finish("done", &ToolOutcome::ok(json!(1))).unwrap();
        ledger.begin("running", "t", &h, true, MINUTE).unwrap();
        assert_eq!(ledger.purge(DEFAULT_RETENTION).unwrap(), 0);
        assert_eq!(
            ledger.purge(Duration::ZERO).unwrap(),
            1,
            "only the settled one"
        );
        assert!(ledger.get("running").unwrap().is_some());
    }
}

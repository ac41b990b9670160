//! Usage learning for tool search: a `tool_search` request that led to a call of one of
//! the tools it found is remembered as a way of asking for that tool, and indexed as part
//! of it (a field of its own in the lexical ranking, and a pull on its vector in the
//! semantic one). The owner's words for a tool become the tool's words.
//!
//! "Led to a call": the tool was among the results of a search in the same trajectory
//! within the last [`PENDING_FOR`], and is then called (each search teaches each of its
//! tools at most once). A step runs in one trajectory and rarely lasts longer, so this is
//! "in the same step" without a step id reaching the tool layer.
//!
//! Stored in sled (tree `tool_usage`, key `tool \0 time-ordered id`, value the request), at
//! most [`PER_TOOL`] requests per tool (the oldest go first), each at most
//! [`MAX_REQUEST_BYTES`]; without a tree (tests, benchmarks) it lives in memory.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use steward_events::TrajectoryId;
use tokio::time::Instant;

/// Requests remembered per tool.
pub const PER_TOOL: usize = 32;
/// The start of a request that is kept (a request is a sentence, not a document).
pub const MAX_REQUEST_BYTES: usize = 512;
/// How long a search waits for the call it led to.
pub const PENDING_FOR: Duration = Duration::from_secs(600);
/// Searches remembered per trajectory while they wait.
const PENDING_PER_TRAJECTORY: usize = 8;

#[derive(Debug)]
struct PendingSearch {
    at: Instant,
    request: String,
    found: Vec<String>,
}

#[derive(Debug, Default)]
struct Learnt {
    /// Per tool: (storage key, request), oldest first.
    requests: HashMap<String, VecDeque<(Vec<u8>, String)>>,
    pending: HashMap<TrajectoryId, VecDeque<PendingSearch>>,
}

#[derive(Debug)]
pub struct SearchUsage {
    tree: Option<sled::Tree>,
    learnt: Mutex<Learnt>,
    /// Set when a request was learnt since the index was last built.
    changed: AtomicBool,
    sequence: AtomicU64,
}

impl SearchUsage {
    /// Usage kept in `tree`, with what it already holds.
    pub fn open(tree: sled::Tree) -> Result<Self, sled::Error> {
        let mut learnt = Learnt::default();
        for entry in &tree {
            let (key, value) = entry?;
            let Some(split) = key.iter().position(|&b| b == 0) else {
                continue;
            };
            let (Ok(tool), Ok(request)) = (
                std::str::from_utf8(&key[..split]),
                std::str::from_utf8(&value),
            ) else {
                continue;
            };
            learnt
                .requests
                .entry(tool.to_owned())
                .or_default()
                .push_back((key.to_vec(), request.to_owned()));
        }
        Ok(Self {
            tree: Some(tree),
            learnt: Mutex::new(learnt),
            changed: AtomicBool::new(false),
            sequence: AtomicU64::new(0),
        })
    }

    /// Usage that lasts as long as the process.
    pub fn in_memory() -> Self {
        Self {
            tree: None,
            learnt: Mutex::new(Learnt::default()),
            changed: AtomicBool::new(false),
            sequence: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Learnt> {
        self.learnt.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ranked search in `trajectory` found `found`.
    pub fn searched(&self, trajectory: &TrajectoryId, request: &str, found: Vec<String>) {
        let request = cut(request.trim(), MAX_REQUEST_BYTES);
        if request.is_empty() || found.is_empty() {
            return;
        }
        let mut learnt = self.lock();
        let now = Instant::now();
        learnt
            .pending
            .retain(|_, searches| searches.back().is_some_and(|s| now - s.at < PENDING_FOR));
        let searches = learnt.pending.entry(trajectory.clone()).or_default();
        if searches.len() == PENDING_PER_TRAJECTORY {
            searches.pop_front();
        }
        searches.push_back(PendingSearch {
            at: now,
            request: request.to_owned(),
            found,
        });
    }

    /// `tool` is being called in `trajectory`: every recent search there that found it
    /// teaches it its request. Returns how many requests were learnt.
    pub fn called(&self, trajectory: &TrajectoryId, tool: &str) -> usize {
        let mut learnt = self.lock();
        let now = Instant::now();
        let Some(searches) = learnt.pending.get_mut(trajectory) else {
            return 0;
        };
        let mut requests = Vec::new();
        for search in searches.iter_mut() {
            if now - search.at < PENDING_FOR
                && let Some(at) = search.found.iter().position(|f| f == tool)
            {
                search.found.remove(at);
                requests.push(search.request.clone());
            }
        }
        for request in &requests {
            self.learn(&mut learnt, tool, request);
        }
        if !requests.is_empty() {
            self.changed.store(true, Ordering::Release);
        }
        requests.len()
    }

    fn learn(&self, learnt: &mut Learnt, tool: &str, request: &str) {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let millis = chrono::Utc::now().timestamp_millis().max(0) as u64;
        let mut key = tool.as_bytes().to_vec();
        key.push(0);
        key.extend(millis.to_be_bytes());
        key.extend(sequence.to_be_bytes());
        let kept = learnt.requests.entry(tool.to_owned()).or_default();
        if kept.iter().any(|(_, r)| r == request) {
            return;
        }
        if let Some(tree) = &self.tree
            && let Err(e) = tree.insert(&key, request.as_bytes())
        {
            tracing::warn!(tool, error = %e, "could not store a learnt tool_search request");
        }
        kept.push_back((key, request.to_owned()));
        while kept.len() > PER_TOOL {
            if let Some((old, _)) = kept.pop_front()
                && let Some(tree) = &self.tree
                && let Err(e) = tree.remove(old)
            {
                tracing::warn!(tool, error = %e, "could not drop an old learnt request");
            }
        }
    }

    /// The requests learnt for `tool`, oldest first.
    pub fn requests(&self, tool: &str) -> Vec<String> {
        self.lock()
            .requests
            .get(tool)
            .map(|kept| kept.iter().map(|(_, r)| r.clone()).collect())
            .unwrap_or_default()
    }

    /// Whether anything was learnt since the last call (the index needs rebuilding).
    pub fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::AcqRel)
    }
}

fn cut(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane() -> TrajectoryId {
        TrajectoryId::lane(steward_events::EventId::generate())
    }

    #[test]
    fn a_search_teaches_the_tool_called_after_it_once_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let usage = SearchUsage::open(db.open_tree("tool_usage").unwrap()).unwrap();
        let main = TrajectoryId::main();
        usage.searched(
            &main,
            "will it rain",
            vec!["weather".into(), "calendar".into()],
        );
        assert_eq!(usage.called(&lane(), "weather"), 0, "another trajectory");
        assert_eq!(
            usage.called(&main, "email_send"),
            0,
            "not found by the search"
        );
        assert_eq!(usage.called(&main, "weather"), 1);
        assert_eq!(
            usage.called(&main, "weather"),
            0,
            "a search teaches a tool once"
        );
        assert!(usage.take_changed());
        assert!(!usage.take_changed());
        // The same request again is not stored twice.
        usage.searched(&main, "will it rain", vec!["weather".into()]);
        usage.called(&main, "weather");
        drop(usage);
        let reopened = SearchUsage::open(db.open_tree("tool_usage").unwrap()).unwrap();
        assert_eq!(reopened.requests("weather"), ["will it rain"]);
        assert!(reopened.requests("calendar").is_empty());
    }

    #[test]
    fn each_tool_keeps_only_its_latest_requests() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let tree = db.open_tree("tool_usage").unwrap();
        let usage = SearchUsage::open(tree.clone()).unwrap();
        let main = TrajectoryId::main();
        for i in 0..PER_TOOL + 5 {
            usage.searched(&main, &format!("request {i}"), vec!["weather".into()]);
            usage.called(&main, "weather");
        }
        let kept = usage.requests("weather");
        assert_eq!(kept.len(), PER_TOOL);
        assert_eq!(kept[0], "request 5");
        assert_eq!(
            tree.len(),
            PER_TOOL,
            "the dropped ones are gone from the store"
        );
        let long = "é".repeat(MAX_REQUEST_BYTES);
        usage.searched(&main, &long, vec!["long".into()]);
        usage.called(&main, "long");
        assert!(usage.requests("long")[0].len() <= MAX_REQUEST_BYTES);
    }
}

//! The file-watch channel: one actor per `[[watch]]`, turning changes under a path into
//! events on channel `watch:NAME` — never one per file in a burst.
//!
//! - Debouncing: the first change opens a window of `debounce_ms`; everything seen until it
//!   closes becomes one event listing the changed paths (at most [`MAX_LISTED`]; the rest
//!   are counted). Raw notifications wait in a bounded queue; when it is full they are
//!   counted, not stored, so a burst of any size costs bounded memory.
//! - Filters: `include` globs (when given) and `exclude` globs over paths relative to the
//!   watched path, plus the default excludes (`.git/`, `target/`, `node_modules/`, editor
//!   swap and backup files); `events` picks among create, modify, remove, rename.
//! - Dedupe key: a hash of (watch, each path, kind, size, modification time), so the same
//!   batch submitted twice is recorded once.
//! - Failures are shown in `steward status` (`watch:NAME`) and the log: a path that does not
//!   exist (yet, or any more) is waited for and watched again when it returns; a watcher
//!   that cannot start (the inotify limits, permissions) is retried with backoff.
//! - Trust: file names come from whoever made the files, so the events are `untrusted`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use steward_config::WatchConfig;
use steward_events::{Event, FileChange, Payload, Sender, Source, Trust};
use steward_tools::glob::Globs;
use tokio::sync::mpsc;
use tracing::{info, warn};

pub mod set;
pub mod tools;

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};

/// Paths listed in one event; further changes in the window are counted.
pub const MAX_LISTED: usize = 200;
/// Raw notifications buffered between the watcher thread and the actor.
const QUEUE: usize = 4096;
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often a missing watched path is looked for again.
const PATH_LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Excluded in every watch: version-control and build directories, editor leftovers.
const DEFAULT_EXCLUDES: [&str; 11] = [
    "**/.git",
    "**/.git/**",
    "**/target",
    "**/target/**",
    "**/node_modules",
    "**/node_modules/**",
    "**/*.swp",
    "**/*.swx",
    "**/*~",
    "**/.#*",
    "**/4913",
];

/// Runs one watch until it is stopped (see the module docs).
pub async fn run(config: WatchConfig, cx: ChannelContext) {
    let patterns = Patterns::of(&config);
    let watch = Watch {
        config,
        cx,
        patterns,
    };
    watch
        .cx
        .keep_up(MAX_BACKOFF, || async {
            if let Err(bad) = &watch.patterns {
                return Err(Down::Failed(bad.clone()));
            }
            match watch.watch_once().await {
                Ended::PathMissing => Err(Down::Waiting {
                    detail: format!("waiting for {}", watch.config.path.display()),
                    retry: PATH_LOOK_AGAIN,
                }),
                Ended::Failed(error) => Err(Down::Failed(error)),
            }
        })
        .await;
}

struct Watch {
    config: WatchConfig,
    cx: ChannelContext,
    /// The include and exclude globs compiled once; why not, when one is not a glob (the
    /// config check refuses such a watch before it gets here).
    patterns: Result<Patterns, String>,
}

/// Which changed paths a watch reports.
struct Patterns {
    include: Globs,
    /// The defaults and the configured ones.
    exclude: Globs,
}

impl Patterns {
    fn of(config: &WatchConfig) -> Result<Self, String> {
        let exclude: Vec<&str> = DEFAULT_EXCLUDES
            .iter()
            .copied()
            .chain(config.exclude.iter().map(String::as_str))
            .collect();
        Ok(Self {
            include: Globs::new(&config.include).map_err(|e| format!("include: {e}"))?,
            exclude: Globs::new(&exclude).map_err(|e| format!("exclude: {e}"))?,
        })
    }
}

enum Raw {
    Event(notify::Event),
    Error(String),
}

impl Watch {
    /// Watches until the path goes away or the watcher fails.
    async fn watch_once(&self) -> Ended {
        let root = &self.config.path;
        if !root.exists() {
            return Ended::PathMissing;
        }
        let (tx, mut rx) = mpsc::channel::<Raw>(QUEUE);
        let dropped = Arc::new(AtomicUsize::new(0));
        let overflow = dropped.clone();
        let handler = move |result: notify::Result<notify::Event>| {
            let raw = match result {
                Ok(event) => Raw::Event(event),
                Err(e) => Raw::Error(describe(&e)),
            };
            if tx.try_send(raw).is_err() {
                overflow.fetch_add(1, Ordering::Relaxed);
            }
        };
        let mut watcher = match notify::recommended_watcher(handler) {
            Ok(watcher) => watcher,
            Err(e) => return Ended::Failed(describe(&e)),
        };
        let mode = if self.config.recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        if let Err(e) = watcher.watch(root, mode) {
            return Ended::Failed(describe(&e));
        }
        info!(watch = %self.config.name, path = %root.display(), "watching");
        self.cx
            .set_health(ChannelHealth::ready(format!("watching {}", root.display())));
        loop {
            let Some(first) = rx.recv().await else {
                return Ended::Failed("the watcher stopped".into());
            };
            let mut batch = Batch::default();
            if let Err(error) = self.take(first, &mut batch) {
                return Ended::Failed(error);
            }
            let window = tokio::time::sleep(self.config.debounce);
            tokio::pin!(window);
            loop {
                tokio::select! {
                    () = &mut window => break,
                    raw = rx.recv() => match raw {
                        Some(raw) => if let Err(error) = self.take(raw, &mut batch) {
                            return Ended::Failed(error);
                        },
                        None => break,
                    },
                }
            }
            batch.omitted += dropped.swap(0, Ordering::Relaxed);
            if let Err(e) = self.emit(batch).await {
                return Ended::Failed(format!("cannot store the event: {e}"));
            }
            if !root.exists() {
                warn!(watch = %self.config.name, path = %root.display(), "the watched path was removed");
                return Ended::PathMissing;
            }
        }
    }

    /// Adds one raw notification to the batch, filtered.
    fn take(&self, raw: Raw, batch: &mut Batch) -> Result<(), String> {
        let event = match raw {
            Raw::Event(event) => event,
            Raw::Error(error) => return Err(error),
        };
        let Some(kind) = kind_of(&event.kind) else {
            return Ok(());
        };
        if !self.config.events.iter().any(|e| e == kind) {
            return Ok(());
        }
        for path in &event.paths {
            let Some(relative) = relative(&self.config.path, path) else {
                continue;
            };
            if !self.wanted(&relative) {
                continue;
            }
            if batch.changes.len() >= MAX_LISTED && !batch.changes.contains_key(&relative) {
                batch.omitted += 1;
                continue;
            }
            // A file made and then written in one window was made.
            let entry = batch.changes.entry(relative).or_insert(kind);
            if *entry != "create" {
                *entry = kind;
            }
        }
        Ok(())
    }

    fn wanted(&self, relative: &str) -> bool {
        let Ok(patterns) = &self.patterns else {
            return false;
        };
        (patterns.include.is_empty() || patterns.include.matches(relative))
            && !patterns.exclude.matches(relative)
    }

    async fn emit(&self, batch: Batch) -> Result<(), crate::store::StoreError> {
        if batch.changes.is_empty() && batch.omitted == 0 {
            return Ok(());
        }
        let changes: Vec<FileChange> = batch
            .changes
            .into_iter()
            .map(|(path, kind)| FileChange {
                path,
                kind: kind.to_owned(),
            })
            .collect();
        let mut text = format!("{}\n", self.config.text);
        for change in &changes {
            text.push_str(&format!("{} {}\n", change.kind, change.path));
        }
        if batch.omitted > 0 {
            text.push_str(&format!("… and {} more changes\n", batch.omitted));
        }
        let key = dedupe_key(&self.config, &changes, batch.omitted);
        let mut event = Event::new(
            Source::Watch,
            self.cx.name(),
            Sender {
                identity: self.cx.name().to_owned(),
                authenticated_by: "config".into(),
            },
            Trust::Untrusted,
            Payload::FileChanges {
                watch: self.config.name.clone(),
                changes,
                omitted: batch.omitted,
                text,
            },
        );
        // The watch's urgency is its channel's default: a `watch:*` rule overrides it.
        event.channel_urgency = Some(self.config.urgency);
        event.dedupe_key = Some(key);
        let submitted = self.cx.submit(event).await?;
        info!(watch = %self.config.name, event_id = %submitted.id, "file changes recorded");
        Ok(())
    }
}

enum Ended {
    PathMissing,
    Failed(String),
}

#[derive(Default)]
struct Batch {
    changes: BTreeMap<String, &'static str>,
    omitted: usize,
}

fn kind_of(kind: &EventKind) -> Option<&'static str> {
    match kind {
        EventKind::Create(_) => Some("create"),
        EventKind::Modify(notify::event::ModifyKind::Name(_)) => Some("rename"),
        EventKind::Modify(notify::event::ModifyKind::Metadata(_)) => None,
        EventKind::Modify(_) => Some("modify"),
        EventKind::Remove(_) => Some("remove"),
        EventKind::Access(_) | EventKind::Any | EventKind::Other => None,
    }
}

/// `path` relative to the watched `root`, with `/` separators; the root itself is `.`.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let text = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    Some(if text.is_empty() {
        ".".to_owned()
    } else {
        text
    })
}

/// Says what failed, with the fix for the errors people actually hit.
fn describe(error: &notify::Error) -> String {
    let text = error.to_string();
    let limits = matches!(error.kind, notify::ErrorKind::MaxFilesWatch)
        || text.contains("No space left on device")
        || text.contains("Too many open files");
    if limits {
        format!(
            "{text} (the inotify limits are reached: raise fs.inotify.max_user_watches / max_user_instances, or watch fewer directories)"
        )
    } else {
        text
    }
}

/// FNV-1a over (watch, each path, kind, size, mtime): the same batch gets the same key.
fn dedupe_key(config: &WatchConfig, changes: &[FileChange], omitted: usize) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(config.name.as_bytes());
    for change in changes {
        feed(change.path.as_bytes());
        feed(change.kind.as_bytes());
        let meta = std::fs::metadata(config.path.join(&change.path)).ok();
        let size = meta.as_ref().map_or(0, std::fs::Metadata::len);
        let mtime = meta
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        feed(&size.to_le_bytes());
        feed(&mtime.to_le_bytes());
    }
    feed(&omitted.to_le_bytes());
    format!("watch:{}:{hash:016x}", config.name)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn watch(include: &[&str], exclude: &[&str]) -> Watch {
        let config = WatchConfig {
            name: "w".into(),
            path: PathBuf::from("/watched"),
            recursive: true,
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            events: vec!["create".into(), "modify".into()],
            debounce: Duration::from_millis(10),
            text: "t".into(),
            urgency: steward_events::Urgency::Queue,
            run: Default::default(),
        };
        Watch {
            patterns: Patterns::of(&config),
            config,
            cx: ChannelContext::for_tests("watch:w"),
        }
    }

    #[test]
    fn filters_apply_defaults_excludes_and_includes() {
        let w = watch(&["**/*.md", "*.md"], &["drafts/**"]);
        let table = [
            ("notes.md", true),
            ("a/b/c.md", true),
            ("a/b/c.txt", false),
            (".git/HEAD", false),
            ("sub/.git/config", false),
            ("target/debug/x.md", false),
            ("node_modules/p/readme.md", false),
            ("notes.md.swp", false),
            ("notes.md~", false),
            ("drafts/idea.md", false),
        ];
        for (path, wanted) in table {
            assert_eq!(w.wanted(path), wanted, "{path}");
        }
        let all = watch(&[], &[]);
        assert!(all.wanted("anything/at/all.bin"));
        assert!(!all.wanted(".git"));
    }

    #[test]
    fn a_burst_is_capped_and_kinds_merge() {
        let w = watch(&[], &[]);
        let mut batch = Batch::default();
        let event = |kind, path: &str| {
            Raw::Event(notify::Event::new(kind).add_path(PathBuf::from("/watched").join(path)))
        };
        let create = EventKind::Create(notify::event::CreateKind::File);
        let modify = EventKind::Modify(notify::event::ModifyKind::Data(
            notify::event::DataChange::Content,
        ));
        w.take(event(create, "a.txt"), &mut batch).unwrap();
        w.take(event(modify, "a.txt"), &mut batch).unwrap();
        w.take(event(modify, "b.txt"), &mut batch).unwrap();
        // Not in `events`: ignored.
        w.take(
            event(EventKind::Remove(notify::event::RemoveKind::File), "c.txt"),
            &mut batch,
        )
        .unwrap();
        assert_eq!(batch.changes.get("a.txt"), Some(&"create"));
        assert_eq!(batch.changes.get("b.txt"), Some(&"modify"));
        assert!(!batch.changes.contains_key("c.txt"));
        for i in 0..MAX_LISTED + 50 {
            w.take(event(create, &format!("burst/{i}")), &mut batch)
                .unwrap();
        }
        assert_eq!(batch.changes.len(), MAX_LISTED);
        assert_eq!(batch.omitted, 52);
        assert!(w.take(Raw::Error("boom".into()), &mut batch).is_err());
    }
}

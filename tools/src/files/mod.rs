//! File access for the file tools: confinement to the configured roots and the
//! read-before-write rule.
//!
//! - **Roots**: a path is taken relative to the first root unless it is absolute and names
//!   a root; `.` and `..` are applied to the text, and what remains must lie beneath a root.
//!   Every open then goes through the kernel beneath that root's descriptor (see
//!   [`beneath`]): a symlink leading out, a symlinked parent, or a directory swapped for a
//!   symlink between this check and the open cannot reach outside, because the check that
//!   counts is the one the kernel makes at the open itself. A new file in a new directory
//!   inside the workspace is allowed.
//! - **Untrusted roots**: folders whose files are someone else's words — the configured
//!   `tools.untrusted_roots` and every watched folder (a watch exists because others put
//!   files there). A read, listing or search that touches one returns an untrusted result,
//!   which taints the step (the file tools declare `returns_untrusted: PerCall`).
//! - **Read before write**: `fs_write`/`fs_edit` of an existing file need an `fs_read` of it
//!   in the same trajectory, and the file unchanged since (size, mtime and content hash). A
//!   path that does not exist may be created. What was read is remembered in memory only:
//!   after a restart the model reads again, which is the safe direction.

pub mod beneath;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use steward_events::TrajectoryId;

use beneath::Root;
pub use beneath::{Entry, EntryKind};

/// What a file looked like when it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    size: u64,
    modified: Option<SystemTime>,
    hash: u64,
}

impl FileStamp {
    /// The stamp of `bytes` read from a file last modified at `modified`.
    pub fn new(bytes: &[u8], modified: Option<SystemTime>) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        bytes.hash(&mut hasher);
        Self {
            size: bytes.len() as u64,
            modified,
            hash: hasher.finish(),
        }
    }
}

/// A path the file tools may use: which root it lies beneath, where beneath it, and the
/// whole path for messages and bookkeeping. Only [`FileAccess::resolve`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    root: usize,
    relative: PathBuf,
    path: PathBuf,
}

impl Located {
    /// The whole path (the root joined with the part beneath it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside this directory.
    pub fn child(&self, name: &str) -> Located {
        Located {
            root: self.root,
            relative: self.relative.join(name),
            path: self.path.join(name),
        }
    }
}

#[derive(Debug)]
pub struct FileAccess {
    /// Held open; the first is where relative paths start.
    roots: Vec<Root>,
    /// Their canonical paths, in the same order.
    paths: Vec<PathBuf>,
    reads: Mutex<HashMap<(TrajectoryId, PathBuf), FileStamp>>,
    /// `tools.untrusted_roots`, canonical where they exist.
    untrusted: Vec<PathBuf>,
    /// The watched folders, kept current by the watch set as watches come and go.
    watched: std::sync::RwLock<Vec<PathBuf>>,
}

impl FileAccess {
    /// `roots` must exist; each is opened once here.
    pub fn new(roots: &[PathBuf]) -> std::io::Result<Self> {
        // The error names the root that failed, not every root.
        let roots = roots
            .iter()
            .map(|r| {
                Root::open(r)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", r.display())))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        if roots.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no file roots configured",
            ));
        }
        Ok(Self {
            paths: roots.iter().map(|r| r.path().to_owned()).collect(),
            roots,
            reads: Mutex::new(HashMap::new()),
            untrusted: Vec::new(),
            watched: std::sync::RwLock::default(),
        })
    }

    /// Folders whose files are someone else's words (`tools.untrusted_roots`); they need
    /// not exist yet.
    pub fn with_untrusted(mut self, roots: &[PathBuf]) -> Self {
        self.untrusted = roots.iter().map(|r| canonical_or_lexical(r)).collect();
        self
    }

    /// Replaces the watched folders (see the module docs).
    pub fn set_watched(&self, folders: &[PathBuf]) {
        *self.watched.write().unwrap_or_else(|p| p.into_inner()) =
            folders.iter().map(|f| canonical_or_lexical(f)).collect();
    }

    /// Whether reading `at` (a file, or a folder walked) can bring in someone else's words:
    /// it lies in an untrusted or watched folder, or one lies inside it — by its own path
    /// or by where its symlinks lead.
    pub fn touches_untrusted(&self, at: &Located) -> bool {
        let real = canonical_or_lexical(&at.path);
        let touches = |root: &PathBuf| {
            [&at.path, &real]
                .iter()
                .any(|path| path.starts_with(root) || root.starts_with(path))
        };
        self.untrusted.iter().any(touches)
            || self
                .watched
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(touches)
    }

    /// Whether any folder is untrusted or watched: a shell command can read anything, so
    /// its output is someone else's words as soon as there are such folders.
    pub fn has_untrusted(&self) -> bool {
        !self.untrusted.is_empty()
            || !self
                .watched
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Which root `requested` lies beneath, and where (see the module docs); else why not.
    /// Nothing is opened here: the kernel has the last word at each open.
    pub fn resolve(&self, requested: &str) -> Result<Located, String> {
        if requested.is_empty() {
            return Err("the path is empty".into());
        }
        let path = lexical(&self.paths[0].join(requested));
        let found = self
            .paths
            .iter()
            .enumerate()
            .find_map(|(root, base)| Some((root, path.strip_prefix(base).ok()?.to_owned())));
        match found {
            Some((root, relative)) => Ok(Located {
                root,
                relative,
                path,
            }),
            None => Err(format!(
                "`{requested}` is {} which is outside the allowed roots ({})",
                path.display(),
                self.paths
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn root(&self, at: &Located) -> &Root {
        &self.roots[at.root]
    }

    /// Opens a file for reading, beneath its root.
    pub fn open_read(&self, at: &Located) -> Result<std::fs::File, String> {
        self.root(at)
            .open_read(&at.relative)
            .map_err(|e| format!("cannot open {}: {e}", at.path.display()))
    }

    /// What is at `at`, following symlinks that stay beneath the root.
    pub fn metadata(&self, at: &Located) -> std::io::Result<std::fs::Metadata> {
        self.root(at).metadata(&at.relative)
    }

    /// Whether anything is at `at` (a dangling symlink counts).
    pub fn exists(&self, at: &Located) -> bool {
        self.root(at).exists(&at.relative)
    }

    /// The entries of the directory `at`, unsorted.
    pub fn list(&self, at: &Located) -> std::io::Result<Vec<Entry>> {
        self.root(at).list(&at.relative)
    }

    /// Replaces or creates the file `at` atomically; whether it is new.
    pub fn write_atomically(&self, at: &Located, bytes: &[u8]) -> std::io::Result<bool> {
        self.root(at).write_atomically(&at.relative, bytes)
    }

    /// The whole content of the file `at` and its stamp, refusing files over `max` bytes.
    pub fn read_stamped(&self, at: &Located, max: u64) -> Result<(Vec<u8>, FileStamp), String> {
        let mut file = self.open_read(at)?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", at.path.display()))?;
        if meta.is_dir() {
            return Err(format!("{} is a directory; use fs_list", at.path.display()));
        }
        if meta.len() > max {
            return Err(format!(
                "{} is {} bytes, over the {max}-byte limit",
                at.path.display(),
                meta.len()
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.by_ref()
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", at.path.display()))?;
        let stamp = FileStamp::new(&bytes, meta.modified().ok());
        Ok((bytes, stamp))
    }

    pub fn record_read(&self, trajectory: &TrajectoryId, at: &Located, stamp: FileStamp) {
        lock(&self.reads).insert((trajectory.clone(), at.path.clone()), stamp);
    }

    /// Whether `at` may be written now in `trajectory` (see the module docs).
    pub fn check_write(&self, trajectory: &TrajectoryId, at: &Located) -> Result<(), String> {
        if !self.exists(at) {
            return Ok(());
        }
        let (_, now) = self.read_stamped(at, u64::MAX)?;
        self.check_unchanged(trajectory, at, &now)
    }

    /// Whether the existing file `at`, now stamped `now`, was read in `trajectory` and is
    /// unchanged since.
    pub fn check_unchanged(
        &self,
        trajectory: &TrajectoryId,
        at: &Located,
        now: &FileStamp,
    ) -> Result<(), String> {
        let path = &at.path;
        let key = (trajectory.clone(), path.clone());
        let Some(read) = lock(&self.reads).get(&key).cloned() else {
            return Err(format!(
                "{} exists and was not read in this conversation; read it with fs_read first",
                path.display()
            ));
        };
        if *now != read {
            return Err(format!(
                "{} changed since it was read; read it again with fs_read before writing",
                path.display()
            ));
        }
        Ok(())
    }
}

/// `path` canonicalized, or with `.` and `..` applied when it does not exist (yet).
fn canonical_or_lexical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| lexical(path))
}

/// `path` with `.`, `..` and doubled slashes applied, without asking the file system (the
/// file tools' resolution and the command classifier's reading of paths).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The map stays usable if a holder panicked: each update is a single insert.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;

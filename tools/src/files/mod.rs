//! File access for the file tools: confinement to the configured roots and the
//! read-before-write rule.
//!
//! - **Roots**: a path is resolved against the first root when relative, `.`/`..` are
//!   applied, then the longest existing prefix is canonicalized (following symlinks); the
//!   result must lie inside a canonical root. So `../x`, `/etc/passwd` and a symlink in the
//!   workspace pointing out of it are all refused, while a new file in a new directory
//!   inside the workspace is allowed.
//! - **Read before write**: `fs_write`/`fs_edit` of an existing file need an `fs_read` of it
//!   in the same trajectory, and the file unchanged since (size, mtime and content hash). A
//!   path that does not exist may be created. What was read is remembered in memory only:
//!   after a restart the model reads again, which is the safe direction.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use steward_events::TrajectoryId;

/// What a file looked like when it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    size: u64,
    modified: Option<SystemTime>,
    hash: u64,
}

impl FileStamp {
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let bytes = std::fs::read(path)?;
        Self::of_bytes(path, &bytes)
    }

    pub fn of_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<Self> {
        let modified = std::fs::metadata(path)?.modified().ok();
        let mut hasher = std::hash::DefaultHasher::new();
        bytes.hash(&mut hasher);
        Ok(Self {
            size: bytes.len() as u64,
            modified,
            hash: hasher.finish(),
        })
    }
}

#[derive(Debug)]
pub struct FileAccess {
    /// Canonical roots; the first is where relative paths start.
    roots: Vec<PathBuf>,
    reads: Mutex<HashMap<(TrajectoryId, PathBuf), FileStamp>>,
}

impl FileAccess {
    /// `roots` must exist; they are canonicalized once here.
    pub fn new(roots: &[PathBuf]) -> std::io::Result<Self> {
        // The error names the root that failed, not every root.
        let roots = roots
            .iter()
            .map(|r| {
                r.canonicalize()
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
            roots,
            reads: Mutex::new(HashMap::new()),
        })
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Where `requested` really points, if that is inside a root; else why not.
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, String> {
        if requested.is_empty() {
            return Err("the path is empty".into());
        }
        let joined = self.roots[0].join(requested);
        let mut lexical = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    lexical.pop();
                }
                Component::CurDir => {}
                other => lexical.push(other),
            }
        }
        // Canonicalize the longest existing prefix (this follows symlinks), keep the rest.
        let mut existing = lexical.clone();
        let mut rest = Vec::new();
        let canonical = loop {
            match existing.canonicalize() {
                Ok(canonical) => break canonical,
                Err(_) => match (
                    existing.file_name().map(ToOwned::to_owned),
                    existing.parent(),
                ) {
                    (Some(name), Some(parent)) => {
                        rest.push(name);
                        existing = parent.to_owned();
                    }
                    _ => return Err(format!("cannot resolve `{requested}`")),
                },
            }
        };
        let resolved = rest
            .into_iter()
            .rev()
            .fold(canonical, |path, part| path.join(part));
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else {
            Err(format!(
                "`{requested}` resolves to {} which is outside the allowed roots ({})",
                resolved.display(),
                self.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }

    pub fn record_read(&self, trajectory: &TrajectoryId, path: &Path, stamp: FileStamp) {
        lock(&self.reads).insert((trajectory.clone(), path.to_owned()), stamp);
    }

    /// Whether `path` may be written now in `trajectory` (see the module docs).
    pub fn check_write(&self, trajectory: &TrajectoryId, path: &Path) -> Result<(), String> {
        if !path.exists() {
            return Ok(());
        }
        let key = (trajectory.clone(), path.to_owned());
        let Some(read) = lock(&self.reads).get(&key).cloned() else {
            return Err(format!(
                "{} exists and was not read in this conversation; read it with fs_read first",
                path.display()
            ));
        };
        let now =
            FileStamp::of(path).map_err(|e| format!("cannot check {}: {e}", path.display()))?;
        if now != read {
            return Err(format!(
                "{} changed since it was read; read it again with fs_read before writing",
                path.display()
            ));
        }
        Ok(())
    }
}

/// The map stays usable if a holder panicked: each update is a single insert.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;

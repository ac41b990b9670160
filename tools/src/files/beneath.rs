//! File operations confined to a root by the kernel, not by a check before the open.
//!
//! Each root is opened once as a directory descriptor. Every later open names a path
//! relative to it and goes through `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the
//! kernel refuses (`EXDEV`) any resolution that would leave the root — by `..`, an absolute
//! symlink, a symlink to a parent, or a directory swapped for such a symlink after a path
//! was checked — and refuses `/proc` magic links (`ELOOP`). A relative symlink that stays
//! beneath the root is followed, as a user expects; an absolute symlink is refused even when
//! it names a place inside (the kernel resolves beneath the root only, and `/` is not
//! beneath it) — the price of a check nobody can race.
//!
//! Writes go to a temporary file in the target's directory (opened beneath once, then
//! used by descriptor), with a random name opened `O_CREAT | O_EXCL | O_NOFOLLOW` (a
//! planted file or symlink of that name is never written through), and are renamed over
//! the target in that same directory. Renaming replaces a symlink at the target rather
//! than writing where it points; a regular file replaced keeps its permission bits.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// How every open resolves: beneath the root, no magic links.
const CONFINED: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// What kind of entry a directory listing found (symlinks are reported, not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

/// One entry of a directory.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub kind: EntryKind,
    /// Bytes, for files; 0 when it could not be read.
    pub size: u64,
}

/// A root directory, held open.
#[derive(Debug)]
pub struct Root {
    /// Canonical, for messages and for telling which root an absolute path names.
    path: PathBuf,
    dir: OwnedFd,
}

/// The error for a resolution the kernel refused, in words.
fn explain(e: Errno) -> std::io::Error {
    match e {
        Errno::XDEV => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "it leads outside the allowed roots (through `..` or a symlink)",
        ),
        Errno::LOOP => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "it goes through too many symlinks or a /proc magic link",
        ),
        other => other.into(),
    }
}

impl Root {
    /// Opens `path` (an existing directory) as a root.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let path = path.canonicalize()?;
        let dir = rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { path, dir })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `relative` opened beneath the root with `flags`; `.` for the root itself.
    fn open_beneath(&self, relative: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
        let relative: &Path = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        // openat2 refuses O_PATH beside flags that only matter to an open for I/O.
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        rustix::fs::openat2(&self.dir, relative, flags, Mode::empty(), CONFINED).map_err(explain)
    }

    /// Opens a file for reading.
    pub fn open_read(&self, relative: &Path) -> std::io::Result<File> {
        Ok(File::from(self.open_beneath(relative, OFlags::RDONLY)?))
    }

    /// What `relative` is (following symlinks that stay beneath the root).
    pub fn metadata(&self, relative: &Path) -> std::io::Result<std::fs::Metadata> {
        File::from(self.open_beneath(relative, OFlags::PATH)?).metadata()
    }

    /// Whether anything is at `relative` (a dangling symlink counts).
    pub fn exists(&self, relative: &Path) -> bool {
        let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
            return true; // the root itself
        };
        self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY)
            .is_ok_and(|dir| rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok())
    }

    /// The entries of the directory `relative`, unsorted, without `.` and `..`.
    pub fn list(&self, relative: &Path) -> std::io::Result<Vec<Entry>> {
        let dir = self.open_beneath(relative, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let stat = rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW);
            let kind = match stat
                .as_ref()
                .map(|s| rustix::fs::FileType::from_raw_mode(s.st_mode))
            {
                Ok(rustix::fs::FileType::RegularFile) => EntryKind::File,
                Ok(rustix::fs::FileType::Directory) => EntryKind::Dir,
                Ok(rustix::fs::FileType::Symlink) => EntryKind::Symlink,
                _ => EntryKind::Other,
            };
            entries.push(Entry {
                name: OsStr::from_bytes(name).to_string_lossy().into_owned(),
                kind,
                size: stat.map_or(0, |s| u64::try_from(s.st_size).unwrap_or(0)),
            });
        }
        Ok(entries)
    }

    /// Creates the directory `relative` and its missing parents, each beneath the root.
    fn create_dirs(&self, relative: &Path) -> std::io::Result<()> {
        let mut done = PathBuf::new();
        for component in relative.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            let parent = self.open_beneath(&done, OFlags::PATH | OFlags::DIRECTORY)?;
            match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            done.push(name);
        }
        Ok(())
    }

    /// Replaces (or creates) the file `relative` with `bytes`, atomically (see the module
    /// docs); creates missing parent directories. Returns whether the file is new.
    pub fn write_atomically(&self, relative: &Path, bytes: &[u8]) -> std::io::Result<bool> {
        let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a file path",
            ));
        };
        self.create_dirs(parent)?;
        let dir = self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY)?;
        // A file replaced keeps its permission bits (a script stays executable); a symlink
        // replaced, or a new file, gets the default.
        let existing = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        let created = existing.is_none();
        let kept_mode = existing
            .filter(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_file())
            .map(|s| Mode::from_raw_mode(s.st_mode & 0o7777));
        let (temp, file) = Self::create_temp(&dir, name)?;
        let written = (|| {
            if let Some(mode) = kept_mode {
                rustix::fs::fchmod(&file, mode)?;
            }
            let mut file = File::from(file);
            file.write_all(bytes)?;
            file.sync_data()?;
            rustix::fs::renameat(&dir, &temp, &dir, name)?;
            Ok(created)
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
        }
        written
    }

    /// A new file beside `name` in `dir` with a random name, never an existing one.
    fn create_temp(dir: &impl AsFd, name: &OsStr) -> std::io::Result<(PathBuf, OwnedFd)> {
        let mut last = Errno::EXIST;
        for _ in 0..8 {
            let temp = PathBuf::from(format!(
                ".{}.steward-{}.tmp",
                name.to_string_lossy(),
                ulid::Ulid::generate()
            ));
            match rustix::fs::openat(
                dir,
                &temp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(file) => return Ok((temp, file)),
                Err(Errno::EXIST) => last = Errno::EXIST,
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.into())
    }
}

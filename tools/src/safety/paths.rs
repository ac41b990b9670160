//! Lexical path reasoning for the command classifier: where a path in a command points,
//! without touching the file system (the classifier is a pure function). Symlinks that
//! already exist are the pipeline's path check's business, not this module's.

use std::path::{Component, Path, PathBuf};

use super::ShellContext;
use crate::files::lexical;

/// Directories whose loss ruins the machine or the user's account.
const SYSTEM_DIRS: [&str; 22] = [
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/Users",
    "/System",
    "/Library",
    "/Applications",
    "/private",
    "/snap",
];

/// Devices a write to which destroys data or the running system.
const DEVICE_PREFIXES: [&str; 17] = [
    "/dev/mapper/",
    "/dev/dm-",
    "/dev/loop",
    "/dev/zram",
    "/dev/rbd",
    "/dev/bcache",
    "/dev/sd",
    "/dev/hd",
    "/dev/vd",
    "/dev/xvd",
    "/dev/nvme",
    "/dev/mmcblk",
    "/dev/disk",
    "/dev/mem",
    "/dev/kmem",
    "/dev/port",
    "/dev/md",
];

/// Harmless device targets.
const HARMLESS_DEVICES: [&str; 9] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/fd/",
];

/// Where `text` points, with `~`, `$HOME`, `.` and `..` resolved lexically against the
/// working directory (the first root). `None` when it cannot be known (relative path with no
/// roots configured).
pub fn resolve(text: &str, ctx: &ShellContext) -> Option<PathBuf> {
    let home = ctx.home.as_deref();
    let expanded: PathBuf = if text == "~" || text == "$HOME" || text == "${HOME}" {
        home?.to_owned()
    } else if let Some(rest) = text
        .strip_prefix("~/")
        .or_else(|| text.strip_prefix("$HOME/"))
        .or_else(|| text.strip_prefix("${HOME}/"))
    {
        home?.join(rest)
    } else if let Some(user) = text.strip_prefix('~') {
        // `~root`, `~alice/x`: another user's home.
        let (user, rest) = user.split_once('/').unwrap_or((user, ""));
        let home = if user == "root" {
            PathBuf::from("/root")
        } else {
            Path::new("/home").join(user)
        };
        home.join(rest)
    } else if text.starts_with('/') {
        PathBuf::from(text)
    } else {
        ctx.roots.first()?.join(text)
    };
    let mut normal = PathBuf::from("/");
    for component in expanded.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::Normal(part) => normal.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(normal)
}

/// `/`, a system directory, a home directory or the parent of homes — what `rm -r` must
/// never touch. A trailing `/*` counts as the directory itself.
pub fn is_precious(text: &str, ctx: &ShellContext) -> bool {
    let stripped = text.trim_end_matches('*');
    let Some(path) = resolve(if stripped.is_empty() { "." } else { stripped }, ctx) else {
        return false;
    };
    if path == Path::new("/") || SYSTEM_DIRS.iter().any(|d| path == Path::new(d)) {
        return true;
    }
    if ctx.home.as_deref() == Some(path.as_path()) {
        return true;
    }
    // /home/<user>, /Users/<user>
    let parent = path.parent();
    parent == Some(Path::new("/home")) || parent == Some(Path::new("/Users"))
}

pub fn is_harmless_device(text: &str) -> bool {
    HARMLESS_DEVICES
        .iter()
        .any(|d| text == *d || (d.ends_with('/') && text.starts_with(d)))
}

/// A disk or memory device, also written `//dev/sda` or `/dev/../dev/sda`.
pub fn is_device(text: &str) -> bool {
    let normal = lexical(Path::new(text));
    let text = normal.to_string_lossy();
    DEVICE_PREFIXES.iter().any(|d| text.starts_with(d))
}

/// Files under a home whose content must not leave the machine: keys, tokens, password
/// stores (also what the shell sandbox denies reading).
pub const SECRETS_IN_HOME: [&str; 11] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
];
const SECRETS: [&str; 4] = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root"];

/// Whether `text` names a secret (under `~/.ssh`, `~/.gnupg`, …, `/etc/shadow`).
pub fn is_secret(text: &str, ctx: &ShellContext) -> bool {
    // Every secret's path names one of these in its text: most words are rejected here,
    // without building a path.
    const HINTS: [&str; 12] = [
        ".ssh",
        ".gnupg",
        ".aws",
        ".netrc",
        ".pgpass",
        "credentials",
        ".docker",
        ".kube",
        "gh",
        "password-store",
        "keyrings",
        "root",
    ];
    if !HINTS.iter().any(|h| text.contains(h))
        && !text.contains("shadow")
        && !text.contains("sudoers")
    {
        return false;
    }
    let text = text.rsplit_once('@').map_or(text, |(_, path)| path);
    let Some(path) = resolve(text, ctx) else {
        return false;
    };
    SECRETS.iter().any(|s| path.starts_with(s))
        || ctx.home.as_deref().is_some_and(|home| {
            SECRETS_IN_HOME
                .iter()
                .any(|s| path.starts_with(home.join(s)))
        })
}

pub fn inside_roots(path: &Path, ctx: &ShellContext) -> bool {
    ctx.roots.iter().any(|root| path.starts_with(root))
        || path.starts_with("/tmp")
        || path.starts_with("/var/tmp")
}

pub fn is_git_hook(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.contains("/.git/hooks/") || text.ends_with("/.git/hooks")
}

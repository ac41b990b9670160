//! The shell sandbox: what a shell command may touch, enforced by the kernel (Landlock), so it
//! holds even when the classifier is wrong.
//!
//! Decided here:
//! - The confinement is applied by a launcher ([`launcher`]: `steward-sandbox SPEC -- sh -c
//!   COMMAND`) which confines itself and then becomes the command (`exec`): no code runs
//!   between fork and exec in the daemon, and the rules are inherited by everything the
//!   command starts.
//! - Writes: the workspace roots and a private temp dir (`TMPDIR`), plus `/dev/null` and the
//!   terminals. Reads: the whole file system except what is denied — the data dir, the config
//!   dir, `~/.ssh`, `~/.gnupg`, cloud and registry credentials, `$CREDENTIALS_DIRECTORY`.
//!   Landlock only grants, so "all but these" is built as grants on every sibling along the
//!   way to each denied path (a few dozen rules); symbolic links met on the way are not
//!   followed (a link to a denied place grants nothing).
//! - Network: no TCP bind or connect unless `tools.shell.network = true` (Landlock TCP rules),
//!   and — since Landlock does not cover UDP, raw, netlink or named Unix sockets — a seccomp
//!   filter that refuses `socket()` (`EPERM`) for every family without network, and for all
//!   but IPv4/IPv6 with it. Named Unix sockets matter: Landlock does not stop a `connect` to
//!   one, so without the filter a command could reach the daemon's own control socket (and
//!   confirm its own pending actions), the Docker socket or D-Bus; a probe showed both that
//!   and a UDP datagram leaving. `socketpair` stays (it reaches nothing outside), and
//!   `io_uring_setup` is refused (its operations could open sockets past the filter).
//!   Signals and abstract Unix sockets outside the sandbox are scoped away by Landlock, so a
//!   command cannot signal the daemon.
//! - Limits: CPU time (the timeout plus a margin), file size (4 GiB), no core dumps, at most
//!   512 tasks more than the machine runs when the command starts (`RLIMIT_NPROC`); no new
//!   privileges (set by Landlock's `restrict_self`). The command runs in its own process group,
//!   which the tool kills whole on cancel or timeout.
//! - What is not enforced is said: a kernel without Landlock, or with an older ABI, is
//!   reported by [`probe`] and by the tool's result, and the shell tool then asks for every
//!   command.

use std::path::{Path, PathBuf};

pub mod launcher;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::{Deserialize, Serialize};

/// The newest Landlock ABI this code is written for (filesystem, TCP, scoping).
const TARGET_ABI: ABI = ABI::V6;
/// Files beyond the workspace a command may write.
const WRITABLE_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/full",
    "/dev/ptmx",
];

/// What one command may do, handed to the launcher.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Trees the command may write (and read).
    pub write: Vec<PathBuf>,
    /// Trees it may not even read.
    pub deny_read: Vec<PathBuf>,
    /// TCP allowed.
    pub network: bool,
    /// CPU seconds before the kernel stops it.
    pub cpu_secs: u64,
}

/// How much of the spec the kernel enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Full,
    /// Some rules could not be enforced (an older Landlock ABI): what is missing.
    Partial(String),
    /// Nothing is enforced: why.
    Unavailable(String),
}

/// Confines the calling process (the launcher) as `spec` says; what the kernel enforces.
pub fn confine(spec: &SandboxSpec) -> Result<Enforcement, String> {
    limits(spec)?;
    let fs = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(fs)
        .map_err(|e| e.to_string())?;
    if !spec.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
    }
    let ruleset = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| e.to_string())?;
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    for tree in readable(Path::new("/"), &spec.deny_read) {
        created = grant(created, &tree, read)?;
    }
    for path in &spec.write {
        created = grant(created, &Tree::of(path), fs)?;
    }
    for device in WRITABLE_DEVICES {
        created = grant(
            created,
            &Tree::of(Path::new(device)),
            AccessFs::ReadFile | AccessFs::WriteFile,
        )?;
    }
    let status = created.restrict_self().map_err(|e| e.to_string())?;
    restrict_sockets(spec.network)?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial(format!(
            "the kernel's Landlock is older than ABI {}: some rules are not enforced",
            TARGET_ABI as i32
        )),
        RulesetStatus::NotEnforced => {
            Enforcement::Unavailable("this kernel does not enforce Landlock".into())
        }
    })
}

/// Installs the socket filter (see the module docs). Fails closed: an error means the
/// command does not run.
fn restrict_sockets(network: bool) -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let failed = |e: seccompiler::BackendError| format!("cannot build the socket filter: {e}");
    let refused = if network {
        let not = |family: i32| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
        };
        vec![
            SeccompRule::new(vec![
                not(libc::AF_INET).map_err(failed)?,
                not(libc::AF_INET6).map_err(failed)?,
            ])
            .map_err(failed)?,
        ]
    } else {
        Vec::new() // no conditions: every call
    };
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_socket, refused.clone());
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    // The x32 ABI shares x86_64's audit arch: its numbers carry bit 30.
    #[cfg(target_arch = "x86_64")]
    {
        const X32: i64 = 0x4000_0000;
        rules.insert(X32 | libc::SYS_socket, refused);
        rules.insert(X32 | libc::SYS_io_uring_setup, Vec::new());
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("no socket filter for this CPU: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(failed)?;
    let program: BpfProgram = filter.try_into().map_err(failed)?;
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("cannot set no_new_privs: {e}"))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| format!("cannot install the socket filter: {e}"))
}

/// A path to grant, and whether it is a directory (a file takes only file rights).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tree {
    pub path: PathBuf,
    pub is_dir: bool,
}

impl Tree {
    fn of(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            is_dir: path.is_dir(),
        }
    }
}

/// Adds a grant for `tree` if it exists (a missing path grants nothing and is no error).
fn grant(
    created: landlock::RulesetCreated,
    tree: &Tree,
    access: landlock::BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, String> {
    let Ok(fd) = PathFd::new(&tree.path) else {
        return Ok(created);
    };
    let access = if tree.is_dir {
        access
    } else {
        access & AccessFs::from_file(TARGET_ABI)
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| format!("cannot grant {}: {e}", tree.path.display()))
}

/// The trees under `root` (a directory) to grant reading so that everything but `deny` is
/// readable: `root` itself when nothing denied is under it, else its children, recursively.
/// Symbolic links are left out (a link to a denied place would grant it). Each costs a rule
/// (four system calls at the launch), so the kinds come from the directory listing rather
/// than from a `stat` each.
pub fn readable(root: &Path, deny: &[PathBuf]) -> Vec<Tree> {
    if deny.iter().any(|d| d == root) {
        return Vec::new();
    }
    if !deny.iter().any(|d| d.starts_with(root)) {
        return vec![Tree {
            path: root.to_owned(),
            is_dir: true,
        }];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut trees = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            trees.extend(readable(&entry.path(), deny));
        } else if !kind.is_symlink() && !deny.contains(&entry.path()) {
            trees.push(Tree {
                path: entry.path(),
                is_dir: false,
            });
        }
    }
    trees
}

fn limits(spec: &SandboxSpec) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let set = |resource, value: u64, what: &str| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
        .map_err(|e| format!("cannot limit {what}: {e}"))
    };
    set(Resource::Cpu, spec.cpu_secs.max(1), "CPU time")?;
    set(Resource::Fsize, 4 << 30, "file size")?;
    set(Resource::Core, 0, "core dumps")?;
    // RLIMIT_NPROC counts every task of the user, not of the command: the tasks running on
    // the whole machine now bound the user's, so this leaves the command at most
    // EXTRA_TASKS more. (Root is not held to it by the kernel; the process group is still
    // killed whole at the timeout.)
    if let Some(running) = tasks_running() {
        set(Resource::Nproc, running + EXTRA_TASKS, "processes")?;
    }
    Ok(())
}

/// Processes and threads a command may add to what its user runs (a build's compilers
/// fit; a fork bomb stops there).
const EXTRA_TASKS: u64 = 512;

/// How many tasks the machine runs now (`/proc/loadavg`'s fourth field, `running/total`).
fn tasks_running() -> Option<u64> {
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// The paths a shell command must never read, for a daemon with this data dir, config file
/// and workspace roots: the data dir; the config file and its directory — unless that
/// directory holds the home or a root (a config kept in `~` or in the workspace denies only
/// itself); the home's key and credential stores; systemd's credentials.
pub fn denied_paths(
    data_dir: &Path,
    config_file: Option<&Path>,
    home: Option<&Path>,
    roots: &[PathBuf],
) -> Vec<PathBuf> {
    let mut denied = vec![canonical(data_dir)];
    if let Some(file) = config_file.map(canonical) {
        let shared = |dir: &Path| {
            home.map(canonical)
                .into_iter()
                .chain(roots.iter().map(|r| canonical(r)))
                .any(|kept| kept.starts_with(dir))
        };
        if let Some(dir) = file.parent().filter(|dir| !shared(dir)) {
            denied.push(dir.to_owned());
        }
        denied.push(file);
    }
    if let Some(home) = home {
        denied.extend(
            crate::safety::SECRETS_IN_HOME
                .iter()
                .map(|p| canonical(&home.join(p))),
        );
    }
    if let Some(credentials) = std::env::var_os("CREDENTIALS_DIRECTORY") {
        denied.push(canonical(Path::new(&credentials)));
    }
    denied
}

/// `path` with symbolic links resolved when it exists (rules apply to what a path leads to).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_trees_leave_out_exactly_the_denied_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["a/keep", "a/secret/inner", "b", "c/deep/er"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("a/secret"), root.join("a/link")).unwrap();
        std::fs::write(root.join("a/.netrc"), "").unwrap();
        std::fs::write(root.join("a/notes"), "").unwrap();
        let deny = vec![
            root.join("a/secret"),
            root.join("c/deep/er"),
            root.join("a/.netrc"),
        ];
        let mut trees: Vec<PathBuf> = readable(&root, &deny).into_iter().map(|t| t.path).collect();
        trees.sort();
        // c/deep holds nothing but the denied c/deep/er, so nothing of it is granted.
        assert_eq!(
            trees,
            [root.join("a/keep"), root.join("a/notes"), root.join("b")]
        );
    }

    /// A config in its own folder hides the folder (tokens beside it); one kept in the home
    /// or the workspace hides only itself, or the commands could not read their own work.
    #[test]
    fn the_config_hides_its_folder_only_when_the_folder_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (home, ws, own) = (
            base.join("home"),
            base.join("home/ws"),
            base.join("etc/steward"),
        );
        for d in [&ws, &own] {
            std::fs::create_dir_all(d).unwrap();
        }
        let data = base.join("data");
        let roots = [ws.clone()];
        let table = [
            (
                own.join("config.toml"),
                vec![own.clone(), own.join("config.toml")],
            ),
            (home.join("steward.toml"), vec![home.join("steward.toml")]),
            (ws.join("steward.toml"), vec![ws.join("steward.toml")]),
        ];
        for (config, wanted) in table {
            let denied = denied_paths(&data, Some(&config), Some(&home), &roots);
            for path in &wanted {
                assert!(denied.contains(path), "{}: {denied:?}", config.display());
            }
            assert!(
                !denied.contains(&home) && !denied.contains(&ws),
                "{denied:?}"
            );
        }
    }
}

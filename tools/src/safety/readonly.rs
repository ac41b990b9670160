//! The read-only allowlist behind default deny: a simple command is `safe` only when its
//! program is listed here and used with options known not to write, run other programs or
//! change the system. Anything else is at least dangerous — an unknown program is not
//! assumed harmless (the reason a blocklist lost to the shell's combinatorics).
//!
//! Decided here:
//! - Programs are judged by their basename, and only when named bare or from a system
//!   directory (`/usr/bin/ls`); `./ls` is the workspace's own program and runs its code.
//! - `PROGRAM --help` and `PROGRAM --version` are read-only for a bare name.
//! - Options are judged by exclusion within a listed program (`sort -o`, `find -exec`,
//!   `date -s`, `rg --pre`…): each program's writing or executing options are named here.
//! - `awk` and `sed` programs written in the command are read: `system()`, pipes, output
//!   redirection, `getline` from a command, sed's `e`/`w` commands and flags make them
//!   dangerous; a program from a file (`-f`) cannot be seen and is dangerous too.

use super::lexer::Word;
use super::programs::{awk, sed};

/// Programs with no option that writes, runs another program or changes the system: any
/// arguments, also arguments only known at run time (`xargs cat`, `find -exec grep`).
pub const PURE_READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "wc",
    "nl",
    "tac",
    "rev",
    "cut",
    "paste",
    "tr",
    "fold",
    "fmt",
    "column",
    "expand",
    "unexpand",
    "comm",
    "join",
    "cmp",
    "diff",
    "diff3",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "base32",
    "base64",
    "basenc",
    "od",
    "hexdump",
    "strings",
    "stat",
    "du",
    "df",
    "ls",
    "dir",
    "vdir",
    "grep",
    "egrep",
    "fgrep",
    "zgrep",
    "zcat",
    "bzcat",
    "xzcat",
    "zstdcat",
    "lz4cat",
    "echo",
    "printf",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "pwd",
    "true",
    "false",
    "test",
    "[",
    "[[",
    "seq",
    "whoami",
    "id",
    "groups",
    "uname",
    "arch",
    "nproc",
    "tty",
    "printenv",
    "locale",
    "uptime",
    "free",
    "ps",
    "pgrep",
    "pidof",
    "which",
    "whereis",
    "type",
    "lsblk",
    "lscpu",
    "lsusb",
    "lspci",
    "lsmem",
    "lsof",
    "ss",
    "netstat",
    "vmstat",
    "iostat",
    "mpstat",
    "w",
    "who",
    "last",
    "lastlog",
    "getent",
    "blkid",
    "lsattr",
    "getfacl",
    "findmnt",
    "namei",
    "nm",
    "objdump",
    "readelf",
    "size",
    "expr",
    "factor",
    "numfmt",
    "sleep",
    "cal",
    "getconf",
    "lvs",
    "vgs",
    "pvs",
    "lvdisplay",
    "vgdisplay",
    "pvdisplay",
    "zipinfo",
    "cd",
    "pushd",
    "popd",
    "dirs",
    ":",
    "jq",
    "wait",
    "read",
    "exit",
    "return",
];

/// `parted` commands that change a disk.
pub const PARTED_CHANGES: [&str; 10] = [
    "mklabel",
    "mktable",
    "mkpart",
    "rm",
    "resizepart",
    "rescue",
    "name",
    "set",
    "toggle",
    "disk_set",
];

/// Directories a listed program may be named from.
const SYSTEM_BIN: [&str; 6] = [
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
    "/usr/local/sbin/",
];

/// The program a command word names, when it may be judged by the list (bare, or from a
/// system directory).
pub fn listed_name(word: &str) -> Option<&str> {
    if !word.contains('/') {
        return Some(word);
    }
    SYSTEM_BIN
        .iter()
        .find_map(|dir| word.strip_prefix(dir))
        .filter(|rest| !rest.contains('/') && !rest.is_empty())
}

/// Why `name args` is not known to be read-only; `None` when it is.
pub fn not_read_only(name: &str, args: &[Word]) -> Option<String> {
    let texts: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    if matches!(texts.as_slice(), ["--help"] | ["--version"]) {
        return None;
    }
    let refuse = |why: &str| Some(format!("`{name}` {why}"));
    let has = |options: &[&str]| has_option(&texts, options);
    let short = |flag: char| texts.iter().any(|t| has_short(t, flag));
    let operands = operand_count(&texts);
    match name {
        n if PURE_READERS.contains(&n) => None,
        "rg" | "ag" | "fd" | "fdfind" | "tree" | "sort" | "uniq" | "xxd" | "file" | "date"
        | "hostname" | "find" => options_of(name, &texts, operands),
        "env" if texts.iter().all(|t| *t == "-0" || *t == "--null") => None,
        "kill"
            if texts
                .iter()
                .all(|t| ["-l", "-L", "--list", "--table"].contains(t)) =>
        {
            None
        }
        "set" if texts.iter().all(|t| shell_option(t)) => None,
        "command" if matches!(texts.first(), Some(&"-v" | &"-V")) => None,
        "dd" => dd(&texts),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk(name, &texts),
        "sed" | "gsed" => sed(name, &texts),
        "git" => git(&texts),
        "systemctl" => systemctl(&texts),
        "journalctl"
            if has(&[
                "--vacuum-size",
                "--vacuum-time",
                "--vacuum-files",
                "--rotate",
                "--flush",
                "--sync",
                "--relinquish-var",
                "--smart-relinquish-var",
                "--setup-keys",
                "--update-catalog",
            ]) =>
        {
            refuse("with this option changes the journal")
        }
        "journalctl" => None,
        "dmesg"
            if has(&[
                "-c",
                "-C",
                "--clear",
                "--read-clear",
                "-D",
                "--console-off",
                "-E",
                "--console-on",
                "-n",
                "--console-level",
            ]) =>
        {
            refuse("with this option changes the kernel log")
        }
        "dmesg" => None,
        "ip" => ip(&texts),
        "fdisk" | "sfdisk" if has(&["-l", "--list", "-d", "--dump", "-J", "--json"]) => None,
        "parted"
            if has(&["-l", "--list"])
                || (texts.contains(&"print")
                    && !texts.iter().any(|t| PARTED_CHANGES.contains(t))) =>
        {
            None
        }
        "wipefs"
            if has(&["-n", "--no-act"])
                || (!short('a')
                    && !has(&["--all", "-o", "--offset", "-b", "--backup", "-f", "--force"])) =>
        {
            None
        }
        "crontab" if texts == ["-l"] => None,
        "cryptsetup"
            if matches!(
                texts.iter().find(|t| !t.starts_with('-')),
                Some(&"status" | &"luksDump" | &"isLuks")
            ) =>
        {
            None
        }
        "nvme"
            if matches!(
                texts.first(),
                Some(
                    &"list" | &"id-ctrl" | &"id-ns" | &"smart-log" | &"error-log" | &"list-subsys"
                )
            ) =>
        {
            None
        }
        "tar" => tar(&texts),
        "unzip" if has(&["-l", "-v", "-t", "-Z", "-z"]) && !has(&["-d"]) => None,
        "mount" if texts.is_empty() || texts == ["-l"] => None,
        "apt" | "apt-cache" | "pip" | "pip3" | "npm" | "pnpm" | "yarn" | "cargo" | "go"
        | "dpkg" | "dpkg-query" | "rpm" | "brew" | "gem" => package_query(name, &texts),
        _ => Some(format!("`{name}` is not a known read-only command")),
    }
}

/// Options that make an otherwise reading program write or run something.
fn options_of(name: &str, texts: &[&str], operands: usize) -> Option<String> {
    let refuse = |why: &str| Some(format!("`{name}` {why}"));
    let any = |options: &[&str]| has_option(texts, options);
    match name {
        "rg" if any(&["--pre"]) => refuse("--pre runs a program on every file"),
        "tree" if any(&["-o", "--output"]) => refuse("-o writes a file"),
        "fd" | "fdfind" if any(&["-x", "--exec", "-X", "--exec-batch"]) => {
            refuse("-x runs a command on every file")
        }
        "sort"
            if any(&["--output", "--compress-program"])
                || texts
                    .iter()
                    .any(|t| t.starts_with("-o") || t.starts_with("--compress-prog")) =>
        {
            refuse("with -o writes a file, with --compress-program runs one")
        }
        "uniq" | "xxd" if operands > 1 => refuse("writes its second operand"),
        "xxd" if any(&["-r", "-revert"]) && operands > 1 => refuse("-r writes a file"),
        "file" if any(&["-C", "--compile"]) => refuse("-C writes a magic file"),
        "date"
            if any(&["-s", "--set"])
                || texts
                    .iter()
                    .any(|t| !t.starts_with('-') && !t.starts_with('+')) =>
        {
            refuse("sets the clock")
        }
        "hostname" if operands > 0 || any(&["-F", "--file", "-b", "--boot"]) => {
            refuse("sets the host name")
        }
        "find" => {
            const WRITES: [&str; 5] = ["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];
            const RUNS: [&str; 4] = ["-exec", "-execdir", "-ok", "-okdir"];
            texts.iter().enumerate().find_map(|(i, t)| {
                if WRITES.contains(t) {
                    return Some(format!("`find {t}` acts on every file found"));
                }
                let runs = RUNS.contains(t);
                let program = texts.get(i + 1).and_then(|p| listed_name(p));
                (runs && !program.is_some_and(|p| PURE_READERS.contains(&p)))
                    .then(|| format!("`find {t}` runs a program that is not known to only read"))
            })
        }
        _ => None,
    }
}

/// The queries of package managers (`apt list`, `pip show`, `npm ls`, `cargo tree`).
fn package_query(name: &str, texts: &[&str]) -> Option<String> {
    let verb = texts.iter().find(|t| !t.starts_with('-')).copied();
    let queries: &[&str] = match name {
        "apt" => &["list", "search", "show", "policy", "depends", "rdepends"],
        "apt-cache" => &["search", "show", "policy", "depends", "rdepends", "showpkg"],
        "pip" | "pip3" => &["list", "show", "freeze", "check"],
        "npm" | "pnpm" | "yarn" => &["ls", "list", "view", "info", "outdated", "why"],
        "cargo" => &["tree", "metadata", "locate-project", "pkgid", "search"],
        "go" => &["version", "env", "list", "doc"],
        "brew" => &["list", "info", "search", "outdated", "deps"],
        "gem" => &["list", "search", "info", "contents"],
        _ => &[],
    };
    let flags_only = match name {
        "dpkg" => texts.iter().all(|t| {
            [
                "-l",
                "--list",
                "-L",
                "--listfiles",
                "-s",
                "--status",
                "-S",
                "--search",
            ]
            .contains(t)
                || !t.starts_with('-')
        }),
        "dpkg-query" => true,
        "rpm" => texts.first().is_some_and(|t| t.starts_with("-q")),
        _ => false,
    };
    let query = verb.is_some_and(|v| queries.contains(&v)) && !texts.contains(&"--write-out");
    (!query && !flags_only).then(|| format!("`{name} {}` is not a query", verb.unwrap_or("")))
}

/// `dd` reads when it writes only to standard output or `/dev/null`.
fn dd(texts: &[&str]) -> Option<String> {
    match texts.iter().find_map(|t| t.strip_prefix("of=")) {
        None | Some("/dev/null") => None,
        Some(target) => Some(format!("`dd` writes {target}")),
    }
}

fn tar(texts: &[&str]) -> Option<String> {
    let listing = texts.first().is_some_and(|mode| {
        (!mode.starts_with("--") && mode.trim_start_matches('-').contains('t')) || *mode == "--list"
    }) || texts.iter().any(|t| *t == "--list" || *t == "-t");
    let extracts = texts.iter().any(|t| {
        (!t.starts_with("--")
            && t.trim_start_matches('-')
                .chars()
                .any(|c| "xcruA".contains(c))
            && t.len() < 8
            && texts.first() == Some(t))
            || [
                "--extract",
                "--get",
                "--create",
                "--append",
                "--update",
                "--delete",
            ]
            .contains(t)
    });
    let runs = texts.iter().any(|t| {
        [
            "--to-command",
            "--use-compress-program",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "-I",
            "-F",
        ]
        .iter()
        .any(|o| t.starts_with(o))
    });
    (!listing || extracts || runs).then(|| "`tar` that does not only list".to_owned())
}

/// `ip` shows when its verb is missing or `show`/`list`.
fn ip(texts: &[&str]) -> Option<String> {
    let words: Vec<&&str> = texts.iter().filter(|t| !t.starts_with('-')).collect();
    match words.get(1) {
        None => None,
        Some(&&("show" | "list" | "ls" | "get" | "help")) => None,
        Some(verb) => Some(format!("`ip … {verb}` changes the network")),
    }
}

fn systemctl(texts: &[&str]) -> Option<String> {
    const SHOWS: [&str; 15] = [
        "status",
        "show",
        "cat",
        "list-units",
        "list-unit-files",
        "list-timers",
        "list-sockets",
        "list-dependencies",
        "list-jobs",
        "list-machines",
        "is-active",
        "is-enabled",
        "is-failed",
        "is-system-running",
        "help",
    ];
    match texts.iter().find(|t| !t.starts_with('-')) {
        None => None,
        Some(verb) if SHOWS.contains(verb) => None,
        Some(verb) => Some(format!("`systemctl {verb}` changes the system")),
    }
}

/// The git subcommands that only read, each without its writing options.
fn git(texts: &[&str]) -> Option<String> {
    let mut at = 0;
    while let Some(option) = texts.get(at) {
        match *option {
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => at += 2,
            "--no-pager"
            | "--no-replace-objects"
            | "--bare"
            | "--literal-pathspecs"
            | "--no-optional-locks"
            | "-P" => at += 1,
            o if o.starts_with("--git-dir=") || o.starts_with("--work-tree=") => at += 1,
            o if o.starts_with('-') => {
                return Some(format!("`git {o}` may set what git runs"));
            }
            _ => break,
        }
    }
    // `git` alone prints its help.
    let sub = texts.get(at)?;
    let rest = &texts[at + 1..];
    let with = |options: &[&str]| has_option(rest, options);
    let plain_operands = rest.iter().filter(|t| !t.starts_with('-')).count();
    let refuse = |why: &str| Some(format!("`git {sub}` {why}"));
    match *sub {
        "status" | "show" | "rev-parse" | "ls-files" | "ls-tree" | "cat-file" | "blame"
        | "shortlog" | "describe" | "grep" | "whatchanged" | "name-rev" | "merge-base"
        | "count-objects" | "verify-commit" | "verify-tag" | "check-ignore" | "check-attr"
        | "show-ref" | "for-each-ref" | "rev-list" | "ls-remote" | "help" | "version" | "log"
        | "diff" => {
            if with(&["--output", "--ext-diff", "-O", "--open-files-in-pager"]) {
                refuse("with this option writes a file or runs a program")
            } else {
                None
            }
        }
        "branch"
            if plain_operands == 0
                && !with(&[
                    "-d",
                    "-D",
                    "--delete",
                    "-m",
                    "-M",
                    "--move",
                    "-c",
                    "-C",
                    "--copy",
                    "-u",
                    "--set-upstream-to",
                    "--unset-upstream",
                    "--edit-description",
                    "-f",
                    "--force",
                ]) =>
        {
            None
        }
        "tag" if plain_operands == 0 && !with(&["-d", "--delete", "-f", "--force"]) => None,
        "tag" if with(&["-l", "--list"]) => None,
        "remote"
            if rest.is_empty()
                || rest == ["-v"]
                || matches!(rest.first(), Some(&"get-url" | &"show")) =>
        {
            None
        }
        "stash" if matches!(rest.first(), Some(&"list" | &"show")) => None,
        "reflog" if rest.is_empty() || rest.first() == Some(&"show") => None,
        "config"
            if with(&[
                "--get",
                "--get-all",
                "--get-regexp",
                "--list",
                "-l",
                "--show-origin",
            ]) && !with(&[
                "--add",
                "--unset",
                "--unset-all",
                "--replace-all",
                "--edit",
                "-e",
            ]) =>
        {
            None
        }
        _ => refuse("changes the repository or runs other programs"),
    }
}

/// `set` with options only (`set -euo pipefail`).
fn shell_option(text: &str) -> bool {
    const NAMES: [&str; 8] = [
        "pipefail",
        "errexit",
        "nounset",
        "xtrace",
        "-o",
        "+o",
        "noglob",
        "noclobber",
    ];
    NAMES.contains(&text)
        || ((text.starts_with('-') || text.starts_with('+'))
            && text.len() > 1
            && text[1..].chars().all(|c| "euxvfCo".contains(c)))
}

/// Whether one of `options` is given, as itself or, for a long one, as `--name=value`.
fn has_option(texts: &[&str], options: &[&str]) -> bool {
    texts.iter().any(|t| {
        options.iter().any(|o| {
            t == o
                || (o.starts_with("--")
                    && t.strip_prefix(o).is_some_and(|rest| rest.starts_with('=')))
        })
    })
}

/// A short option cluster (`-rf`) that contains `flag`.
pub(super) fn has_short(text: &str, flag: char) -> bool {
    text.starts_with('-') && !text.starts_with("--") && text[1..].contains(flag)
}

fn operand_count(texts: &[&str]) -> usize {
    let mut count = 0;
    let mut options_over = false;
    for text in texts {
        if !options_over && *text == "--" {
            options_over = true;
        } else if options_over || !text.starts_with('-') || *text == "-" {
            count += 1;
        }
    }
    count
}

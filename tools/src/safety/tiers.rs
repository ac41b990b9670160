//! Command tiers for the shell tool: every simple command a script could run — inside
//! pipelines, lists, subshells, substitutions, here-documents, `sh -c` strings, `eval`, and
//! behind wrappers (`sudo`, `env`, `time`, `nice`, `timeout`, `xargs`, `find -exec` …) — is
//! classified, and the script gets the worst tier found:
//!
//! - **catastrophic**: blocked with the reason, never offered for confirmation (`rm -rf /`,
//!   `mkfs`, `dd of=/dev/sda`, fork bombs, recursive `chmod` of `/`, writes to `/etc` or into
//!   `.git/hooks`);
//! - **dangerous**: needs the owner's confirmation — everything that is not known to only
//!   read (default deny): any write, any program not on the read-only list
//!   ([`super::readonly`]), any wrapper that runs a program as someone else or out of sight
//!   (`sudo`, `unshare`, `script`, `tmux`…), any shell or interpreter fed code that is not
//!   in the command, settings smuggled in through the environment (`LD_PRELOAD=`,
//!   `GIT_SSH_COMMAND=`), reads of secrets (`~/.ssh`, `~/.gnupg`, …);
//! - **safe**: every simple command is a listed read-only program used with read-only
//!   options (`ls`, `grep -rn`, `git log`, `find . -name x`, `sh -c 'ls'`).
//!
//! Whatever cannot be parsed or is only known at run time (a command name held in a variable,
//! `eval "$x"`) is dangerous: the classifier never guesses in the permissive direction.
//! Inside a program that runs other programs (`strace -f …`, `nsenter -t 1 -m …`,
//! `tmux new -d '…'`), every tail of its arguments and every argument that reads as a
//! command is looked at for a catastrophe too, so an unknown wrapper cannot hide one.

use super::ShellContext;
use super::lexer::Word;
use super::parser::{Script, SimpleCommand, parse};
use super::paths::{
    inside_roots, is_device, is_git_hook, is_harmless_device, is_precious, is_secret, resolve,
};
use super::readonly::{self, has_short};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommandTier {
    Safe,
    Dangerous,
    Catastrophic,
}

/// The worst tier found in a script, with every reason that reached it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellVerdict {
    pub tier: CommandTier,
    pub reasons: Vec<String>,
}

impl ShellVerdict {
    fn raise(&mut self, tier: CommandTier, reason: impl Into<String>) {
        if tier > self.tier {
            self.tier = tier;
            self.reasons.clear();
        }
        if tier == self.tier && tier != CommandTier::Safe {
            let reason = reason.into();
            if !self.reasons.contains(&reason) {
                self.reasons.push(reason);
            }
        }
    }
}

/// How deep `sh -c "eval '…'"` nesting is followed before giving up (as dangerous).
const MAX_DEPTH: usize = 8;
/// How many wrappers and nested commands are followed (`sudo nice env … rm`).
const MAX_NESTING: usize = 32;
/// How many command lines the search for hidden catastrophes may classify for one
/// command: it bounds the work a hostile command can cause (each tail of each runner's
/// arguments is one), far above what any real command needs.
const HIDDEN_BUDGET: usize = 2_000;

/// Classifies a shell command line run in `ctx`.
pub fn classify_shell(source: &str, ctx: &ShellContext) -> ShellVerdict {
    let mut verdict = ShellVerdict {
        tier: CommandTier::Safe,
        reasons: Vec::new(),
    };
    Analysis::new(ctx, &mut verdict).script(source, 0);
    verdict
}

struct Analysis<'a> {
    /// Where the script runs; a `cd` in it moves the working directory for what follows.
    ctx: std::borrow::Cow<'a, ShellContext>,
    verdict: &'a mut ShellVerdict,
    /// How many times something was raised (also a reason already given): whether a
    /// command's own checks found anything.
    raised: usize,
    /// `NAME=value` set earlier in the script with a value known in the text.
    variables: std::collections::HashMap<String, String>,
    /// What is left of [`HIDDEN_BUDGET`], shared with the analyses it spawns.
    budget: std::rc::Rc<std::cell::Cell<usize>>,
}

use CommandTier::{Catastrophic, Dangerous};

const SHELLS: [&str; 8] = ["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"];
const INTERPRETERS: [&str; 14] = [
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun",
    "Rscript", "pwsh", "tclsh",
];
const DOWNLOADERS: [&str; 6] = ["curl", "wget", "fetch", "aria2c", "http", "lwp-download"];
/// Wrappers that run the rest of their arguments as a command.
const WRAPPERS: [&str; 18] = [
    "sudo", "doas", "env", "time", "nohup", "command", "builtin", "exec", "nice", "ionice",
    "timeout", "stdbuf", "setsid", "unbuffer", "xargs", "flock", "chroot", "busybox",
];

/// Programs that run other programs in ways the classifier does not follow (as another
/// user, in another namespace, under a tracer, later, in a terminal multiplexer, through an
/// editor's or a database shell's escape): always dangerous, and their arguments are looked
/// through for a catastrophe.
const RUNNERS: [&str; 42] = [
    "unshare",
    "script",
    "pkexec",
    "runuser",
    "setpriv",
    "taskset",
    "nsenter",
    "strace",
    "ltrace",
    "systemd-run",
    "parallel",
    "tmux",
    "screen",
    "toybox",
    "firejail",
    "bwrap",
    "proot",
    "gdb",
    "vim",
    "vi",
    "nvim",
    "ex",
    "ed",
    "emacs",
    "sqlite3",
    "less",
    "more",
    "man",
    "chrt",
    "cgexec",
    "schroot",
    "expect",
    "coproc",
    "nc",
    "ncat",
    "socat",
    "docker",
    "podman",
    "kubectl",
    "ssh",
    "lxc-attach",
    "machinectl",
];

/// Wrappers that run their command as it is, as the same user, in sight: the command alone
/// decides the tier (`time ls` is as safe as `ls`).
const TRANSPARENT: [&str; 8] = [
    "time", "nice", "ionice", "timeout", "stdbuf", "command", "builtin", "xargs",
];

/// Variables that only change how a program formats its output.
const HARMLESS_VARIABLES: [&str; 8] = [
    "LANG", "LANGUAGE", "TZ", "COLUMNS", "LINES", "NO_COLOR", "CLICOLOR", "TERM",
];

/// A word with its brace expansions (`{rm,-rf,~}` → `rm -rf ~`), as the shell does for an
/// unquoted word (one with no space); at most 64 words.
fn expand_braces(word: &Word) -> Vec<Word> {
    let mut done = Vec::new();
    let mut pending = vec![word.text.clone()];
    while let Some(text) = pending.pop() {
        match brace_alternatives(&text) {
            Some(alternatives) if done.len() + pending.len() + alternatives.len() <= 64 => {
                pending.extend(alternatives.into_iter().rev());
            }
            _ => done.push(Word {
                text,
                ..word.clone()
            }),
        }
    }
    done
}

/// The words the first `{a,b}` group of `text` expands to, if it has one.
fn brace_alternatives(text: &str) -> Option<Vec<String>> {
    if text.contains(' ') {
        return None;
    }
    let open = text.find('{')?;
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut close = None;
    for (i, c) in text.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            ',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let close = close?;
    if commas.is_empty() {
        return None;
    }
    let (prefix, suffix) = (&text[..open], &text[close + 1..]);
    let mut bounds = vec![open];
    bounds.extend(&commas);
    bounds.push(close);
    Some(
        bounds
            .windows(2)
            .map(|w| format!("{prefix}{}{suffix}", &text[w[0] + 1..w[1]]))
            .collect(),
    )
}

fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

fn texts(words: &[Word]) -> Vec<&str> {
    words.iter().map(|w| w.text.as_str()).collect()
}

/// Arguments that are not options (everything after `--` counts as one).
fn operands(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut options_over = false;
    for arg in args {
        if !options_over && arg.text == "--" {
            options_over = true;
        } else if options_over || !arg.text.starts_with('-') || arg.text == "-" {
            out.push(arg);
        }
    }
    out
}

impl<'a> Analysis<'a> {
    fn new(ctx: &'a ShellContext, verdict: &'a mut ShellVerdict) -> Self {
        Self {
            ctx: std::borrow::Cow::Borrowed(ctx),
            verdict,
            raised: 0,
            variables: Default::default(),
            budget: std::rc::Rc::new(std::cell::Cell::new(HIDDEN_BUDGET)),
        }
    }

    fn raise(&mut self, tier: CommandTier, reason: impl Into<String>) {
        self.raised += 1;
        self.verdict.raise(tier, reason);
    }

    /// Whether `argv` (or `source`, when it is given) would be catastrophic on its own —
    /// for what a runner hides in its arguments; its reasons.
    fn catastrophe_in(&self, argv: &[Word], source: Option<&str>, depth: usize) -> Vec<String> {
        let left = self.budget.get();
        if left == 0 {
            return Vec::new();
        }
        self.budget.set(left - 1);
        let mut verdict = ShellVerdict {
            tier: CommandTier::Safe,
            reasons: Vec::new(),
        };
        let mut inner = Analysis::new(&self.ctx, &mut verdict);
        inner.variables = self.variables.clone();
        inner.budget = self.budget.clone();
        match source {
            Some(source) => inner.script(source, depth + 1),
            None => inner.argv(argv, depth + 1, false),
        }
        if verdict.tier == Catastrophic {
            verdict.reasons
        } else {
            Vec::new()
        }
    }

    /// Looks through the arguments of a program that runs other programs for a catastrophe:
    /// each tail (`strace -f rm -rf /`) and each argument that reads as a command line
    /// (`tmux new -d 'rm -rf ~'`).
    fn hidden_catastrophes(&mut self, args: &[Word], depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        for start in 0..args.len() {
            let mut found = self.catastrophe_in(&args[start..], None, depth);
            let arg = &args[start];
            if found.is_empty() && !arg.dynamic && arg.text.contains(' ') {
                // An editor's or a database shell's escape: `!cmd`, `:!cmd`, `shell cmd`.
                let text = arg.text.trim_start();
                let command = [
                    "!", ":!", ":shell ", "shell ", ".shell ", ".system ", "system ",
                ]
                .iter()
                .find_map(|escape| text.strip_prefix(escape))
                .unwrap_or(text);
                found = self.catastrophe_in(&[], Some(command), depth);
            }
            if !found.is_empty() {
                for reason in found {
                    self.raise(Catastrophic, reason);
                }
                return;
            }
        }
    }

    fn script(&mut self, source: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.raise(Dangerous, "commands nested too deeply to check");
            return;
        }
        let script = match parse(source) {
            Ok(script) => script,
            Err(e) => {
                self.raise(Dangerous, format!("cannot parse the command ({e})"));
                return;
            }
        };
        for substitution in &script.substitutions {
            self.script(substitution, depth + 1);
        }
        self.fork_bombs(&script);
        if let Some(function) = script.commands.iter().find_map(|c| c.in_function.as_ref()) {
            self.raise(
                Dangerous,
                format!("defines the shell function `{function}`, which can stand for any command"),
            );
        }
        self.download_pipelines(&script);
        for command in &script.commands {
            for (op, target) in &command.redirects {
                let writes = op.contains('>')
                    && !(op.ends_with(">&")
                        && target.text.chars().all(|c| c.is_ascii_digit() || c == '-'));
                if writes {
                    let target = self.known(target);
                    self.write_target(&target);
                }
            }
            self.assignments(command);
            self.change_directory(command);
            let argv: Vec<Word> = command
                .argv
                .iter()
                .flat_map(|word| expand_braces(&self.known(word)))
                .collect();
            self.argv(&argv, depth, false);
        }
    }

    /// Environment set for one command (`LD_PRELOAD=x ls`) may change what it runs; a
    /// standalone assignment (`X=/`) is remembered for the words that use it later.
    fn assignments(&mut self, command: &SimpleCommand) {
        for assignment in &command.assignments {
            let Some((name, value)) = assignment.text.split_once('=') else {
                continue;
            };
            if command.argv.is_empty() {
                if assignment.dynamic {
                    self.variables.remove(name);
                } else {
                    self.variables.insert(name.to_owned(), value.to_owned());
                }
            } else if !HARMLESS_VARIABLES.contains(&name) && !name.starts_with("LC_") {
                self.raise(
                    Dangerous,
                    format!("sets {name} for the command, which can change what it runs"),
                );
            }
        }
    }

    /// `cd DIR` with a directory known in the text: later relative paths resolve there
    /// (`cd / && rm -rf *` is `rm -rf /*`).
    fn change_directory(&mut self, command: &SimpleCommand) {
        let [name, dir] = command.argv.as_slice() else {
            return;
        };
        if !matches!(name.text.as_str(), "cd" | "pushd") || dir.dynamic {
            return;
        }
        let dir = self.known(dir);
        if let Some(path) = resolve(&dir.text, &self.ctx) {
            self.ctx.to_mut().roots.insert(0, path);
        }
    }

    /// `word` with `$NAME` / `${NAME}` replaced where the script set NAME to a known value.
    fn known(&self, word: &Word) -> Word {
        if !word.dynamic || self.variables.is_empty() {
            return word.clone();
        }
        let mut text = word.text.clone();
        for (name, value) in &self.variables {
            text = text
                .replace(&format!("${{{name}}}"), value)
                .replace(&format!("${name}"), value);
        }
        let dynamic = text.contains('$') || !word.substitutions.is_empty();
        Word {
            text,
            dynamic,
            substitutions: word.substitutions.clone(),
        }
    }

    fn fork_bombs(&mut self, script: &Script) {
        for command in &script.commands {
            let Some(function) = &command.in_function else {
                continue;
            };
            let calls_itself = command.argv.first().is_some_and(|w| &w.text == function);
            let in_pipeline = script
                .commands
                .iter()
                .filter(|c| c.pipeline == command.pipeline)
                .count()
                > 1;
            let self_calls = script
                .commands
                .iter()
                .filter(|c| {
                    c.in_function.as_ref() == Some(function)
                        && c.argv.first().is_some_and(|w| &w.text == function)
                })
                .count();
            if calls_itself && (in_pipeline || command.background || self_calls > 1) {
                self.raise(
                    Catastrophic,
                    format!("fork bomb: function `{function}` multiplies itself"),
                );
            }
        }
    }

    fn download_pipelines(&mut self, script: &Script) {
        let commands: &[SimpleCommand] = &script.commands;
        for (i, command) in commands.iter().enumerate() {
            let Some(name) = effective_name(&command.argv) else {
                continue;
            };
            if !DOWNLOADERS.contains(&name) {
                continue;
            }
            let runs_it = commands[i + 1..]
                .iter()
                .filter(|c| c.pipeline == command.pipeline)
                .any(|c| {
                    effective_name(&c.argv)
                        .is_some_and(|n| SHELLS.contains(&n) || INTERPRETERS.contains(&n))
                });
            if runs_it {
                self.raise(
                    Dangerous,
                    format!(
                        "pipes a download ({name}) into an interpreter: runs code from the network"
                    ),
                );
            }
        }
        // Whatever feeds a shell through a pipe (`echo … | sh`, `base64 -d … | bash`) is code
        // that was never looked at.
        for command in commands.iter().filter(|c| c.position > 0) {
            let line = peel(&command.argv);
            let Some(name) = line.first().map(|w| basename(&w.text)) else {
                continue;
            };
            let reads_stdin = operands(&line[1..]).is_empty()
                && !line[1..]
                    .iter()
                    .any(|a| a.text == "-c" || a.text == "-e" || has_short(&a.text, 'c'));
            if (SHELLS.contains(&name) || INTERPRETERS.contains(&name)) && reads_stdin {
                self.raise(Dangerous, format!("{name} runs commands read from a pipe"));
            }
        }
    }

    /// Classifies one command line; `unknown_args` when more arguments arrive at run time
    /// (`xargs`, `find -exec`).
    fn argv(&mut self, argv: &[Word], depth: usize, unknown_args: bool) {
        let Some(first) = argv.first() else { return };
        if depth > MAX_NESTING {
            self.raise(
                Dangerous,
                "wrappers and commands nested too deeply to check",
            );
            return;
        }
        if first.dynamic {
            self.raise(
                Dangerous,
                format!(
                    "the command name `{}` is only known at run time",
                    first.text
                ),
            );
            return;
        }
        let name = basename(&first.text);
        let args = &argv[1..];
        let listed = readonly::listed_name(&first.text);
        if listed.is_some() && matches!(texts(args).as_slice(), ["--help"] | ["--version"]) {
            return;
        }
        if WRAPPERS.contains(&name) {
            return self.wrapper(name, args, depth, unknown_args);
        }
        if RUNNERS.contains(&name) {
            self.raise(
                Dangerous,
                format!("`{name}` runs other programs, out of the classifier's sight"),
            );
            return self.hidden_catastrophes(args, depth);
        }
        if SHELLS.contains(&name) {
            return self.shell(name, args, depth);
        }
        if INTERPRETERS.contains(&name) {
            return self.interpreter(name, args);
        }
        let mark = self.raised;
        self.program(name, args, depth, unknown_args);
        if self.raised == mark {
            self.read_only_or_not(&first.text, listed, args, unknown_args);
        }
    }

    /// Default deny: a command nothing above objected to is still dangerous unless it is a
    /// listed read-only program used with read-only options, reading no secret.
    fn read_only_or_not(
        &mut self,
        written: &str,
        listed: Option<&str>,
        args: &[Word],
        unknown_args: bool,
    ) {
        let Some(name) = listed else {
            self.raise(
                Dangerous,
                format!("`{written}` is a program of its own, not a known read-only command"),
            );
            return;
        };
        if let Some(reason) = readonly::not_read_only(name, args) {
            self.raise(Dangerous, reason);
        } else if unknown_args && !readonly::PURE_READERS.contains(&name) {
            self.raise(
                Dangerous,
                format!("`{name}` is given arguments only known at run time"),
            );
        } else if let Some(secret) = args.iter().find(|a| is_secret(&a.text, &self.ctx)) {
            self.raise(
                Dangerous,
                format!(
                    "reads a secret ({}), which would leave the machine in the answer",
                    secret.text
                ),
            );
        }
    }

    /// The checks of a particular program (deletion, permissions, git, packages…).
    fn program(&mut self, name: &str, args: &[Word], depth: usize, unknown_args: bool) {
        if self.runs_other_code(name, args, depth) || self.changes_the_system(name, args) {
            return;
        }
        match name {
            "rm" => self.rm(args, unknown_args),
            "chmod" | "chown" | "chgrp" => self.permissions(name, args),
            "dd" => self.dd(args),
            "git" => self.git(args),
            "find" => self.find(args, depth),
            "tee" => {
                for target in operands(args) {
                    self.write_target(target);
                }
            }
            "cp" | "mv" | "install" => {
                let targets = operands(args);
                if name == "mv" {
                    let sources = if option_value(args, "-t", "--target-directory").is_some() {
                        &targets[..]
                    } else {
                        &targets[..targets.len().saturating_sub(1)]
                    };
                    for source in sources {
                        let system = resolve(&source.text, &self.ctx)
                            .is_some_and(|p| p.starts_with("/etc") || p.starts_with("/boot"));
                        if is_precious(&source.text, &self.ctx) || system || is_device(&source.text)
                        {
                            self.raise(
                                Catastrophic,
                                format!(
                                    "mv takes `{}` away from where the system needs it",
                                    source.text
                                ),
                            );
                            return;
                        }
                    }
                }
                if let Some(dir) = option_value(args, "-t", "--target-directory") {
                    self.write_target(&dir);
                } else if targets.len() >= 2 {
                    self.write_target(targets[targets.len() - 1]);
                }
            }
            "ln" => self.ln(args),
            "sed"
                if args
                    .iter()
                    .any(|a| a.text.starts_with("-i") || a.text.starts_with("--in-place")) =>
            {
                let files = operands(args);
                let has_script_option = args.iter().any(|a| a.text == "-e" || a.text == "-f");
                for file in files.iter().skip(usize::from(!has_script_option)) {
                    self.write_target(file);
                }
            }
            "touch" | "mkdir" => {
                for target in operands(args) {
                    self.write_target(target);
                }
            }
            "curl" => self.output_options(args, &["-o", "--output"], &["--output="]),
            "wget" => {
                self.output_options(args, &["-O", "--output-document"], &["--output-document="])
            }
            _ => self.packages(name, args),
        }
    }

    /// Programs that run other code (a string, a remote shell, a helper program); whether
    /// `name` was one.
    fn runs_other_code(&mut self, name: &str, args: &[Word], depth: usize) -> bool {
        match name {
            "eval" => {
                if args.iter().any(|a| a.dynamic) {
                    self.raise(Dangerous, "eval of a string only known at run time");
                } else {
                    self.script(&texts(args).join(" "), depth + 1);
                }
            }
            "watch" => {
                let rest = skip_options(args, &["-n", "--interval", "-d", "-q"]);
                if rest.iter().any(|a| a.dynamic) {
                    self.raise(Dangerous, "watch runs a command only known at run time");
                } else {
                    self.script(&texts(rest).join(" "), depth + 1);
                }
            }
            "su" => {
                self.raise(Dangerous, "runs as another user");
                let command = args
                    .iter()
                    .position(|a| a.text == "-c" || a.text == "--command")
                    .and_then(|at| args.get(at + 1));
                if let Some(command) = command {
                    self.command_string(command, depth);
                }
            }
            "sort" => {
                if args.iter().any(|a| {
                    a.text.starts_with("--compress-program")
                        || a.text.starts_with("--compress-prog")
                }) {
                    self.raise(Dangerous, "sort --compress-program runs another program");
                }
                self.output_options(args, &["-o"], &["--output="]);
            }
            "tar" => {
                let smuggles = args.iter().any(|a| {
                    [
                        "--to-command",
                        "--use-compress-program",
                        "--checkpoint-action",
                        "--info-script",
                        "--new-volume-script",
                        "--rsh-command",
                    ]
                    .iter()
                    .any(|o| a.text.starts_with(o))
                        || a.text == "-I"
                        || a.text == "-F"
                });
                if smuggles {
                    self.raise(Dangerous, "tar runs another program");
                }
                if readonly::not_read_only("tar", args).is_some() {
                    if let Some(dir) = option_value(args, "-C", "--directory") {
                        self.write_target(&dir);
                    }
                    self.raise(Dangerous, "tar writes files");
                }
            }
            "unzip" => {
                if let Some(dir) = option_value(args, "-d", "--directory") {
                    self.write_target(&dir);
                }
                return false;
            }
            "rsync" => {
                if args.iter().any(|a| {
                    a.text == "-e"
                        || a.text.starts_with("--rsh")
                        || a.text.starts_with("--rsync-path")
                }) {
                    self.raise(Dangerous, "rsync runs another program");
                }
                let destination = operands(args)
                    .last()
                    .copied()
                    .filter(|_| operands(args).len() >= 2);
                if let Some(destination) = destination.filter(|d| !d.text.contains(':')) {
                    if args.iter().any(|a| a.text.starts_with("--delete"))
                        && is_precious(&destination.text, &self.ctx)
                    {
                        self.raise(
                            Catastrophic,
                            format!("rsync --delete into `{}` empties it", destination.text),
                        );
                        return true;
                    }
                    self.write_target(destination);
                }
                self.raise(Dangerous, "rsync writes its destination");
            }
            "zip" => {
                if args
                    .iter()
                    .any(|a| a.text == "-TT" || a.text.starts_with("--unzip-command"))
                {
                    self.raise(Dangerous, "zip runs another program");
                }
            }
            _ => return false,
        }
        true
    }

    /// Programs that destroy disks, stop the machine or change its configuration; whether
    /// `name` was one.
    fn changes_the_system(&mut self, name: &str, args: &[Word]) -> bool {
        match name {
            "wipefs" | "fdisk" | "sfdisk" | "parted"
                if readonly::not_read_only(name, args).is_none() =>
            {
                // Listing (`fdisk -l`, `parted -l`, `wipefs /dev/sda`): read-only.
                return false;
            }
            "mkfs" | "mke2fs" | "mkswap" | "mkntfs" | "mkdosfs" | "mkexfatfs" | "wipefs"
            | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "gdisk" | "sgdisk" | "blkdiscard" => {
                self.raise(
                    Catastrophic,
                    format!("{name} destroys file systems or partitions"),
                );
            }
            "lvremove" | "vgremove" | "pvremove" => {
                self.raise(Catastrophic, format!("{name} destroys logical volumes"));
            }
            "cryptsetup"
                if args.iter().any(|a| {
                    [
                        "luksFormat",
                        "erase",
                        "luksErase",
                        "luksKillSlot",
                        "reencrypt",
                    ]
                    .contains(&a.text.as_str())
                }) =>
            {
                self.raise(
                    Catastrophic,
                    "cryptsetup destroys an encrypted volume's keys",
                );
            }
            "nvme"
                if args
                    .iter()
                    .any(|a| a.text == "format" || a.text == "sanitize") =>
            {
                self.raise(Catastrophic, "nvme format/sanitize erases a drive");
            }
            "zpool" | "zfs"
                if args
                    .iter()
                    .any(|a| a.text == "destroy" || a.text == "labelclear") =>
            {
                self.raise(
                    Catastrophic,
                    format!("{name} destroy removes a pool or data set"),
                );
            }
            n if n.starts_with("mkfs.") => {
                self.raise(Catastrophic, format!("{n} destroys a file system"));
            }
            "shred" => {
                if args.iter().any(|a| is_device(&a.text)) {
                    self.raise(Catastrophic, "shred of a disk device");
                } else {
                    self.raise(Dangerous, "shred destroys file contents");
                }
            }
            "truncate" => self.raise(Dangerous, "truncate discards file contents"),
            "shutdown" | "reboot" | "halt" | "poweroff" | "telinit" => {
                self.raise(Dangerous, format!("{name} stops or restarts the machine"));
            }
            "init" if args.iter().any(|a| a.text == "0" || a.text == "6") => {
                self.raise(Dangerous, "init 0/6 stops or restarts the machine");
            }
            "systemctl" => {
                const CHANGES: [&str; 13] = [
                    "poweroff",
                    "reboot",
                    "halt",
                    "kexec",
                    "suspend",
                    "hibernate",
                    "stop",
                    "disable",
                    "mask",
                    "kill",
                    "isolate",
                    "rescue",
                    "emergency",
                ];
                if let Some(a) = args.iter().find(|a| CHANGES.contains(&a.text.as_str())) {
                    self.raise(
                        Dangerous,
                        format!(
                            "systemctl {} changes running services or the machine",
                            a.text
                        ),
                    );
                }
            }
            "service" if args.iter().any(|a| a.text == "stop" || a.text == "restart") => {
                self.raise(Dangerous, "stops or restarts a service");
            }
            "kill" if readonly::not_read_only(name, args).is_none() => return false,
            "mount" if args.is_empty() => return false,
            "kill" | "pkill" | "killall" => {
                if name == "kill" && args.last().is_some_and(|a| a.text == "-1") && args.len() >= 2
                {
                    self.raise(Catastrophic, "kill -1 signals every process");
                } else {
                    self.raise(Dangerous, format!("{name} stops processes"));
                }
            }
            "killall5" => self.raise(Catastrophic, "killall5 signals every process"),
            "crontab" if !args.iter().any(|a| a.text == "-l") => {
                self.raise(Dangerous, "changes scheduled jobs")
            }
            "at" | "batch" => self.raise(Dangerous, "schedules commands to run later"),
            "mount" | "umount" | "swapon" | "swapoff" | "modprobe" | "insmod" | "rmmod"
            | "iptables" | "ip6tables" | "nft" | "ufw" | "useradd" | "userdel" | "usermod"
            | "groupadd" | "groupdel" | "passwd" | "chpasswd" | "visudo" | "chattr"
            | "setenforce" => {
                self.raise(Dangerous, format!("{name} changes the system"));
            }
            "sysctl" if args.iter().any(|a| a.text == "-w" || a.text.contains('=')) => {
                self.raise(Dangerous, "sysctl changes kernel settings");
            }
            _ => return false,
        }
        true
    }

    fn wrapper(&mut self, name: &str, args: &[Word], depth: usize, unknown_args: bool) {
        let plain_env = name == "env"
            && args
                .first()
                .is_none_or(|a| !a.text.starts_with('-') && !a.text.contains('='));
        if !TRANSPARENT.contains(&name) && !plain_env && !matches!(name, "sudo" | "doas" | "chroot")
        {
            self.raise(
                Dangerous,
                format!("`{name}` changes how or where the command runs"),
            );
        }
        let mark = self.verdict.tier;
        self.wrapped(name, args, depth, unknown_args);
        if self.verdict.tier < Catastrophic && mark < Catastrophic {
            self.hidden_catastrophes(args, depth);
        }
    }

    /// The command a wrapper runs, classified.
    fn wrapped(&mut self, name: &str, args: &[Word], depth: usize, unknown_args: bool) {
        let rest: &[Word] = match name {
            "sudo" | "doas" => {
                self.raise(Dangerous, format!("{name} runs the command as root"));
                skip_options(
                    args,
                    &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
                )
            }
            "env" => {
                if let Some(split) = option_value(args, "-S", "--split-string") {
                    if split.dynamic {
                        self.raise(Dangerous, "env -S runs a string only known at run time");
                    } else {
                        self.script(&split.text, depth + 1);
                    }
                    return;
                }
                let rest = skip_options(args, &["-u", "--unset", "-C", "--chdir"]);
                let assignments = rest
                    .iter()
                    .take_while(|w| w.text.contains('=') && !w.text.starts_with('='))
                    .count();
                &rest[assignments..]
            }
            "command"
                if args
                    .first()
                    .is_some_and(|a| a.text == "-v" || a.text == "-V") =>
            {
                return;
            }
            "nice" => skip_options(args, &["-n", "--adjustment"]),
            "ionice" => skip_options(args, &["-c", "-n", "-p", "-P", "-u"]),
            "timeout" => {
                let rest = skip_options(args, &["-s", "--signal", "-k", "--kill-after"]);
                rest.get(1..).unwrap_or_default()
            }
            "stdbuf" => skip_options(args, &["-i", "-o", "-e"]),
            "flock" => {
                let rest = skip_options(args, &["-w", "--timeout", "-E", "--conflict-exit-code"]);
                rest.get(1..).unwrap_or_default()
            }
            "chroot" => {
                self.raise(Dangerous, "chroot runs a command in another root");
                let rest = skip_options(args, &["--userspec", "--groups"]);
                rest.get(1..).unwrap_or_default()
            }
            "xargs" => {
                let rest = skip_options(
                    args,
                    &[
                        "-n",
                        "-I",
                        "-P",
                        "-d",
                        "-L",
                        "-s",
                        "-a",
                        "-E",
                        "--max-args",
                        "--max-procs",
                        "--delimiter",
                        "--arg-file",
                        "--replace",
                    ],
                );
                return self.argv(rest, depth + 1, true);
            }
            // time, nohup, builtin, exec, setsid, unbuffer, busybox
            _ => skip_options(args, &["-a"]),
        };
        self.argv(rest, depth + 1, unknown_args);
    }

    fn shell(&mut self, name: &str, args: &[Word], depth: usize) {
        // `-c` alone or in a cluster (`-ec`, `-lc`): the first operand is the command string.
        let command_flag = args
            .iter()
            .position(|a| a.text == "-c" || (has_short(&a.text, 'c') && !a.text.contains('o')));
        if let Some(at) = command_flag {
            match args[at + 1..].iter().find(|a| !a.text.starts_with('-')) {
                Some(command) => self.command_string(command, depth),
                None => self.raise(Dangerous, format!("{name} -c without a command")),
            }
            return;
        }
        match operands(args).first() {
            Some(script) if script.dynamic => self.raise(
                Dangerous,
                format!("{name} runs a script produced at run time"),
            ),
            Some(script) => self.raise(
                Dangerous,
                format!(
                    "{name} runs the script {}, which is not in the command",
                    script.text
                ),
            ),
            None => self.raise(
                Dangerous,
                format!("{name} runs commands it reads at run time"),
            ),
        }
    }

    fn command_string(&mut self, command: &Word, depth: usize) {
        if command.dynamic && !command.substitutions.is_empty() {
            self.raise(Dangerous, "runs a command string produced at run time");
        } else if command.dynamic {
            self.raise(
                Dangerous,
                format!(
                    "runs a command string with run-time values ({})",
                    command.text
                ),
            );
            self.script(&command.text, depth + 1);
        } else {
            self.script(&command.text, depth + 1);
        }
    }

    fn interpreter(&mut self, name: &str, args: &[Word]) {
        let inline = args.iter().any(|a| {
            matches!(
                a.text.as_str(),
                "-c" | "-e" | "-E" | "-r" | "--eval" | "-p" | "--print" | "-x"
            ) || (name.starts_with("python") && has_short(&a.text, 'c'))
                || (name == "perl" && (has_short(&a.text, 'e') || has_short(&a.text, 'E')))
        });
        if inline {
            self.raise(
                Dangerous,
                format!("runs inline {name} code that cannot be checked"),
            );
        } else if operands(args).first().is_some_and(|w| w.dynamic) {
            self.raise(
                Dangerous,
                format!("{name} runs a script produced at run time"),
            );
        } else {
            self.raise(
                Dangerous,
                format!("{name} runs code the classifier cannot read"),
            );
        }
    }

    fn rm(&mut self, args: &[Word], unknown_args: bool) {
        let recursive = args
            .iter()
            .any(|a| has_short(&a.text, 'r') || has_short(&a.text, 'R') || a.text == "--recursive");
        if args.iter().any(|a| a.text == "--no-preserve-root") {
            self.raise(Catastrophic, "rm --no-preserve-root");
            return;
        }
        for target in operands(args) {
            if recursive && is_precious(&target.text, &self.ctx) {
                self.raise(
                    Catastrophic,
                    format!(
                        "rm -r of `{}` destroys the system or a home directory",
                        target.text
                    ),
                );
                return;
            }
        }
        if recursive {
            self.raise(Dangerous, "rm -r deletes directory trees");
        } else if unknown_args {
            self.raise(Dangerous, "rm of files chosen at run time");
        } else {
            self.raise(Dangerous, "rm deletes files");
        }
    }

    fn permissions(&mut self, name: &str, args: &[Word]) {
        let recursive = args
            .iter()
            .any(|a| has_short(&a.text, 'R') || a.text == "--recursive");
        let targets: Vec<&Word> = operands(args).into_iter().skip(1).collect();
        for target in &targets {
            let system = resolve(&target.text, &self.ctx).is_some_and(|p| {
                p.starts_with("/etc") || p.starts_with("/usr") || p.starts_with("/boot")
            });
            if (recursive && is_precious(&target.text, &self.ctx)) || target.text == "/" || system {
                self.raise(
                    Catastrophic,
                    format!("{name} of system path `{}`", target.text),
                );
                return;
            }
        }
        if recursive {
            self.raise(Dangerous, format!("recursive {name}"));
        }
        for target in targets {
            if resolve(&target.text, &self.ctx).is_some_and(|p| !inside_roots(&p, &self.ctx)) {
                self.raise(
                    Dangerous,
                    format!("{name} outside the workspace (`{}`)", target.text),
                );
            }
        }
    }

    fn dd(&mut self, args: &[Word]) {
        if readonly::not_read_only("dd", args).is_none() {
            return;
        }
        for arg in args {
            if let Some(target) = arg.text.strip_prefix("of=") {
                if is_device(target) {
                    self.raise(Catastrophic, format!("dd writes to the device {target}"));
                    return;
                }
                let word = Word {
                    text: target.to_owned(),
                    ..arg.clone()
                };
                self.write_target(&word);
            }
        }
        self.raise(Dangerous, "dd overwrites data");
    }

    fn ln(&mut self, args: &[Word]) {
        let symbolic = args
            .iter()
            .any(|a| has_short(&a.text, 's') || a.text == "--symbolic");
        let operands = operands(args);
        if let Some(link) = operands.last().filter(|_| operands.len() >= 2) {
            self.write_target(link);
        }
        if symbolic {
            for target in operands
                .iter()
                .take(operands.len().saturating_sub(1).max(1))
            {
                if resolve(&target.text, &self.ctx).is_some_and(|p| !inside_roots(&p, &self.ctx)) {
                    self.raise(
                        Dangerous,
                        format!(
                            "creates a symlink out of the workspace (to `{}`)",
                            target.text
                        ),
                    );
                }
            }
        }
    }

    fn find(&mut self, args: &[Word], depth: usize) {
        let starts: Vec<&Word> = args
            .iter()
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .collect();
        let deletes = args.iter().enumerate().any(|(i, a)| {
            a.text == "-delete"
                || (matches!(a.text.as_str(), "-exec" | "-execdir")
                    && args.get(i + 1).is_some_and(|p| basename(&p.text) == "rm"))
        });
        if let Some(start) = starts.iter().find(|s| is_precious(&s.text, &self.ctx))
            && deletes
        {
            self.raise(
                Catastrophic,
                format!("find {} deletes what it finds there", start.text),
            );
            return;
        }
        let mut i = 0;
        while i < args.len() {
            match args[i].text.as_str() {
                "-delete" => self.raise(Dangerous, "find -delete deletes files"),
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = args[i + 1..]
                        .iter()
                        .position(|a| a.text == ";" || a.text == "+")
                        .map_or(args.len(), |p| i + 1 + p);
                    self.argv(&args[i + 1..end], depth, true);
                    i = end;
                }
                "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    if let Some(target) = args.get(i + 1) {
                        self.write_target(target);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn git(&mut self, args: &[Word]) {
        let i = self.git_global_options(args);
        let Some(sub) = args.get(i) else { return };
        let rest = &args[i + 1..];
        let has = |flags: &[&str]| {
            rest.iter().any(|a| {
                flags
                    .iter()
                    .any(|f| a.text == *f || (f.ends_with('=') && a.text.starts_with(f)))
            })
        };
        match sub.text.as_str() {
            "push" => {
                let refspec_force = operands(rest)
                    .iter()
                    .any(|w| w.text.starts_with('+') || w.text.starts_with(':'));
                if has(&[
                    "-f",
                    "--force",
                    "--force-with-lease",
                    "--force-with-lease=",
                    "--mirror",
                    "--delete",
                    "-d",
                    "--prune",
                ]) || refspec_force
                {
                    self.raise(
                        Dangerous,
                        "git push --force/--delete rewrites or deletes remote history",
                    );
                }
            }
            "reset" if has(&["--hard", "--merge", "--keep"]) => {
                self.raise(Dangerous, "git reset --hard discards uncommitted changes")
            }
            "clean"
                if rest
                    .iter()
                    .any(|a| has_short(&a.text, 'f') || a.text == "--force") =>
            {
                self.raise(Dangerous, "git clean -f deletes untracked files");
            }
            "checkout" if has(&["-f", "--force", "--", ".", "--ours", "--theirs"]) => {
                self.raise(Dangerous, "git checkout of paths discards local changes");
            }
            "restore" if !has(&["--staged", "-S"]) || has(&["--worktree", "-W"]) => {
                self.raise(Dangerous, "git restore discards local changes");
            }
            "switch" if has(&["-f", "--force", "--discard-changes"]) => self.raise(
                Dangerous,
                "git switch --discard-changes discards local changes",
            ),
            "branch" if has(&["-D"]) || (has(&["-d", "--delete"]) && has(&["-f", "--force"])) => {
                self.raise(Dangerous, "git branch -D deletes an unmerged branch");
            }
            "rebase" | "filter-branch" | "filter-repo" | "replace" => {
                self.raise(Dangerous, format!("git {} rewrites history", sub.text))
            }
            "stash" if has(&["drop", "clear"]) => {
                self.raise(Dangerous, "git stash drop/clear loses stashed changes")
            }
            "reflog" if has(&["expire", "delete"]) => {
                self.raise(Dangerous, "git reflog expire loses recovery points")
            }
            "gc" if has(&["--prune", "--prune="]) => {
                self.raise(Dangerous, "git gc --prune deletes unreachable objects")
            }
            "update-ref" if has(&["-d"]) => {
                self.raise(Dangerous, "git update-ref -d deletes a ref")
            }
            "config" => {
                let keys: Vec<String> = rest.iter().map(|a| a.text.to_ascii_lowercase()).collect();
                if keys.iter().any(|k| k == "core.hookspath") {
                    self.raise(
                        Catastrophic,
                        "git config core.hooksPath makes git run hooks from elsewhere",
                    );
                } else if keys.iter().any(|k| k.starts_with("alias."))
                    && rest.iter().any(|a| a.text.starts_with('!'))
                {
                    self.raise(Dangerous, "a git alias that runs a shell command");
                } else if keys.iter().any(|k| {
                    [
                        "core.pager",
                        "core.editor",
                        "core.sshcommand",
                        "core.fsmonitor",
                    ]
                    .contains(&k.as_str())
                }) {
                    self.raise(Dangerous, "git config sets a program git will run");
                }
            }
            _ => {}
        }
    }

    /// Walks git's options before the subcommand (a `-c` setting may name a program git
    /// will run); the index of the subcommand.
    fn git_global_options(&mut self, args: &[Word]) -> usize {
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            match arg.text.as_str() {
                "-C" | "--git-dir" | "--work-tree" | "--namespace" => i += 2,
                "-c" => {
                    if let Some(setting) = args.get(i + 1) {
                        let key = setting
                            .text
                            .split('=')
                            .next()
                            .unwrap_or("")
                            .to_ascii_lowercase();
                        if [
                            "core.hookspath",
                            "core.pager",
                            "core.editor",
                            "core.sshcommand",
                            "core.fsmonitor",
                            "core.askpass",
                            "credential.helper",
                            "diff.external",
                        ]
                        .contains(&key.as_str())
                            || key.starts_with("alias.")
                        {
                            self.raise(
                                Dangerous,
                                format!("git -c {key} runs a program given on the command line"),
                            );
                        }
                    }
                    i += 2;
                }
                a if a.starts_with('-') => i += 1,
                _ => break,
            }
        }
        i
    }

    fn packages(&mut self, name: &str, args: &[Word]) {
        let sub = operands(args)
            .first()
            .map(|w| w.text.as_str())
            .unwrap_or("");
        let installs = match name {
            "apt" | "apt-get" | "aptitude" | "yum" | "dnf" | "zypper" | "apk" | "brew" | "snap"
            | "flatpak" | "port" | "pkg" | "emerge" => [
                "install",
                "remove",
                "purge",
                "upgrade",
                "dist-upgrade",
                "full-upgrade",
                "autoremove",
                "add",
                "del",
                "uninstall",
                "reinstall",
                "erase",
                "in",
                "rm",
            ]
            .contains(&sub),
            "pacman" => args.iter().any(|a| {
                a.text.starts_with("-S") || a.text.starts_with("-R") || a.text.starts_with("-U")
            }),
            "pip" | "pip3" | "pipx" | "gem" | "conda" | "mamba" | "composer" => {
                ["install", "uninstall", "remove", "update", "upgrade"].contains(&sub)
            }
            "npm" | "pnpm" | "yarn" => [
                "install",
                "i",
                "add",
                "ci",
                "uninstall",
                "remove",
                "rm",
                "update",
                "upgrade",
            ]
            .contains(&sub),
            "cargo" | "go" => ["install", "uninstall", "get"].contains(&sub),
            "uv" => sub == "pip" || ["add", "remove", "tool"].contains(&sub),
            "dpkg" => args.iter().any(|a| {
                ["-i", "--install", "-r", "--remove", "-P", "--purge"].contains(&a.text.as_str())
            }),
            "rpm" => args.iter().any(|a| {
                a.text.starts_with("-i")
                    || a.text.starts_with("-U")
                    || a.text.starts_with("-e")
                    || a.text.starts_with("--install")
                    || a.text.starts_with("--upgrade")
                    || a.text.starts_with("--erase")
            }),
            "nix-env" => args
                .iter()
                .any(|a| ["-i", "--install", "-e", "--uninstall"].contains(&a.text.as_str())),
            _ => false,
        };
        if installs {
            self.raise(Dangerous, format!("{name} installs or removes packages"));
        }
    }

    /// Options that name a file the command writes.
    fn output_options(&mut self, args: &[Word], separate: &[&str], joined: &[&str]) {
        for (i, arg) in args.iter().enumerate() {
            if separate.contains(&arg.text.as_str()) {
                if let Some(target) = args.get(i + 1).filter(|t| t.text != "-") {
                    self.write_target(target);
                }
            } else if let Some(path) = joined.iter().find_map(|j| arg.text.strip_prefix(j)) {
                let word = Word {
                    text: path.to_owned(),
                    ..arg.clone()
                };
                self.write_target(&word);
            }
        }
    }

    /// A path the command writes: devices, /etc and git hooks are catastrophic, any other
    /// write dangerous (outside the workspace and /tmp said so).
    fn write_target(&mut self, target: &Word) {
        let text = target.text.as_str();
        if text.is_empty() || is_harmless_device(text) {
            return;
        }
        if is_device(text) {
            self.raise(Catastrophic, format!("writes to the device {text}"));
            return;
        }
        let Some(path) = resolve(text, &self.ctx) else {
            return;
        };
        if path.starts_with("/etc") {
            self.raise(
                Catastrophic,
                format!("writes to system configuration ({})", path.display()),
            );
        } else if is_git_hook(&path) {
            self.raise(
                Catastrophic,
                format!(
                    "writes a git hook ({}), which runs on the next git command",
                    path.display()
                ),
            );
        } else if target.dynamic
            && !text.starts_with('/')
            && !text.starts_with('~')
            && !text.starts_with("$HOME")
        {
            self.raise(
                Dangerous,
                format!("writes {text}, a path known only at run time"),
            );
        } else if !inside_roots(&path, &self.ctx) {
            self.raise(
                Dangerous,
                format!("writes outside the workspace ({})", path.display()),
            );
        } else {
            self.raise(Dangerous, format!("writes {}", path.display()));
        }
    }
}

/// Skips leading options; `with_value` options take the next argument (or `=value`).
fn skip_options<'w>(args: &'w [Word], with_value: &[&str]) -> &'w [Word] {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text.as_str();
        if text == "--" {
            return &args[i + 1..];
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        i += if with_value.contains(&text) { 2 } else { 1 };
    }
    args.get(i..).unwrap_or_default()
}

/// The value of an option given as `-x VALUE`, `--long VALUE` or `--long=VALUE`.
fn option_value(args: &[Word], short: &str, long: &str) -> Option<Word> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a.text == short || a.text == long {
            args.get(i + 1).cloned()
        } else {
            a.text
                .strip_prefix(long)
                .and_then(|rest| rest.strip_prefix('='))
                .map(|value| Word {
                    text: value.to_owned(),
                    ..a.clone()
                })
        }
    })
}

/// The command line that actually runs once wrappers are peeled off
/// (`sudo -u x bash -s` → `bash -s`).
fn peel(argv: &[Word]) -> &[Word] {
    let mut rest = argv;
    while let Some(first) = rest.first() {
        if !WRAPPERS.contains(&basename(&first.text)) {
            break;
        }
        rest = skip_options(&rest[1..], &["-u", "-g", "-n", "-c", "-s", "-k"]);
        while rest.first().is_some_and(|w| w.text.contains('=')) {
            rest = &rest[1..];
        }
    }
    rest
}

fn effective_name(argv: &[Word]) -> Option<&str> {
    peel(argv).first().map(|w| basename(&w.text))
}

//! Command tiers for the shell tool: every simple command a script could run — inside
//! pipelines, lists, subshells, substitutions, here-documents, `sh -c` strings, `eval`, and
//! behind wrappers (`sudo`, `env`, `time`, `nice`, `timeout`, `xargs`, `find -exec` …) — is
//! classified, and the script gets the worst tier found:
//!
//! - **catastrophic**: blocked with the reason, never offered for confirmation (`rm -rf /`,
//!   `mkfs`, `dd of=/dev/sda`, fork bombs, recursive `chmod` of `/`, writes to `/etc` or into
//!   `.git/hooks`);
//! - **dangerous**: needs the owner's confirmation (force pushes, hard resets, `rm`, package
//!   installs, downloads piped into a shell, writes outside the workspace, inline interpreter
//!   code, programs smuggled in through options such as `sort --compress-program`);
//! - **safe**: runs.
//!
//! Whatever cannot be parsed or is only known at run time (a command name held in a variable,
//! `eval "$x"`) is dangerous: the classifier never guesses in the permissive direction.

use super::ShellContext;
use super::lexer::Word;
use super::parser::{Script, SimpleCommand, parse};
use super::paths::{
    inside_roots, is_device, is_git_hook, is_harmless_device, is_precious, resolve,
};

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

/// Classifies a shell command line run in `ctx`.
pub fn classify_shell(source: &str, ctx: &ShellContext) -> ShellVerdict {
    let mut verdict = ShellVerdict {
        tier: CommandTier::Safe,
        reasons: Vec::new(),
    };
    Analysis {
        ctx,
        verdict: &mut verdict,
    }
    .script(source, 0);
    verdict
}

struct Analysis<'a> {
    ctx: &'a ShellContext,
    verdict: &'a mut ShellVerdict,
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

fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

fn texts(words: &[Word]) -> Vec<&str> {
    words.iter().map(|w| w.text.as_str()).collect()
}

/// A short option cluster (`-rf`) that contains `flag`.
fn has_short(arg: &str, flag: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
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

impl Analysis<'_> {
    fn raise(&mut self, tier: CommandTier, reason: impl Into<String>) {
        self.verdict.raise(tier, reason);
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
        self.download_pipelines(&script);
        for command in &script.commands {
            for (op, target) in &command.redirects {
                let writes = op.contains('>')
                    && !(op.ends_with(">&")
                        && target.text.chars().all(|c| c.is_ascii_digit() || c == '-'));
                if writes {
                    self.write_target(target);
                }
            }
            self.argv(&command.argv, depth, false);
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
            if calls_itself && in_pipeline {
                self.raise(
                    Catastrophic,
                    format!("fork bomb: function `{function}` pipes into itself"),
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
        if WRAPPERS.contains(&name) {
            return self.wrapper(name, args, depth, unknown_args);
        }
        if SHELLS.contains(&name) {
            return self.shell(name, args, depth);
        }
        if INTERPRETERS.contains(&name) {
            return self.interpreter(name, args);
        }
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
            "awk" | "gawk" | "mawk" | "nawk" => {
                let program = operands(args)
                    .first()
                    .map(|w| w.text.clone())
                    .unwrap_or_default();
                if program.contains("system")
                    || program.contains('|')
                    || program.contains("getline")
                {
                    self.raise(Dangerous, format!("the {name} program runs commands"));
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
            }
            "rsync" => {
                if args.iter().any(|a| {
                    a.text == "-e"
                        || a.text.starts_with("--rsh")
                        || a.text.starts_with("--rsync-path")
                }) {
                    self.raise(Dangerous, "rsync runs another program");
                }
            }
            "zip" => {
                if args
                    .iter()
                    .any(|a| a.text == "-TT" || a.text.starts_with("--unzip-command"))
                {
                    self.raise(Dangerous, "zip runs another program");
                }
            }
            "ssh" => self.raise(Dangerous, "runs commands on a remote host"),
            _ => return false,
        }
        true
    }

    /// Programs that destroy disks, stop the machine or change its configuration; whether
    /// `name` was one.
    fn changes_the_system(&mut self, name: &str, args: &[Word]) -> bool {
        match name {
            "mkfs" | "mke2fs" | "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "cfdisk" | "parted"
            | "gdisk" | "sgdisk" | "blkdiscard" => {
                self.raise(
                    Catastrophic,
                    format!("{name} destroys file systems or partitions"),
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
                return self.argv(rest, depth, true);
            }
            // time, nohup, builtin, exec, setsid, unbuffer, busybox
            _ => skip_options(args, &["-a"]),
        };
        self.argv(rest, depth, unknown_args);
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
        if let Some(script) = operands(args).first()
            && script.dynamic
        {
            self.raise(
                Dangerous,
                format!("{name} runs a script produced at run time"),
            );
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
            if recursive && is_precious(&target.text, self.ctx) {
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
            let system = resolve(&target.text, self.ctx).is_some_and(|p| {
                p.starts_with("/etc") || p.starts_with("/usr") || p.starts_with("/boot")
            });
            if (recursive && is_precious(&target.text, self.ctx)) || target.text == "/" || system {
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
            if resolve(&target.text, self.ctx).is_some_and(|p| !inside_roots(&p, self.ctx)) {
                self.raise(
                    Dangerous,
                    format!("{name} outside the workspace (`{}`)", target.text),
                );
            }
        }
    }

    fn dd(&mut self, args: &[Word]) {
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
                if resolve(&target.text, self.ctx).is_some_and(|p| !inside_roots(&p, self.ctx)) {
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

    /// A path the command writes: devices, /etc and git hooks are catastrophic, anything
    /// outside the workspace (and /tmp) dangerous.
    fn write_target(&mut self, target: &Word) {
        let text = target.text.as_str();
        if text.is_empty() || is_harmless_device(text) {
            return;
        }
        if is_device(text) {
            self.raise(Catastrophic, format!("writes to the device {text}"));
            return;
        }
        let Some(path) = resolve(text, self.ctx) else {
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
            // A run-time path relative to the workspace: where it lands is unknown, but
            // writes are the write tools' business; only escapes we can see are flagged.
        } else if !inside_roots(&path, self.ctx) {
            self.raise(
                Dangerous,
                format!("writes outside the workspace ({})", path.display()),
            );
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

//! `steward service install|uninstall|status`: the unit (systemd) or agent (launchd) that
//! keeps the daemon running, written from the templates in `systemd/` with the absolute
//! path of the running binary, the config file and the data dir.
//!
//! Decisions: `--user` is the default scope (a personal assistant). A system-wide install
//! defaults to `/etc/steward/config.toml` and `/var/lib/steward` (the unit's
//! `StateDirectory`) unless `--config` / `--data-dir` say otherwise, runs as the `steward`
//! user and creates it when missing. `--dry-run` prints the file and every command instead of
//! doing anything. `status` says whether the installed file is the one this binary would
//! write (a stale `ExecStart` after an upgrade to another path is the usual surprise).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::cli::output::out;

const USER_UNIT: &str = include_str!("../../../systemd/steward.service");
const SYSTEM_UNIT: &str = include_str!("../../../systemd/steward-system.service");
const PLIST: &str = include_str!("../../../systemd/dev.steward.daemon.plist");
const UNIT_NAME: &str = "steward.service";
const AGENT_LABEL: &str = "dev.steward.daemon";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    User,
    System,
}

/// What `install` writes and runs.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub path: PathBuf,
    pub content: String,
    pub commands: Vec<Vec<String>>,
}

/// Where things are, as the service will see them.
#[derive(Debug)]
pub struct Paths {
    pub binary: PathBuf,
    pub config: PathBuf,
    pub data_dir: PathBuf,
    /// Writable besides the data dir (`tools.roots`).
    pub extra_writable: Vec<PathBuf>,
    pub home: Option<PathBuf>,
    pub config_home: Option<PathBuf>,
}

fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    if text.contains(char::is_whitespace) {
        format!("\"{text}\"")
    } else {
        text
    }
}

fn command(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Fills a systemd template: the header comment (about the placeholders) is replaced by a
/// note saying where the file came from.
fn render_unit(template: &str, paths: &Paths) -> String {
    let body = template
        .find("[Unit]")
        .map_or(template, |start| &template[start..]);
    let writable: Vec<String> = paths.extra_writable.iter().map(|p| quoted(p)).collect();
    let header = format!(
        "# Written by `steward service install` (steward {}). Run it again after moving the\n# binary, the config or the data dir.\n",
        env!("CARGO_PKG_VERSION")
    );
    let unit: String = body
        .replace("@DESCRIPTION@", "Steward, a personal assistant daemon")
        .replace("@BIN@", &quoted(&paths.binary))
        .replace("@CONFIG@", &quoted(&paths.config))
        .replace("@DATA_DIR@", &quoted(&paths.data_dir))
        .replace(
            " @WORKSPACE@",
            &if writable.is_empty() {
                String::new()
            } else {
                format!(" {}", writable.join(" "))
            },
        );
    header + unit.as_str()
}

fn render_plist(paths: &Paths, log_dir: &Path) -> String {
    let xml = |p: &Path| {
        p.display()
            .to_string()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    PLIST
        .replace("@BIN@", &xml(&paths.binary))
        .replace("@CONFIG@", &xml(&paths.config))
        .replace("@DATA_DIR@", &xml(&paths.data_dir))
        .replace("@LOG_DIR@", &xml(log_dir))
}

/// The install plan for this platform and scope.
pub fn plan_install(scope: Scope, paths: &Paths, user_exists: bool) -> Result<Plan, String> {
    if cfg!(target_os = "macos") {
        let home = paths.home.clone().ok_or("no HOME")?;
        let (dir, domain) = match scope {
            Scope::User => (home.join("Library/LaunchAgents"), "gui/$(id -u)".to_owned()),
            Scope::System => (PathBuf::from("/Library/LaunchDaemons"), "system".to_owned()),
        };
        let path = dir.join(format!("{AGENT_LABEL}.plist"));
        let log_dir = match scope {
            Scope::User => home.join("Library/Logs"),
            Scope::System => PathBuf::from("/var/log"),
        };
        return Ok(Plan {
            content: render_plist(paths, &log_dir),
            commands: vec![command(&[
                "launchctl",
                "bootstrap",
                &domain,
                &path.display().to_string(),
            ])],
            path,
        });
    }
    let systemctl = |args: &[&str]| {
        let mut words = vec!["systemctl"];
        if scope == Scope::User {
            words.push("--user");
        }
        words.extend_from_slice(args);
        command(&words)
    };
    let (path, template) = match scope {
        Scope::User => (
            paths
                .config_home
                .clone()
                .ok_or("no XDG_CONFIG_HOME or HOME")?
                .join("systemd/user")
                .join(UNIT_NAME),
            USER_UNIT,
        ),
        Scope::System => (
            PathBuf::from("/etc/systemd/system").join(UNIT_NAME),
            SYSTEM_UNIT,
        ),
    };
    let mut commands = Vec::new();
    if scope == Scope::System && !user_exists {
        commands.push(command(&[
            "useradd",
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            "steward",
        ]));
    }
    commands.push(systemctl(&["daemon-reload"]));
    commands.push(systemctl(&["enable", "--now", UNIT_NAME]));
    Ok(Plan {
        content: render_unit(template, paths),
        commands,
        path,
    })
}

fn uninstall_commands(scope: Scope, path: &Path) -> Vec<Vec<String>> {
    if cfg!(target_os = "macos") {
        let domain = if scope == Scope::User {
            "gui/$(id -u)"
        } else {
            "system"
        };
        return vec![command(&[
            "launchctl",
            "bootout",
            domain,
            &path.display().to_string(),
        ])];
    }
    let user = if scope == Scope::User {
        vec!["--user"]
    } else {
        vec![]
    };
    let with = |args: &[&str]| {
        let mut words = vec!["systemctl"];
        words.extend(user.iter().copied());
        words.extend_from_slice(args);
        command(&words)
    };
    vec![with(&["disable", "--now", UNIT_NAME])]
}

fn run_commands(commands: &[Vec<String>]) -> Result<(), String> {
    for words in commands {
        // `$(id -u)` in a launchctl domain is for the printed form; resolve it here.
        let words: Vec<String> = words
            .iter()
            .map(|w| {
                w.replace(
                    "$(id -u)",
                    &current_uid().map_or("0".into(), |uid| uid.to_string()),
                )
            })
            .collect();
        let status = Command::new(&words[0])
            .args(&words[1..])
            .status()
            .map_err(|e| format!("cannot run {}: {e}", words[0]))?;
        if !status.success() {
            return Err(format!("`{}` failed ({status})", words.join(" ")));
        }
    }
    Ok(())
}

/// This process's user id (the owner of `/proc/self`).
pub(super) fn current_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).ok()
}

fn steward_user_exists() -> bool {
    Command::new("id")
        .args(["-u", "steward"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn print_plan(plan: &Plan) {
    out!("# would write {}:", plan.path.display());
    out!("{}", plan.content.trim_end());
    for words in &plan.commands {
        out!("# would run: {}", words.join(" "));
    }
}

pub fn install(scope: Scope, paths: &Paths, dry_run: bool) -> ExitCode {
    let plan = match plan_install(scope, paths, steward_user_exists()) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("steward: cannot plan the install: {e}");
            return ExitCode::FAILURE;
        }
    };
    if dry_run {
        print_plan(&plan);
        return ExitCode::SUCCESS;
    }
    let written = plan
        .path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&plan.path, &plan.content));
    if let Err(e) = written {
        eprintln!("steward: cannot write {}: {e}", plan.path.display());
        return ExitCode::FAILURE;
    }
    out!("wrote {}", plan.path.display());
    match run_commands(&plan.commands) {
        Ok(()) => {
            out!("steward is installed and started");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("steward: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn uninstall(scope: Scope, paths: &Paths, dry_run: bool) -> ExitCode {
    let path = match plan_install(scope, paths, true) {
        Ok(plan) => plan.path,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut commands = uninstall_commands(scope, &path);
    if dry_run {
        for words in &commands {
            out!("# would run: {}", words.join(" "));
        }
        out!("# would remove {}", path.display());
        return ExitCode::SUCCESS;
    }
    if !path.exists() {
        out!("not installed ({} does not exist)", path.display());
        return ExitCode::SUCCESS;
    }
    if let Err(e) = run_commands(&commands) {
        eprintln!("steward: {e} (removing the file anyway)");
    }
    if let Err(e) = std::fs::remove_file(&path) {
        eprintln!("steward: cannot remove {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    commands.clear();
    if !cfg!(target_os = "macos") {
        let mut reload = vec!["systemctl".to_owned()];
        if scope == Scope::User {
            reload.push("--user".into());
        }
        reload.push("daemon-reload".into());
        commands.push(reload);
        let _ = run_commands(&commands);
    }
    out!("removed {}", path.display());
    ExitCode::SUCCESS
}

/// What `status` finds: installed or not, and whether the file is what this binary writes.
pub fn installed_state(plan: &Plan) -> (bool, Option<String>) {
    match std::fs::read_to_string(&plan.path) {
        Err(_) => (false, None),
        Ok(current) if current == plan.content => (true, None),
        Ok(current) => {
            let exec = current
                .lines()
                .find(|l| l.starts_with("ExecStart=") || l.contains("<string>/"))
                .unwrap_or("")
                .trim()
                .to_owned();
            (
                true,
                Some(format!(
                    "differs from what this binary would write (found: {exec}); run `steward service install` again"
                )),
            )
        }
    }
}

pub fn status(scope: Scope, paths: &Paths) -> ExitCode {
    let plan = match plan_install(scope, paths, true) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    match installed_state(&plan) {
        (false, _) => {
            out!("not installed ({} does not exist)", plan.path.display());
            return ExitCode::from(3);
        }
        (true, None) => out!("installed: {} (matches this binary)", plan.path.display()),
        (true, Some(why)) => out!("installed: {} — {why}", plan.path.display()),
    }
    if !cfg!(target_os = "macos") {
        let mut words = vec!["systemctl"];
        if scope == Scope::User {
            words.push("--user");
        }
        words.extend(["is-active", UNIT_NAME]);
        match Command::new(words[0]).args(&words[1..]).output() {
            Ok(output) => out!("active: {}", String::from_utf8_lossy(&output.stdout).trim()),
            Err(e) => out!("active: unknown ({e})"),
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Paths {
        Paths {
            binary: "/opt/steward bin/steward".into(),
            config: "/home/me/.config/steward/config.toml".into(),
            data_dir: "/home/me/.local/share/steward".into(),
            extra_writable: vec!["/home/me/notes".into()],
            home: Some("/home/me".into()),
            config_home: Some("/home/me/.config".into()),
        }
    }

    #[test]
    fn a_user_unit_has_every_path_and_no_placeholder_left() {
        let plan = plan_install(Scope::User, &paths(), true).unwrap();
        if cfg!(target_os = "macos") {
            return;
        }
        assert_eq!(
            plan.path,
            Path::new("/home/me/.config/systemd/user/steward.service")
        );
        for placeholder in [
            "@BIN@",
            "@CONFIG@",
            "@DATA_DIR@",
            "@WORKSPACE@",
            "@DESCRIPTION@",
        ] {
            assert!(!plan.content.contains(placeholder), "{}", plan.content);
        }
        assert!(plan.content.contains("ExecStart=\"/opt/steward bin/steward\" --config /home/me/.config/steward/config.toml --data-dir /home/me/.local/share/steward run"));
        assert!(
            plan.content
                .contains("ReadWritePaths=/home/me/.local/share/steward /home/me/notes\n")
        );
        assert!(plan.content.contains("RestartPreventExitStatus=78"));
        assert_eq!(
            plan.commands.last().unwrap().join(" "),
            "systemctl --user enable --now steward.service"
        );
    }

    #[test]
    fn a_system_install_creates_the_user_only_when_missing() {
        if cfg!(target_os = "macos") {
            return;
        }
        let plan = plan_install(Scope::System, &paths(), false).unwrap();
        assert_eq!(plan.commands[0][0], "useradd");
        assert!(plan.content.contains("User=steward"));
        let plan = plan_install(Scope::System, &paths(), true).unwrap();
        assert_eq!(plan.commands[0].join(" "), "systemctl daemon-reload");
    }

    #[test]
    fn the_plist_is_filled_in() {
        let text = render_plist(&paths(), Path::new("/home/me/Library/Logs"));
        assert!(!text.contains('@'));
        assert!(text.contains("<string>/opt/steward bin/steward</string>"));
        assert!(text.contains("/home/me/Library/Logs/steward.log"));
    }
}

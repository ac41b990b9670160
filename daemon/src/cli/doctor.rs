//! `steward doctor [--json]`: what stands between this machine and a daemon that works,
//! each check `pass`, `warn` or `fail` with a one-line fix. Exit 1 when any check fails.
//!
//! Checks: the config (as `config check`); the data dir (exists, private, owned by this
//! user) and the control socket (private; the daemon answering, and its version); the HTTP
//! port (free, or held by our daemon); IMAP and SMTP (connect, TLS, login); the model
//! endpoint (the cheapest call: listing models); inotify limits against the configured
//! watches; free disk space against `daemon.min_free_mb`; the clock; the installed service
//! file against this binary. Network checks are
//! bounded by a timeout each; nothing is written anywhere.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use steward_config::{Config, ModelProvider};

use super::output::out;
use super::{Context, service};
use steward_protocol::client::Client;
use steward_protocol::{Request, Response};

const NETWORK_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Verdict,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn pass(name: &'static str, detail: impl Into<String>) -> Check {
    Check {
        name,
        status: Verdict::Pass,
        detail: detail.into(),
        fix: None,
    }
}

fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name,
        status: Verdict::Warn,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name,
        status: Verdict::Fail,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// The config as `config check` sees it; `None` when it cannot be used at all.
fn config_check(path: Option<&Path>) -> (Check, Option<Config>) {
    let Some(path) = path else {
        return (
            pass("config", "no config path; the embedded defaults apply"),
            Some(Config::default()),
        );
    };
    let config = match Config::load(path) {
        Ok(Some(config)) => config,
        Ok(None) => {
            return (
                pass(
                    "config",
                    format!(
                        "{} does not exist; the embedded defaults apply",
                        path.display()
                    ),
                ),
                Some(Config::default()),
            );
        }
        Err(e) => {
            return (
                fail(
                    "config",
                    e.to_string(),
                    format!(
                        "edit {} (`steward config check` names the key)",
                        path.display()
                    ),
                ),
                None,
            );
        }
    };
    match crate::core::check(&config) {
        Ok(()) => (
            pass("config", format!("{} is valid", path.display())),
            Some(config),
        ),
        Err(e) => (
            fail(
                "config",
                format!("{e:#}"),
                format!("edit {}", path.display()),
            ),
            None,
        ),
    }
}

fn data_dir_check(dir: &Path) -> Check {
    let metadata = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(_) => {
            return pass(
                "data_dir",
                format!(
                    "{} does not exist yet; `steward run` creates it (0700)",
                    dir.display()
                ),
            );
        }
    };
    let mode = metadata.permissions().mode() & 0o777;
    let uid = service::current_uid();
    if uid.is_some_and(|uid| uid != metadata.uid()) {
        return fail(
            "data_dir",
            format!(
                "{} belongs to uid {}, not to this user",
                dir.display(),
                metadata.uid()
            ),
            format!("chown -R $(id -u) {}", dir.display()),
        );
    }
    if mode & 0o077 != 0 {
        return warn(
            "data_dir",
            format!(
                "{} has mode {mode:o}: others can read the owner's messages",
                dir.display()
            ),
            format!(
                "chmod 700 {} (the daemon also does it at start)",
                dir.display()
            ),
        );
    }
    pass("data_dir", format!("{} (mode {mode:o})", dir.display()))
}

async fn daemon_check(socket: &Path) -> (Check, bool) {
    if let Ok(metadata) = std::fs::metadata(socket)
        && metadata.permissions().mode() & 0o077 != 0
    {
        return (
            fail(
                "daemon",
                format!("the socket {} is open to others", socket.display()),
                "restart the daemon (it creates the socket 0600)",
            ),
            false,
        );
    }
    let answer =
        tokio::time::timeout(NETWORK_TIMEOUT, Client::call(socket, &Request::Status)).await;
    match answer {
        Ok(Ok(responses)) => match responses.into_iter().next() {
            Some(Response::Status { status }) => {
                let mut check = pass(
                    "daemon",
                    format!(
                        "running: pid {}, version {}, up {}s",
                        status.pid, status.version, status.uptime_secs
                    ),
                );
                if status.version != steward_protocol::VERSION {
                    check = warn(
                        "daemon",
                        format!(
                            "the daemon runs {}, this binary is {}",
                            status.version,
                            steward_protocol::VERSION
                        ),
                        "restart the daemon (systemctl --user restart steward)",
                    );
                } else if let Some(error) = status.config_error {
                    check = warn(
                        "daemon",
                        format!("running, but the last reload was refused: {error}"),
                        "fix the config, then `kill -HUP` the daemon",
                    );
                }
                (check, true)
            }
            other => (
                fail(
                    "daemon",
                    format!("unexpected answer {other:?}"),
                    "restart the daemon",
                ),
                false,
            ),
        },
        Ok(Err(e)) => (
            warn(
                "daemon",
                format!("not running ({e})"),
                "steward run, or steward service install",
            ),
            false,
        ),
        Err(_) => (
            fail(
                "daemon",
                "the socket accepts but the daemon does not answer",
                "restart the daemon; if it hangs again, report it",
            ),
            false,
        ),
    }
}

fn port_check(config: &Config, daemon_running: bool) -> Option<Check> {
    let http = config.http.as_ref()?;
    if daemon_running {
        return Some(pass(
            "http_port",
            format!("{} (the running daemon's)", http.listen),
        ));
    }
    Some(match std::net::TcpListener::bind(&http.listen) {
        Ok(_) => pass("http_port", format!("{} is free", http.listen)),
        Err(e) => fail(
            "http_port",
            format!("{}: {e}", http.listen),
            "stop what holds the port, or change http.listen",
        ),
    })
}

#[cfg(feature = "email")]
async fn email_checks(config: &Config) -> Vec<Check> {
    let Some(email) = &config.email else {
        return Vec::new();
    };
    let account = match crate::channels::email::account::Account::new(email.clone()) {
        Ok(account) => account,
        Err(e) => {
            return vec![fail(
                "imap",
                format!("{e:#}"),
                "set the password (email.password_env / password_file) and ca_file",
            )];
        }
    };
    let imap = match account.imap().await {
        Ok(mut session) => {
            let _ = session.logout().await;
            pass(
                "imap",
                format!(
                    "{}:{} login as {} works",
                    email.imap.host, email.imap.port, email.username
                ),
            )
        }
        Err(e) => fail(
            "imap",
            format!("{e:#}"),
            "check email.imap_host/imap_port/imap_tls, the password and ca_file",
        ),
    };
    let smtp = match crate::channels::email::outbound::Mailer::new(account) {
        Ok(mailer) => match tokio::time::timeout(NETWORK_TIMEOUT, mailer.check()).await {
            Ok(Ok(())) => pass(
                "smtp",
                format!("{}:{} login works", email.smtp.host, email.smtp.port),
            ),
            Ok(Err(e)) => fail(
                "smtp",
                format!("{e:#}"),
                "check email.smtp_host/smtp_port/smtp_tls and the password",
            ),
            Err(_) => fail(
                "smtp",
                format!(
                    "no answer from {}:{} within {NETWORK_TIMEOUT:?}",
                    email.smtp.host, email.smtp.port
                ),
                "check email.smtp_host/smtp_port",
            ),
        },
        Err(e) => fail("smtp", format!("{e:#}"), "check the SMTP settings"),
    };
    vec![imap, smtp]
}

/// The Matrix account: its session, the homeserver, the store (see
/// `channels::matrix::session::Account::diagnose`).
#[cfg(feature = "matrix")]
async fn matrix_check(config: &Config, data_dir: &Path, running: bool) -> Option<Check> {
    let matrix = config.matrix.as_ref()?;
    let account = crate::channels::matrix::session::Account::new(matrix.clone(), data_dir);
    Some(match account.diagnose(running).await {
        Ok(found) if found.unsigned_device => warn(
            "matrix",
            found.detail,
            "clients that share keys only with signed devices (Element's \"exclude insecure devices\") will not reach the assistant: verify its device from another session of the account",
        ),
        Ok(found) => pass("matrix", found.detail),
        Err(e) => fail(
            "matrix",
            format!("{e:#}"),
            "check matrix.homeserver, matrix.user_id and the password or token",
        ),
    })
}

/// The web page: served in the clear, it belongs on loopback (or behind a TLS proxy that
/// reaches it there); bound to another address it is readable on the network.
fn web_check(config: &Config) -> Option<Check> {
    if !cfg!(feature = "web") {
        return None;
    }
    let http = config.http.as_ref().filter(|h| h.web)?;
    let host = http
        .listen
        .rsplit_once(':')
        .map_or(http.listen.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    Some(if loopback {
        pass(
            "web",
            format!("the owner's page on http://{} (loopback)", http.listen),
        )
    } else {
        warn(
            "web",
            format!(
                "the owner's page is served without TLS on {}: its session cookie and pages cross the network in the clear",
                http.listen
            ),
            "bind http.listen to 127.0.0.1 and reach it through a TLS reverse proxy or an SSH tunnel, or set http.web = false",
        )
    })
}

/// The Telegram bot: its token read and `getMe` answered by the Bot API.
async fn telegram_check(config: &Config) -> Option<Check> {
    let telegram = config.telegram.as_ref()?;
    let connected = match crate::channels::telegram::api::http_client() {
        Ok(http) => crate::channels::telegram::connect(telegram, http).await,
        Err(e) => Err(e.to_string()),
    };
    Some(match connected {
        Ok((_, me)) => pass(
            "telegram",
            format!(
                "bot @{} (id {}) at {}",
                me.username.as_deref().unwrap_or(&me.first_name),
                me.id,
                telegram.api_url
            ),
        ),
        Err(e) => fail(
            "telegram",
            e,
            "check telegram.token_env / token_file and telegram.api_url",
        ),
    })
}

async fn model_check(config: &Config) -> Check {
    let model = &config.model;
    if model.provider == ModelProvider::None {
        return pass("model", "no model configured: commands and rules only");
    }
    let key = match crate::brain::transport::load_api_key(&model.api_key) {
        Ok(key) => key,
        Err(e) => {
            return fail(
                "model",
                e.to_string(),
                "set the API key variable or file named in [model]",
            );
        }
    };
    let url = format!("{}/models", model.base_url.trim_end_matches('/'));
    let client = match steward_tools::https::client_builder()
        .timeout(NETWORK_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(e) => return fail("model", e.to_string(), "report this"),
    };
    let mut request = client.get(&url);
    request = match (model.provider, &key) {
        (ModelProvider::Anthropic, Some(key)) => request
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
        (_, Some(key)) => request.bearer_auth(key),
        (_, None) => request,
    };
    match request.send().await {
        Ok(response) if response.status().is_success() => pass("model", format!("{url} answers")),
        Ok(response) if matches!(response.status().as_u16(), 401 | 403) => fail(
            "model",
            format!("{url}: {} (the key is refused)", response.status()),
            "check the API key",
        ),
        Ok(response) if response.status().as_u16() == 404 => warn(
            "model",
            format!("{url}: 404 (the server has no model list; it may still serve chat)"),
            "check model.base_url",
        ),
        Ok(response) => warn(
            "model",
            format!("{url}: {}", response.status()),
            "check model.base_url",
        ),
        Err(e) => fail(
            "model",
            format!("{url}: {e}"),
            "check model.base_url and that the server runs",
        ),
    }
}

/// Directories a recursive watch would add (bounded walk).
fn directories_under(path: &Path, limit: usize) -> usize {
    let mut count = 0;
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        count += 1;
        if count >= limit {
            break;
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(entry.path());
                }
            }
        }
    }
    count
}

fn inotify_check(config: &Config) -> Option<Check> {
    if config.watch.is_empty() {
        return None;
    }
    let read = |name: &str| -> Option<usize> {
        std::fs::read_to_string(format!("/proc/sys/fs/inotify/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let limit = read("max_user_watches")?;
    let needed: usize = config
        .watch
        .iter()
        .map(|w| {
            if w.recursive {
                directories_under(&w.path, limit + 1)
            } else {
                1
            }
        })
        .sum();
    Some(if needed > limit {
        fail(
            "inotify",
            format!("the watches need about {needed} inotify watches; the limit is {limit}"),
            format!(
                "sysctl fs.inotify.max_user_watches={}",
                (needed * 2).next_power_of_two()
            ),
        )
    } else if needed * 2 > limit {
        warn(
            "inotify",
            format!("the watches need about {needed} of {limit} inotify watches"),
            "raise fs.inotify.max_user_watches, or watch fewer directories",
        )
    } else {
        pass(
            "inotify",
            format!("about {needed} of {limit} inotify watches"),
        )
    })
}

fn disk_check(config: &Config, data_dir: &Path) -> Check {
    let dir = data_dir
        .ancestors()
        .find(|d| d.exists())
        .unwrap_or(data_dir);
    let needed = config.daemon.min_free_bytes;
    match fs2::available_space(dir) {
        Err(e) => warn(
            "disk",
            format!("cannot tell the free space under {}: {e}", dir.display()),
            "check the data dir's file system",
        ),
        Ok(free) if free < needed => fail(
            "disk",
            format!(
                "{} MB free under {}; input is refused below {} MB",
                free >> 20,
                dir.display(),
                needed >> 20
            ),
            "free some space (or lower daemon.min_free_mb)",
        ),
        Ok(free) if free < needed.saturating_mul(4) => warn(
            "disk",
            format!("{} MB free under {}", free >> 20, dir.display()),
            "free some space soon",
        ),
        Ok(free) => pass(
            "disk",
            format!("{} MB free under {}", free >> 20, dir.display()),
        ),
    }
}

fn clock_check() -> Check {
    let now = chrono::Utc::now();
    let zone = crate::channels::timer::jobs::system_zone();
    if now.timestamp() < 1_704_067_200 {
        return fail(
            "clock",
            format!("the clock says {now}, before 2024"),
            "set the time (timedatectl set-ntp true)",
        );
    }
    pass("clock", format!("{} (zone {zone})", now.to_rfc3339()))
}

/// Whether this kernel confines shell commands (the same probe the daemon runs at start).
fn sandbox_check(config: &steward_config::Config) -> Check {
    if config.tools.shell.sandbox == steward_config::ShellSandbox::None {
        return warn(
            "sandbox",
            "tools.shell.sandbox = \"none\": shell commands run unconfined",
            "remove tools.shell.sandbox (the default is \"landlock\")",
        );
    }
    let probed = std::env::current_exe()
        .map_err(|e| e.to_string())
        .and_then(|exe| steward_tools::sandbox::launcher::Launcher::beside(&exe).probe());
    match probed {
        Ok(said) => pass(
            "sandbox",
            format!("Landlock enforces the shell sandbox ({said})"),
        ),
        Err(why) => warn(
            "sandbox",
            format!("no shell sandbox: {why}; every shell command will be asked"),
            "a Linux kernel with Landlock enabled (5.13+, lsm=landlock)",
        ),
    }
}

fn service_check(paths: Option<service::Paths>) -> Check {
    let Some(paths) = paths else {
        return warn(
            "service",
            "cannot tell where the service file would be",
            "set HOME",
        );
    };
    match service::plan_install(service::Scope::User, &paths, true) {
        Ok(plan) => match service::installed_state(&plan) {
            (false, _) => warn(
                "service",
                "no user service installed",
                "steward service install",
            ),
            (true, None) => pass(
                "service",
                format!("{} matches this binary", plan.path.display()),
            ),
            (true, Some(why)) => warn(
                "service",
                format!("{}: {why}", plan.path.display()),
                "steward service install",
            ),
        },
        Err(e) => warn("service", e, "set HOME"),
    }
}

pub async fn doctor(ctx: &Context, paths: Option<service::Paths>, json: bool) -> ExitCode {
    let (config_result, config) = config_check(ctx.config_path.as_deref());
    let mut checks = vec![config_result, data_dir_check(&ctx.data_dir)];
    let (daemon, running) = daemon_check(&ctx.socket_path()).await;
    checks.push(daemon);
    if let Some(config) = &config {
        checks.extend(port_check(config, running));
        #[cfg(feature = "email")]
        checks.extend(email_checks(config).await);
        #[cfg(feature = "matrix")]
        checks.extend(matrix_check(config, &ctx.data_dir, running).await);
        checks.extend(telegram_check(config).await);
        checks.extend(web_check(config));
        checks.push(model_check(config).await);
        checks.extend(inotify_check(config));
        checks.push(disk_check(config, &ctx.data_dir));
        checks.push(sandbox_check(config));
    }
    checks.push(clock_check());
    checks.push(service_check(paths));
    let failed = checks.iter().any(|c| c.status == Verdict::Fail);
    if json {
        out!("{}", serde_json::json!({"ok": !failed, "checks": checks}));
    } else {
        for check in &checks {
            let verdict = match check.status {
                Verdict::Pass => "pass",
                Verdict::Warn => "WARN",
                Verdict::Fail => "FAIL",
            };
            match &check.fix {
                Some(fix) => out!(
                    "{verdict:4}  {:10} {} — fix: {fix}",
                    check.name,
                    check.detail
                ),
                None => out!("{verdict:4}  {:10} {}", check.name, check.detail),
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

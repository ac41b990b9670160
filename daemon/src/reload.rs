//! SIGHUP: read the config file again and apply what can change in a running daemon.
//!
//! - Applied in place: scheduled jobs (reconciled), file watches (restarted where they
//!   changed), the tool policy rules (swapped as a whole).
//! - Restarted: the HTTP server when `[http]`, webhook routes or `[senders]` changed (the
//!   new routes and secrets are checked first; if the new server cannot bind, the previous
//!   one is started again), and the email channel when `[email]` changed (the new account
//!   is checked first; the email tools switch to it at the same time).
//! - Named in `steward status` as needing a restart: the other sections (daemon, inbox,
//!   dispatcher, lanes, model, urgency, tool selection, MCP), and email added or removed.
//! - An invalid file changes nothing: the error is logged and shown in `steward status`.
//!   systemd hears `RELOADING=1` before and `READY=1` after.

use std::path::PathBuf;
use std::sync::Arc;

use steward_config::Config;
use steward_tools::ToolPipeline;
use tracing::{error, info};

use crate::channels::email::{EmailChannel, EmailHandle};
use crate::channels::timer::control::Scheduler;
use crate::channels::watch::set::WatchSet;
use crate::core::{ConfigProblem, cron_specs, email_parts, policy_rule};
use crate::notify;
use crate::owner::OwnerApi;
use crate::status::{ConfigState, StatusBoard};
use crate::store::Store;
use crate::supervisor::Supervisor;

/// The status board's and the supervisor's name of the HTTP server.
const HTTP: &str = "http";

/// Starts the HTTP server the config asks for (none without `[http]` or routes) as the
/// supervisor's channel `http`: the secrets are read and the address bound first, so a
/// failure is an error here and nothing is left running.
pub async fn start_http(
    config: &Config,
    supervisor: &Supervisor,
    owner: &OwnerApi,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let Some(http) = &config.http else {
        return Ok(());
    };
    let bound = crate::channels::http::server::bind(
        http,
        &config.webhook_routes,
        config.senders.clone(),
        owner.clone(),
        data_dir,
    )
    .await
    .map_err(|e| match e {
        crate::channels::http::server::HttpError::Secret { index, .. } => {
            anyhow::Error::from(ConfigProblem {
                key: format!("webhook.routes[{index}].secret_env"),
                message: e.to_string(),
            })
        }
        other => anyhow::Error::from(other),
    })?;
    supervisor.start(HTTP, move |cx| {
        crate::channels::http::server::run(bound, cx)
    });
    Ok(())
}

/// Starts the email channel on the account `handle` holds now.
pub fn start_email(
    handle: &EmailHandle,
    supervisor: &Supervisor,
    store: &Store,
    data_dir: &std::path::Path,
    pipeline: &ToolPipeline,
) -> anyhow::Result<()> {
    let channel = EmailChannel::new(handle.get(), store, data_dir, pipeline.clone())?;
    supervisor.start(crate::channels::email::inbound::CHANNEL, move |cx| {
        crate::channels::email::run(channel, cx)
    });
    Ok(())
}

/// Everything a reload touches.
#[derive(Debug)]
pub struct Reloader {
    pub path: Option<PathBuf>,
    /// The configuration the daemon started with: sections only a restart applies are
    /// compared against it.
    pub started: Config,
    /// The configuration of the restartable sections now running.
    pub live: Config,
    pub scheduler: Scheduler,
    pub watches: WatchSet,
    pub status: Arc<StatusBoard>,
    pub pipeline: ToolPipeline,
    pub supervisor: Supervisor,
    pub owner: OwnerApi,
    pub store: Store,
    pub data_dir: PathBuf,
    /// The email account, when the daemon started with `[email]`.
    pub email: Option<EmailHandle>,
}

impl Reloader {
    pub async fn reload(&mut self) {
        notify::reloading();
        let outcome = match self.path.as_deref().map(Config::load) {
            None => {
                info!("SIGHUP: no config file; nothing to reload");
                Ok(Vec::new())
            }
            Some(Err(e)) => Err(e.to_string()),
            Some(Ok(loaded)) => self.apply(loaded.unwrap_or_default()).await,
        };
        match outcome {
            Ok(restart_needed) => self.status.set_config_state(ConfigState {
                error: None,
                restart_needed,
            }),
            Err(error) => {
                error!(%error, "SIGHUP: the config file is invalid; the running configuration stays");
                self.status.set_config_state(ConfigState {
                    error: Some(error),
                    restart_needed: Vec::new(),
                });
            }
        }
        notify::ready(&self.status.summary());
    }

    /// Checks everything first, then applies; returns the sections that need a restart.
    async fn apply(&mut self, config: Config) -> Result<Vec<String>, String> {
        let specs = cron_specs(&config).map_err(|e| e.to_string())?;
        let http_changed = self.live.http != config.http
            || self.live.webhook_routes != config.webhook_routes
            || self.live.senders != config.senders;
        if http_changed {
            for (index, route) in config.webhook_routes.iter().enumerate() {
                route.secret.read().map_err(|message| {
                    ConfigProblem {
                        key: format!("webhook.routes[{index}].secret_env"),
                        message,
                    }
                    .to_string()
                })?;
            }
        }
        let email_changed = self.live.email != config.email;
        let new_email = match (&config.email, &self.email, email_changed) {
            (Some(email), Some(_), true) => Some(email_parts(email).map_err(|e| format!("{e:#}"))?),
            _ => None,
        };

        self.scheduler
            .jobs
            .reconcile(specs, chrono::Utc::now())
            .map_err(|e| e.to_string())?;
        self.scheduler.changed.notify_one();
        self.watches.reload(&config.watch);
        self.pipeline
            .replace_policy(config.tools.policy.iter().map(policy_rule).collect());
        if http_changed {
            self.supervisor.stop(HTTP).await;
            match start_http(&config, &self.supervisor, &self.owner, &self.data_dir).await {
                Ok(()) => {
                    info!("SIGHUP: the HTTP server restarted with the new routes");
                    self.live.http = config.http.clone();
                    self.live.webhook_routes = config.webhook_routes.clone();
                    self.live.senders = config.senders.clone();
                }
                Err(e) => {
                    let error = format!(
                        "the new HTTP server could not start ({e:#}); the previous one runs again"
                    );
                    if let Err(again) =
                        start_http(&self.live, &self.supervisor, &self.owner, &self.data_dir).await
                    {
                        error!(error = %format!("{again:#}"), "the previous HTTP server could not start again either");
                    }
                    return Err(error);
                }
            }
        }
        if let (Some(parts), Some(handle)) = (new_email, self.email.as_ref()) {
            self.supervisor
                .stop(crate::channels::email::inbound::CHANNEL)
                .await;
            handle.set(parts);
            start_email(
                handle,
                &self.supervisor,
                &self.store,
                &self.data_dir,
                &self.pipeline,
            )
            .map_err(|e| format!("{e:#}"))?;
            info!("SIGHUP: the email channel restarted with the new account");
            self.live.email = config.email.clone();
        }

        let started = &self.started;
        let mut tools_selection = started.tools.clone();
        tools_selection.policy = config.tools.policy.clone();
        let sections = [
            ("daemon", started.daemon != config.daemon),
            ("inbox", started.inbox != config.inbox),
            ("dispatcher", started.dispatcher != config.dispatcher),
            ("trajectory", started.trajectory != config.trajectory),
            ("lanes", started.lanes != config.lanes),
            ("model", started.model != config.model),
            ("urgency", started.urgency_rules != config.urgency_rules),
            ("tools", tools_selection != config.tools),
            ("mcp", started.mcp_servers != config.mcp_servers),
            // Added or removed: the email tools are registered at start.
            ("email", started.email.is_some() != config.email.is_some()),
        ];
        let restart_needed: Vec<String> = sections
            .iter()
            .filter(|(_, changed)| *changed)
            .map(|(name, _)| (*name).to_owned())
            .collect();
        info!(
            jobs = config.cron.len(),
            watches = config.watch.len(),
            policy_rules = config.tools.policy.len(),
            restart_needed = ?restart_needed,
            "SIGHUP: configuration reloaded"
        );
        Ok(restart_needed)
    }
}

//! SIGHUP: read the config file again and apply what can change in a running daemon.
//!
//! - Applied in place: scheduled jobs (reconciled), file watches (restarted where they
//!   changed), the tool policy rules (swapped as a whole), the daily budget and each job's,
//!   route's and watch's run caps and model profile name (work waiting for the budget runs
//!   within seconds of a raised cap).
//! - Restarted: the HTTP server when `[http]`, webhook routes or `[senders]` changed (the
//!   new routes and secrets are checked first; if the new server cannot bind, the previous
//!   one is started again), and the email channel when `[email]` changed (the new account
//!   is checked first; the email tools switch to it at the same time), and the Matrix
//!   channel when `[matrix]` changed, was added or removed (its secret is read first), and
//!   the Telegram channel likewise for `[telegram]` (its token is read first).
//! - Named in `steward status` as needing a restart: the other sections (daemon, inbox,
//!   dispatcher, owner, lanes, model, model profiles, usage retention, urgency, tool
//!   selection, MCP, web search), and email added or
//!   removed.
//! - An invalid file changes nothing: the error is logged and shown in `steward status`.
//!   systemd hears `RELOADING=1` before and `READY=1` after.

use std::path::PathBuf;
use std::sync::Arc;

use steward_config::Config;
use steward_tools::ToolPipeline;
use tracing::{error, info};

use crate::channels::timer::control::Scheduler;
use crate::channels::watch::set::WatchSet;
use crate::core::{check_cron, cron_specs, policy_rule};
use crate::notify;
use crate::owner::OwnerApi;
use crate::status::{ConfigState, StatusBoard};
#[cfg(any(feature = "email", feature = "matrix"))]
use crate::store::Store;
use crate::supervisor::Supervisor;

/// Everything a reload touches.
#[derive(Debug)]
pub struct Reloader {
    pub path: Option<PathBuf>,
    /// The configuration the daemon started with: sections only a restart applies are
    /// compared against it. Without its jobs (`cron` is empty here and in `live`): a
    /// reload reconciles the new file's jobs into the store, never against these.
    pub started: Config,
    /// The configuration of the restartable sections now running.
    pub live: Config,
    pub scheduler: Scheduler,
    pub watches: WatchSet,
    pub status: Arc<StatusBoard>,
    pub pipeline: ToolPipeline,
    /// What restarts channels (HTTP, email, Matrix, Telegram).
    pub supervisor: Supervisor,
    #[cfg(any(feature = "http", feature = "email", feature = "matrix"))]
    pub data_dir: PathBuf,
    pub owner: OwnerApi,
    #[cfg(any(feature = "email", feature = "matrix"))]
    pub store: Store,
    /// The email account, when the daemon started with `[email]`.
    #[cfg(feature = "email")]
    pub email: Option<crate::channels::email::EmailHandle>,
}

impl Reloader {
    pub async fn reload(&mut self) {
        notify::reloading();
        let outcome = match self.path.as_deref().map(Config::load) {
            None => {
                info!("SIGHUP: no config file; nothing to reload");
                Ok(Vec::new())
            }
            Some(Err(e)) => Err(anyhow::Error::from(e)),
            Some(Ok(loaded)) => self.apply(loaded.unwrap_or_default()).await,
        };
        match outcome {
            Ok(restart_needed) => self.status.set_config_state(ConfigState {
                error: None,
                restart_needed,
            }),
            Err(error) => {
                let error = format!("{error:#}");
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
    async fn apply(&mut self, mut config: Config) -> anyhow::Result<Vec<String>> {
        crate::core::check_features(&config)?;
        check_cron(&config)?;
        let http_changed = self.live.http != config.http
            || self.live.webhook_routes != config.webhook_routes
            || self.live.senders != config.senders;
        if http_changed {
            crate::core::read_route_secrets(&config)?;
        }
        #[cfg(feature = "matrix")]
        let matrix_changed = self.live.matrix != config.matrix;
        #[cfg(feature = "matrix")]
        if matrix_changed {
            crate::core::read_matrix_secret(&config)?;
        }
        let telegram_changed = self.live.telegram != config.telegram;
        if telegram_changed {
            crate::core::read_telegram_token(&config)?;
        }
        #[cfg(feature = "email")]
        let new_email = match (&config.email, &self.email, self.live.email != config.email) {
            (Some(email), Some(_), true) => Some(crate::core::email_parts(email)?),
            _ => None,
        };

        self.scheduler.settled.wait().await?;
        let zone = crate::core::owner_zone_name(&config);
        let specs = cron_specs(std::mem::take(&mut config.cron), &zone);
        self.scheduler.jobs.reconcile(specs, chrono::Utc::now())?;
        self.scheduler.changed.notify_one();
        self.watches.reload(&config.watch);
        self.pipeline
            .replace_policy(config.tools.policy.iter().map(policy_rule).collect());
        self.owner.shared.usage.reconfigure(&config);
        #[cfg(feature = "http")]
        if http_changed {
            self.restart_http(&config).await?;
        }
        #[cfg(feature = "email")]
        if let Some(parts) = new_email {
            self.restart_email(parts, &config).await?;
        }
        #[cfg(feature = "matrix")]
        if matrix_changed {
            self.restart_matrix(&config).await?;
        }
        if telegram_changed {
            self.restart_telegram(&config).await;
        }
        Ok(self.restart_needed(&config))
    }

    /// Stops the Telegram channel and starts it on the new section (if any is left).
    async fn restart_telegram(&mut self, config: &Config) {
        use crate::channels::telegram;
        self.supervisor.stop(telegram::CHANNEL).await;
        match &config.telegram {
            Some(section) => telegram::start(section, &self.supervisor, &self.owner),
            None => self.owner.telegram.set_configured(None),
        }
        info!(
            running = config.telegram.is_some(),
            "SIGHUP: the Telegram channel restarted with its new section"
        );
        self.live.telegram = config.telegram.clone();
    }

    /// Stops the Matrix channel and starts it on the new section (if any is left).
    #[cfg(feature = "matrix")]
    async fn restart_matrix(&mut self, config: &Config) -> anyhow::Result<()> {
        use crate::channels::matrix;
        self.supervisor.stop(matrix::CHANNEL).await;
        if let Some(section) = &config.matrix {
            matrix::start(
                section,
                &self.supervisor,
                &self.store,
                &self.data_dir,
                &self.owner,
            )?;
        }
        info!(
            running = config.matrix.is_some(),
            "SIGHUP: the Matrix channel restarted with its new section"
        );
        self.live.matrix = config.matrix.clone();
        Ok(())
    }

    /// Restarts the HTTP server with the new routes; if it cannot start, the previous one
    /// runs again and the reload is refused.
    #[cfg(feature = "http")]
    async fn restart_http(&mut self, config: &Config) -> anyhow::Result<()> {
        use crate::channels::http;
        self.supervisor.stop(http::CHANNEL).await;
        match http::start(config, &self.supervisor, &self.owner, &self.data_dir).await {
            Ok(()) => {
                info!("SIGHUP: the HTTP server restarted with the new routes");
                self.live.http = config.http.clone();
                self.live.webhook_routes = config.webhook_routes.clone();
                self.live.senders = config.senders.clone();
                Ok(())
            }
            Err(e) => {
                let error = format!(
                    "the new HTTP server could not start ({e:#}); the previous one runs again"
                );
                if let Err(again) =
                    http::start(&self.live, &self.supervisor, &self.owner, &self.data_dir).await
                {
                    error!(error = %format!("{again:#}"), "the previous HTTP server could not start again either");
                }
                Err(anyhow::anyhow!(error))
            }
        }
    }

    /// Restarts the email channel on the new account; the email tools switch with it.
    #[cfg(feature = "email")]
    async fn restart_email(
        &mut self,
        parts: crate::channels::email::EmailParts,
        config: &Config,
    ) -> anyhow::Result<()> {
        use crate::channels::email;
        let Some(handle) = self.email.as_ref() else {
            return Ok(());
        };
        self.supervisor.stop(email::inbound::CHANNEL).await;
        handle.set(parts);
        email::start(
            handle,
            &self.supervisor,
            &self.store,
            &self.data_dir,
            &self.pipeline,
            self.started.owner.email_after,
        )?;
        info!("SIGHUP: the email channel restarted with the new account");
        self.live.email = config.email.clone();
        Ok(())
    }

    /// The sections changed on disk that only a restart applies.
    fn restart_needed(&self, config: &Config) -> Vec<String> {
        let started = &self.started;
        let mut tools_selection = started.tools.clone();
        tools_selection.policy = config.tools.policy.clone();
        let sections = [
            ("daemon", started.daemon != config.daemon),
            ("inbox", started.inbox != config.inbox),
            ("dispatcher", started.dispatcher != config.dispatcher),
            ("trajectory", started.trajectory != config.trajectory),
            ("owner", started.owner != config.owner),
            ("lanes", started.lanes != config.lanes),
            ("model", started.model != config.model),
            ("models", started.models != config.models),
            ("usage", started.usage != config.usage),
            ("urgency", started.urgency_rules != config.urgency_rules),
            ("tools", tools_selection != config.tools),
            ("mcp", started.mcp_servers != config.mcp_servers),
            ("web_search", started.web_search != config.web_search),
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
        restart_needed
    }
}

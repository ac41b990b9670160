//! Running the daemon: opens the data dir, builds the parts ([`crate::core::Core`]), starts
//! the channels through the [`Supervisor`] and the dispatcher, tells systemd when it is
//! ready, reloads on SIGHUP, and on SIGTERM/SIGINT shuts down in order — signal, drain,
//! deadline: every task is told to stop, the step in flight is cancelled, and whatever is
//! still running when `daemon.shutdown_grace_secs` runs out is abandoned (the inbox is
//! durable, so nothing acknowledged is lost).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use steward_config::Config;
use steward_events::{Event, Payload, Sender, Source, Trust};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use crate::channels::timer::config_jobs::PendingConfigJobs;
use crate::channels::timer::job_store::JobStore;
use crate::channels::user;
use crate::core::{Core, create_private_dir};
use crate::instance_lock::InstanceLock;
use crate::notify::{self, Heartbeat};
use crate::owner::OwnerApi;
use crate::owner::token::ApiToken;
use crate::paths;
use crate::reload::Reloader;
use crate::store::{Inbox, Store};
use crate::supervisor::Supervisor;

/// The data dir, locked for this process, with its database open.
///
/// `steward run` opens it before it parses the config file, and that order is about memory:
/// sled allocates ~25 MB of zeroed tables when it opens (metric histograms, its page table)
/// and touches a few pages of them. Opened first, they are fresh pages the kernel zeroes on
/// demand. Parsed first, a large config (10,000 `[[cron]]` jobs) frees big buffers, glibc
/// raises its mmap threshold past them, and the same tables come from recycled heap that
/// `calloc` has to clear (measured on 2026-12-03, release build, 10,000 config jobs: RSS
/// 54–56 MB with the config parsed first, 38–43 MB opened first; 21.7 MB with no jobs).
pub struct OpenDataDir {
    path: PathBuf,
    store: Store,
    _lock: InstanceLock,
}

impl OpenDataDir {
    /// Creates the data dir (mode 0700) if needed, takes its lock and opens the database.
    pub fn open(path: PathBuf) -> anyhow::Result<Self> {
        create_private_dir(&path)?;
        let lock = InstanceLock::acquire(&path)?;
        let store = Store::open(&path.join("db"))
            .with_context(|| format!("cannot open the database in {}", path.display()))?;
        Ok(Self {
            path,
            store,
            _lock: lock,
        })
    }
}

/// Runs the daemon until a shutdown signal; returns an error for faults that stopped it.
pub async fn run(
    mut config: Config,
    data: OpenDataDir,
    config_path: Option<PathBuf>,
) -> anyhow::Result<()> {
    let OpenDataDir {
        path: data_dir,
        store,
        _lock,
    } = data;
    let workspace = data_dir.join("workspace");
    create_private_dir(&workspace)?;
    let mut core = Core::build(
        &config,
        store.clone(),
        data_dir.clone(),
        workspace,
        config_path.as_deref(),
    )?;
    report_interrupted_actions(&core.inbox, std::mem::take(&mut core.interrupted_actions)).await?;

    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let fault = store.fault().clone();
    let supervisor = Supervisor::new(core.shared(), &shutdown, config.daemon.shutdown_grace);
    let (owner, tools_ready) =
        start_channels(&config, &core, &supervisor, &store, &data_dir).await?;
    #[cfg(feature = "email")]
    let email = core.email.clone();
    let config_jobs = core.config_jobs.take();
    spawn_background(
        core,
        &config,
        &store,
        &tasks,
        &shutdown,
        &fault,
        tools_ready,
    );

    let mut sigterm = signal(SignalKind::terminate()).context("cannot install SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot install SIGINT handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot install SIGHUP handler")?;
    info!(pid = std::process::id(), data_dir = %data_dir.display(), "steward is ready");
    let status = owner.shared.status.clone();
    notify::ready(&status.summary());
    if let Some(pending) = config_jobs {
        let specs = ConfigJobSpecs {
            cron: std::mem::take(&mut config.cron),
            zone: crate::core::owner_zone_name(&config),
        };
        settle_config_jobs(pending, specs, &owner.scheduler.jobs, &store, &tasks);
    }

    let shutdown_grace = config.daemon.shutdown_grace;
    // The reloader compares sections, never the jobs (a reload reconciles the file's jobs
    // into the store): 10,000 jobs from a config need not be held twice more.
    let mut started = config;
    started.cron = Vec::new();
    let mut reloader = Reloader {
        path: config_path,
        live: started.clone(),
        started,
        scheduler: owner.scheduler.clone(),
        watches: owner.watches.clone(),
        status,
        pipeline: owner.shared.confirmations.pipeline.clone(),
        supervisor: supervisor.clone(),
        #[cfg(any(feature = "http", feature = "email", feature = "matrix"))]
        data_dir,
        owner,
        #[cfg(feature = "email")]
        email,
        #[cfg(any(feature = "email", feature = "matrix"))]
        store: store.clone(),
    };
    let faulted = loop {
        tokio::select! {
            _ = sigterm.recv() => { info!("SIGTERM: shutting down"); break false }
            _ = sigint.recv() => { info!("SIGINT: shutting down"); break false }
            _ = sighup.recv() => reloader.reload().await,
            () = fault.cancelled() => break true,
        }
    };
    notify::stopping();
    shutdown.cancel();
    let drained = async {
        tokio::join!(tasks.wait(), supervisor.drained());
    };
    if tokio::time::timeout(shutdown_grace, drained).await.is_err() {
        warn!(
            grace_secs = shutdown_grace.as_secs(),
            "grace period over; exiting with tasks still running"
        );
    }
    store.flush().await.context("final flush failed")?;
    if faulted {
        anyhow::bail!("stopped after a storage fault (see the log above)");
    }
    info!("stopped");
    Ok(())
}

/// The MCP servers' first tool lists (or their wait running out), which the first step
/// waits for and READY=1 does not.
type ToolsReady = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Starts every channel the config asks for — the control socket, the timer, the watches,
/// HTTP, MCP servers, email, Matrix, Telegram — and returns the owner API they serve.
async fn start_channels(
    config: &Config,
    core: &Core,
    supervisor: &Supervisor,
    store: &Store,
    data_dir: &Path,
) -> anyhow::Result<(OwnerApi, ToolsReady)> {
    let owner_uid = std::fs::metadata(data_dir)
        .with_context(|| format!("cannot read {}", data_dir.display()))?
        .uid();
    let token = ApiToken::load_or_create(data_dir)
        .with_context(|| format!("cannot write the API token in {}", data_dir.display()))?;
    let owner = OwnerApi {
        shared: core.shared(),
        trajectory: core.trajectory.clone(),
        tools: core.tools.clone(),
        scheduler: core.scheduler.clone(),
        watches: core.watches.clone(),
        token,
        telegram: crate::channels::telegram::state::TelegramState::open(store)?,
        web: crate::owner::web_sessions::WebSessions::open(store)?,
    };
    let path = paths::socket_path(config.daemon.socket_path.as_ref(), data_dir);
    let listener =
        user::bind(&path).with_context(|| format!("cannot listen on {}", path.display()))?;
    let socket = user::Socket {
        listener,
        path,
        owner_uid,
        owner: owner.clone(),
    };
    let timer_jobs = core.scheduler.timer_jobs();
    supervisor.start("timer", move |cx| {
        crate::channels::timer::run(timer_jobs, cx)
    });
    core.watches.start(supervisor, &config.watch).await?;
    #[cfg(feature = "http")]
    crate::channels::http::start(config, supervisor, &owner, data_dir).await?;
    #[cfg(feature = "mcp")]
    let tools_ready: ToolsReady = Box::pin(crate::mcp::start(
        &config.mcp_servers,
        core.tools.clone(),
        supervisor,
    ));
    #[cfg(not(feature = "mcp"))]
    let tools_ready: ToolsReady = Box::pin(std::future::ready(()));
    #[cfg(feature = "email")]
    if let Some(handle) = &core.email {
        crate::channels::email::start(
            handle,
            supervisor,
            store,
            data_dir,
            &core.pipeline,
            config.owner.email_after,
        )?;
    }
    #[cfg(feature = "matrix")]
    if let Some(matrix) = &config.matrix {
        crate::channels::matrix::start(matrix, supervisor, store, data_dir, &owner)?;
    }
    if let Some(telegram) = &config.telegram {
        crate::channels::telegram::start(telegram, supervisor, &owner);
    }
    supervisor.start("user", move |cx| user::run(socket, cx));
    Ok((owner, tools_ready))
}

/// Flushes the store every five seconds, so that an I/O error sled met in the background
/// (its own flusher on a full disk: after one, sled takes no writes) stops the daemon
/// through [`Store::fault`] while it is idle, not at the next input it would have to refuse.
/// A flush of a store with nothing to write costs a wake of one of sled's threads and of a
/// runtime worker: every second, those were most of an idle daemon's wake-ups.
async fn watch_store(store: Store, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if store.watch_fault(store.flush().await).is_err() && store.fault().is_cancelled() {
            return;
        }
    }
}

/// Spawns what is not a channel: the dispatcher (a storage fault stops the daemon through
/// `fault`), retention and the expiry of confirmation requests.
fn spawn_background(
    core: Core,
    config: &Config,
    store: &Store,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
    fault: &CancellationToken,
    tools_ready: ToolsReady,
) {
    let retention = crate::retention::Retention::new(
        config,
        store.clone(),
        core.inbox.clone(),
        core.pipeline.ledger().cloned(),
        core.confirmations.pending.clone(),
        core.outbox.clone(),
        core.usage.clone(),
    );
    tasks.spawn(retention.run(shutdown.clone()));
    tasks.spawn(watch_store(store.clone(), shutdown.clone()));
    tasks.spawn(core.confirmations.clone().run_expiry(shutdown.clone()));
    tasks.spawn(release_memory_after_start_and_every_minute(
        core.status.clone(),
        shutdown.clone(),
    ));
    let (shutdown, fault) = (shutdown.clone(), fault.clone());
    let dispatcher = core.dispatcher;
    tasks.spawn(async move {
        tokio::select! {
            () = tools_ready => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = dispatcher.run(Heartbeat::from_env(), shutdown).await {
            error!(error = %e, "the dispatcher stopped on a storage fault");
            fault.cancel();
        }
    });
    tasks.close();
}

/// The longest the start's release of memory waits for a channel still starting.
const START_SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

/// How long after the start's release it is done once more (see below).
const AFTER_START: std::time::Duration = std::time::Duration::from_secs(10);

/// Gives back what the start used and will not use again (see `crate::allocator`): once every
/// channel has said where it stands — logged in and synced, its first pass over the jobs done,
/// or down — or [`START_SETTLE`] after the daemon began, the heap's freed pages and the code
/// pages of the binary and its libraries; once more [`AFTER_START`] later, for the work a
/// channel does right after it is up (measured on 2026-12-08: without it, a daemon whose
/// Matrix channel finished its first sync a moment before kept 2-7 MB of that code mapped
/// for its first minute); then the code pages once a minute, so that what stays resident is
/// the code the last minute ran. Waiting for the channels rather than a
/// fixed time is what keeps the logins' code (TLS, Matrix's keys, the config's jobs written)
/// from staying mapped for the first minute.
async fn release_memory_after_start_and_every_minute(
    status: std::sync::Arc<crate::status::StatusBoard>,
    shutdown: CancellationToken,
) {
    let channels_up = async {
        while status.any_channel_starting() {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(START_SETTLE, channels_up) => {}
        () = shutdown.cancelled() => return,
    }
    // Once now, and once more after what a channel does right after it says it is up —
    // Matrix's key upload and the sync that follows, the mail channel entering IDLE —, which
    // is start-up code too.
    for wait in [std::time::Duration::ZERO, AFTER_START] {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        crate::allocator::release_freed_memory();
        crate::allocator::release_code_pages();
    }
    let period = std::time::Duration::from_secs(60);
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => crate::allocator::release_code_pages(),
            () = shutdown.cancelled() => return,
        }
    }
}

/// The config's `[[cron]]` jobs, checked, and the zone of those that name none.
struct ConfigJobSpecs {
    cron: Vec<steward_config::CronJobConfig>,
    zone: String,
}

/// Makes the config's jobs specs and reconciles them with the store on a blocking thread,
/// after READY (see `channels::timer::config_jobs`); a failure stops the daemon as a storage
/// fault does.
fn settle_config_jobs(
    pending: PendingConfigJobs,
    specs: ConfigJobSpecs,
    jobs: &JobStore,
    store: &Store,
    tasks: &TaskTracker,
) {
    let (jobs, store) = (jobs.clone(), store.clone());
    tasks.spawn_blocking(move || {
        let started = tokio::time::Instant::now();
        let specs = crate::core::cron_specs(specs.cron, &specs.zone);
        match store.watch_fault(pending.settle(&jobs, specs)) {
            Ok(count) => info!(
                jobs = count,
                ms = started.elapsed().as_millis() as u64,
                "the config's jobs are in the store"
            ),
            Err(e) => {
                error!(error = %e, "cannot write the config's jobs into the store; stopping");
                store.fault().cancel();
            }
        }
    });
}

/// Tells the owner, through the trajectory, about actions whose outcome a crash left unknown.
async fn report_interrupted_actions(
    inbox: &Inbox,
    actions: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    for (key, tool) in actions {
        warn!(tool = %tool, key = %key, "an action was interrupted; its outcome is unknown and it will not be retried");
        let mut event = Event::new(
            Source::System,
            "system:ledger",
            Sender {
                identity: "steward".into(),
                authenticated_by: "daemon".into(),
            },
            Trust::Owner,
            Payload::Notice {
                text: format!(
                    "The action `{tool}` (ledger key {key}) was interrupted by a restart. Its outcome is unknown; it was not retried. Check whether it happened before trying again."
                ),
            },
        );
        event.dedupe_key = Some(format!("ledger-unknown:{key}"));
        inbox.submit(event).await?;
    }
    Ok(())
}

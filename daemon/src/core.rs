//! The daemon's parts, built from a configuration and wired together ([`Core`]): the inbox,
//! the main trajectory, the status board, the tool registry and pipeline, confirmations, the
//! scheduler, the watch set and the dispatcher — everything but running it, which is
//! `crate::daemon`'s. `steward config check` builds them on a throwaway data dir, so a
//! configuration the daemon would refuse at start is refused there too, with the same key.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use steward_config::{
    Config, CronJobConfig, ModelConfig, ModelProvider, PolicyDecisionConfig, PolicyRuleConfig,
    ToolProfile,
};
use steward_tools::budget::{BATCH_BUDGET_BYTES, ResultBudget};
use steward_tools::confirm::PendingStore;
use steward_tools::files::FileAccess;
use steward_tools::ledger::Ledger;
use steward_tools::policy::{Mode, PolicyRule, RuleDecision};
use steward_tools::sandbox::launcher::Launcher;
use steward_tools::selection::{Profile, Selection};
use steward_tools::{Authorization, Deferral, ToolError, ToolPipeline, ToolRegistry, builtin};
use tracing::{info, warn};

use crate::agents::SubAgents;
use crate::brain::{AnthropicBrain, Brain, NoneBrain, OpenAiBrain};
use crate::channels::Submitter;
use crate::channels::context::Shared;
use crate::channels::timer::config_jobs::PendingConfigJobs;
use crate::channels::timer::control::Scheduler;
use crate::channels::timer::job_store::JobStore;
use crate::channels::timer::jobs::{JobSpec, check_config_jobs, spec_from_config};
use crate::channels::watch::set::WatchSet;
use crate::confirmations::Confirmations;
use crate::dispatcher::{Dispatcher, Lanes, Model, Models, StepRunner, TokenEstimator};
use crate::owner::outbox::Outbox;
use crate::replies::ReplyHub;
use crate::status::StatusBoard;
use crate::store::{Inbox, Store, Trajectory};
use crate::usage::UsageLedger;

/// Checks every schedule and zone of the config's `[[cron]]` jobs (see
/// [`check_config_jobs`]).
pub(crate) fn check_cron(config: &Config) -> Result<(), ConfigProblem> {
    check_config_jobs(&config.cron, &owner_zone_name(config), chrono::Utc::now()).map_err(
        |(i, field, message)| ConfigProblem {
            key: format!("cron[{i}].{field}"),
            message,
        },
    )
}

/// The specs of the config's `[[cron]]` jobs, checked by [`check_cron`]; a job that names no
/// zone is in `zone`, the owner's.
pub(crate) fn cron_specs(cron: Vec<CronJobConfig>, zone: &str) -> Vec<JobSpec> {
    cron.into_iter()
        .map(|job| spec_from_config(job, zone))
        .collect()
}

/// The tools the config enables (`tools.profile`, `tools.allow`, `tools.deny`).
fn selection(config: &Config) -> Selection {
    let tools = &config.tools;
    Selection {
        profile: match tools.profile {
            ToolProfile::Minimal => Profile::Minimal,
            ToolProfile::Assistant => Profile::Assistant,
            ToolProfile::Coding => Profile::Coding,
            ToolProfile::Full => Profile::Full,
        },
        allow: tools.allow.clone(),
        deny: tools.deny.clone(),
    }
}

/// What the memory, task-list and skill tools read and keep.
struct KeptByTools {
    memory: sled::Tree,
    todos: builtin::TodoLists,
    skills: steward_tools::skills::SkillLibrary,
    agents: SubAgents,
    search: steward_tools::SearchSetup,
}

/// The tool registry the config asks for: built-ins, the selection, the deferral threshold.
fn registry(
    config: &Config,
    shell: Option<builtin::ShellSandbox>,
    kept: KeptByTools,
    scheduler: &Scheduler,
    watches: &WatchSet,
    #[cfg(feature = "email")] email: Option<&crate::channels::email::EmailHandle>,
) -> anyhow::Result<Arc<ToolRegistry>> {
    let tools = &config.tools;
    let builder = builtin::register_memory(builtin::builtins(), kept.memory);
    let builder = builtin::register_todo(builder, kept.todos);
    let builder = builtin::register_skills(builder, kept.skills);
    let builder = crate::agents::register(builder, &kept.agents);
    let builder = match &config.web_search {
        Some(search) => builtin::register_web_search(builder, web_search(search)?),
        None => builder,
    };
    let builder = crate::channels::timer::tools::register(builder, scheduler);
    #[cfg(feature = "email")]
    let builder = match email {
        Some(handle) => crate::channels::email::tools::register(builder, handle),
        None => builder,
    };
    let builder = crate::channels::watch::tools::register(builder, watches)
        .search(kept.search)
        .select(selection(config))
        .expect_mcp_servers(config.mcp_servers.iter().map(|s| s.name.clone()).collect())
        .defer(Deferral {
            context_window_tokens: config.model.context_window_tokens,
            threshold_pct: tools.defer_threshold_pct,
        });
    let builder = builtin::register_shell(builder, shell);
    let hosts = builtin::HttpHosts {
        allow: tools.http_allow_hosts.clone(),
        trusted: tools.http_trusted_hosts.clone(),
    };
    builtin::register_http(builder, hosts)
        .build()
        .map_err(|e| match e {
            ToolError::NotDisableable(_) => ConfigProblem {
                key: "tools.deny".into(),
                message: e.to_string(),
            }
            .into(),
            ToolError::UnknownSelection(ref entry) => ConfigProblem {
                key: if tools.deny.contains(entry) {
                    "tools.deny".into()
                } else {
                    "tools.allow".into()
                },
                message: e.to_string(),
            }
            .into(),
            other => anyhow::Error::from(other),
        })
}

/// Tool search's semantic channel (the model loaded once, at start) and usage learning,
/// as `[tools.search]` asks. A model that cannot be loaded is a config error naming the key.
fn tool_search_setup(config: &Config, store: &Store) -> anyhow::Result<steward_tools::SearchSetup> {
    let usage = if config.tools.search_learn {
        Some(Arc::new(steward_tools::search_usage::SearchUsage::open(
            store.tool_usage_tree()?,
        )?))
    } else {
        None
    };
    let model = match &config.tools.search_embedding_model {
        None => None,
        Some(dir) => Some(search_model(dir)?),
    };
    Ok(steward_tools::SearchSetup { model, usage })
}

#[cfg(feature = "embeddings")]
fn search_model(dir: &std::path::Path) -> anyhow::Result<Arc<dyn steward_tools::search::Embedder>> {
    let model = steward_tools::search::EmbeddingModel::load(dir).map_err(|e| ConfigProblem {
        key: "tools.search.embedding_model".into(),
        message: e.to_string(),
    })?;
    info!(
        dir = %dir.display(),
        bytes = model.memory_bytes(),
        "tool search: embedding model loaded"
    );
    Ok(Arc::new(model))
}

#[cfg(not(feature = "embeddings"))]
fn search_model(
    _dir: &std::path::Path,
) -> anyhow::Result<Arc<dyn steward_tools::search::Embedder>> {
    Err(ConfigProblem {
        key: "tools.search.embedding_model".into(),
        message: "this build has no semantic tool search (cargo feature `embeddings`)".into(),
    }
    .into())
}

/// The shell sandbox as configured, with what the kernel enforces (probed once, here, by
/// running the launcher), and how `steward status` says it; `None` when the owner chose
/// `tools.shell.sandbox = "none"`.
fn shell_sandbox(
    config: &Config,
    data_dir: &std::path::Path,
    config_file: Option<&std::path::Path>,
    roots: &[PathBuf],
) -> (Option<builtin::ShellSandbox>, String) {
    if config.tools.shell.sandbox == steward_config::ShellSandbox::None {
        warn!("tools.shell.sandbox = \"none\": shell commands run unconfined");
        return (None, "none (tools.shell.sandbox = \"none\")".to_owned());
    }
    let launcher = std::env::current_exe().map(|exe| Launcher::beside(&exe));
    // The probe costs a process start: only when the shell can be called at all (the
    // selection changes only with a restart). A disabled shell is still never unconfined.
    let (available, said) = match &launcher {
        _ if !builtin::shell_enabled(&selection(config)) => {
            let why = "the shell tool is not enabled";
            (Err(why.to_owned()), format!("not probed: {why}"))
        }
        Ok(launcher) => match launcher.probe() {
            Ok(_) if config.tools.shell.network => {
                (Ok(()), "landlock (network allowed)".to_owned())
            }
            Ok(_) => (Ok(()), "landlock".to_owned()),
            Err(why) => unavailable(why),
        },
        Err(e) => unavailable(format!("cannot find the steward binary: {e}")),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config_file = config_file
        .and_then(|file| std::path::absolute(file).ok())
        .or_else(crate::paths::default_config_path);
    let sandbox = builtin::ShellSandbox {
        launcher: launcher.unwrap_or_else(|_| Launcher::beside(std::path::Path::new("steward"))),
        deny_read: steward_tools::sandbox::denied_paths(
            data_dir,
            config_file.as_deref(),
            home.as_deref(),
            roots,
        ),
        network: config.tools.shell.network,
        available,
    };
    (Some(sandbox), said)
}

/// A sandbox the kernel will not enforce: said loudly, and every command is asked.
fn unavailable(why: String) -> (Result<(), String>, String) {
    warn!(why = %why, "the shell sandbox is unavailable: every shell command will be asked");
    let said = format!("unavailable: {why}; every shell command is asked");
    (Err(why), said)
}

/// Spill files (full outputs of truncated results) older than this are removed at start.
const SPILL_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// A configuration the file format accepts but the daemon cannot use (a directory that
/// does not exist, a tool that cannot be disabled): exit 78, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("config key `{key}`: {message}")]
pub struct ConfigProblem {
    pub(crate) key: String,
    pub(crate) message: String,
}

/// Refuses a section this build cannot serve (a cargo feature left out), naming it.
pub(crate) fn check_features(config: &Config) -> Result<(), ConfigProblem> {
    let missing = |key: &str, feature: &str| ConfigProblem {
        key: key.to_owned(),
        message: format!("this steward was built without the `{feature}` feature"),
    };
    if !cfg!(feature = "email") && config.email.is_some() {
        return Err(missing("email", "email"));
    }
    if !cfg!(feature = "mcp") && !config.mcp_servers.is_empty() {
        return Err(missing("mcp.servers", "mcp"));
    }
    if !cfg!(feature = "http") && (config.http.is_some() || !config.webhook_routes.is_empty()) {
        return Err(missing("http", "http"));
    }
    if !cfg!(feature = "matrix") && config.matrix.is_some() {
        return Err(missing("matrix", "matrix"));
    }
    Ok(())
}

/// Reads the Matrix account's password or token: a missing one is a problem naming its key.
pub(crate) fn read_matrix_secret(config: &Config) -> Result<(), ConfigProblem> {
    match &config.matrix {
        Some(matrix) => read_secret(matrix.login.secret(), matrix.login.key()),
        None => Ok(()),
    }
}

/// Reads the Telegram bot's token: a missing one is a problem naming its key.
pub(crate) fn read_telegram_token(config: &Config) -> Result<(), ConfigProblem> {
    match &config.telegram {
        Some(telegram) => read_secret(&telegram.token, telegram.token_key()),
        None => Ok(()),
    }
}

/// Where skills are found: `skills.dirs`, or the config file's and the data dir's
/// `skills/`; a directory is trusted when `skills.trusted` names it.
pub(crate) fn skill_library(
    config: &Config,
    data_dir: &Path,
    config_file: Option<&Path>,
) -> steward_tools::skills::SkillLibrary {
    let dirs = config.skills.dirs.clone().unwrap_or_else(|| {
        config_file
            .and_then(Path::parent)
            .map(|dir| dir.join("skills"))
            .into_iter()
            .chain([data_dir.join("skills")])
            .collect()
    });
    steward_tools::skills::SkillLibrary {
        dirs: dirs
            .into_iter()
            .map(|dir| {
                let trusted = config.skills.trusted.contains(&dir);
                (dir, trusted)
            })
            .collect(),
    }
}

/// The most the skills' line in the system text may take; more, and it only says how many
/// skills there are and how to find them.
const SKILLS_NOTE_MAX_BYTES: usize = 2048;

/// What the system text says about skills: the trusted skills' names and descriptions
/// when they fit in [`SKILLS_NOTE_MAX_BYTES`], else how many there are; untrusted skills are
/// only counted (their words would be untrusted content in the prefix). Computed once.
pub(crate) fn skills_note(library: &steward_tools::skills::SkillLibrary) -> String {
    let (skills, _) = library.scan();
    if skills.is_empty() {
        return String::new();
    }
    let trusted: Vec<String> = skills
        .iter()
        .filter(|s| s.trusted)
        .map(|s| format!("{} — {}", s.name, s.description))
        .collect();
    let untrusted = skills.len() - trusted.len();
    let listed = format!(
        "Skills (written procedures) you can load with skill_load: {}.{}",
        trusted.join("; "),
        if untrusted > 0 {
            format!(" {untrusted} more from untrusted folders: see skill_list.")
        } else {
            String::new()
        }
    );
    if trusted.is_empty() || listed.len() > SKILLS_NOTE_MAX_BYTES {
        format!(
            "{} skills (written procedures) exist; find them with skill_list or tool_search and load one with skill_load.",
            skills.len()
        )
    } else {
        listed
    }
}

/// `web_search`'s backend (Brave's key read now: a missing one is a config problem).
fn web_search(
    config: &steward_config::WebSearchConfig,
) -> Result<builtin::WebSearch, ConfigProblem> {
    use steward_config::WebSearchBackend;
    let backend = match &config.backend {
        WebSearchBackend::SearxNg { url } => builtin::SearchBackend::SearxNg { url: url.clone() },
        WebSearchBackend::Brave { api_key, url } => {
            let key = match api_key {
                steward_config::SecretSource::Env(_) => "web_search.api_key_env",
                steward_config::SecretSource::File(_) => "web_search.api_key_file",
            };
            read_secret(api_key, key)?;
            builtin::SearchBackend::Brave {
                api_key: api_key.read().unwrap_or_default(),
                url: url.clone().unwrap_or_else(|| builtin::BRAVE_URL.to_owned()),
            }
        }
    };
    Ok(builtin::WebSearch {
        backend,
        timeout: config.timeout,
    })
}

fn read_secret(secret: &steward_config::SecretSource, key: &str) -> Result<(), ConfigProblem> {
    match secret.read() {
        Ok(secret) if !secret.is_empty() => Ok(()),
        Ok(_) => Err(ConfigProblem {
            key: key.to_owned(),
            message: "the secret is empty".into(),
        }),
        Err(message) => Err(ConfigProblem {
            key: key.to_owned(),
            message,
        }),
    }
}

/// Reads every webhook route's secret: a missing one is a problem naming the route.
pub(crate) fn read_route_secrets(config: &Config) -> Result<(), ConfigProblem> {
    for (index, route) in config.webhook_routes.iter().enumerate() {
        route.secret.read().map_err(|message| ConfigProblem {
            key: format!("webhook.routes[{index}].secret_env"),
            message,
        })?;
    }
    Ok(())
}

/// `steward config check`: everything the daemon checks when it starts, beyond the file's
/// own validation — schedules and time zones, the tool selection, roots, secrets, the email
/// account — by building the daemon's parts on a throwaway data dir.
pub fn check(config: &Config) -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join(format!(
        "steward-config-check-{}-{}",
        std::process::id(),
        ulid::Ulid::generate()
    ));
    let result = (|| -> anyhow::Result<()> {
        let workspace = scratch.join("workspace");
        create_private_dir(&workspace)?;
        let store = Store::open(&scratch.join("db"))?;
        Core::build(config, store, scratch.clone(), workspace, None)?;
        read_route_secrets(config)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// The parts every channel talks to, wired together: the inbox, the main trajectory, the
/// status board, the reply hub, the tool registry and the dispatcher (not yet running).
/// Built once by `crate::daemon::run`; benchmarks build it directly.
#[derive(Debug)]
pub struct Core {
    pub inbox: Arc<Inbox>,
    /// How every channel submits to the inbox (the urgency rules applied once).
    pub submitter: Submitter,
    pub trajectory: Arc<Trajectory>,
    pub status: Arc<StatusBoard>,
    pub replies: ReplyHub,
    pub tools: Arc<ToolRegistry>,
    pub dispatcher: Dispatcher,
    pub confirmations: Arc<Confirmations>,
    /// Scheduled jobs, for the timer, the CLI and the `cron_*` tools.
    pub scheduler: Scheduler,
    /// The config's jobs, checked; `crate::daemon::run` writes them after READY (see
    /// `channels::timer::config_jobs`). `None` once taken.
    pub config_jobs: Option<PendingConfigJobs>,
    /// File watches, for the CLI and the `watch_*` tools (started by `crate::daemon::run`).
    pub watches: WatchSet,
    /// Calls a crash left half-done whose outcome is unknown; the owner must be told.
    /// Ledger key → tool of each action a crash left half-done.
    pub interrupted_actions: BTreeMap<String, String>,
    /// The email account and sender, when `[email]` is configured.
    #[cfg(feature = "email")]
    pub email: Option<crate::channels::email::EmailHandle>,
    /// The tool pipeline (the email channel reconciles its ledger).
    pub pipeline: ToolPipeline,
    /// Everything meant for the owner, durable until delivered.
    pub outbox: Outbox,
    /// Every model call's usage, and the caps on it.
    pub usage: Arc<UsageLedger>,
    /// Each trajectory's task list (`todo_write`), for status and the web page.
    pub todos: builtin::TodoLists,
}

impl Core {
    /// `config_file`: where `config` was read from (its file and folder are kept from shell
    /// commands); `None` for the default place.
    pub fn build(
        config: &Config,
        store: Store,
        data_dir: PathBuf,
        workspace: PathBuf,
        config_file: Option<&std::path::Path>,
    ) -> anyhow::Result<Self> {
        check_features(config)?;
        read_matrix_secret(config)?;
        read_telegram_token(config)?;
        owner_zone(config)?;
        let files = file_access(config, workspace)?;
        if let Some(from) = crate::store::schema::migrate(&store)? {
            info!(
                from,
                to = crate::store::schema::CURRENT,
                "data dir migrated to the current schema"
            );
        }
        let inbox = Arc::new(
            Inbox::open(
                store.clone(),
                config.inbox.capacity,
                config.inbox.dedupe_retention,
            )?
            .with_disk_guard(crate::disk::DiskGuard::new(
                data_dir.clone(),
                config.daemon.min_free_bytes,
            )),
        );
        let trajectory = Arc::new(Trajectory::main(&store)?);
        let submitter = Submitter::new(inbox.clone(), config.urgency_rules.clone());
        check_cron(config)?;
        let (config_jobs, settled) = PendingConfigJobs::new();
        let scheduler = Scheduler {
            jobs: JobStore::open(&store)?,
            submitter: submitter.clone(),
            changed: Arc::default(),
            default_zone: owner_zone_name(config),
            settled,
        };
        let (shell, said) = shell_sandbox(config, &data_dir, config_file, files.roots());
        let status = Arc::new(StatusBoard::new(data_dir.clone(), inbox.clone()));
        status.set_shell_sandbox(&said);
        let watches = WatchSet::new(store.watch_tree()?, status.clone(), files.clone());
        #[cfg(feature = "email")]
        let email = match &config.email {
            Some(email) => Some(crate::channels::email::EmailHandle::new(email_parts(
                email,
            )?)),
            None => None,
        };
        let todos = builtin::TodoLists::new(store.todo_tree()?);
        let skills = skill_library(config, &data_dir, config_file);
        let agents = SubAgents::new(
            inbox.clone(),
            config.agents.max_running,
            config.agents.allow_sending,
        );
        let tools = registry(
            config,
            shell.clone(),
            KeptByTools {
                memory: store.memory_tree()?,
                todos: todos.clone(),
                skills: skills.clone(),
                agents: agents.clone(),
                search: tool_search_setup(config, &store)?,
            },
            &scheduler,
            &watches,
            #[cfg(feature = "email")]
            email.as_ref(),
        )?;
        let (pipeline, pending, interrupted_actions) =
            pipeline(config, &store, &data_dir, tools.clone())?;
        let replies = ReplyHub::default();
        let outbox = Outbox::open(&store, config.owner.deliver.clone())?;
        let confirmations = Arc::new(Confirmations {
            pending: pending.clone(),
            pipeline: pipeline.clone(),
            files: files.clone(),
            inbox: inbox.clone(),
            outbox: outbox.clone(),
        });
        let usage = Arc::new(UsageLedger::open(&store, owner_zone(config)?, config)?);
        agents.set_registry(&tools);
        let parts = DispatcherParts {
            skills_note: skills_note(&skills),
            agents,
            usage: &usage,
            inbox: &inbox,
            trajectory: &trajectory,
            status: &status,
            replies: &replies,
            pipeline: &pipeline,
            outbox: &outbox,
            pending,
            files,
        };
        let dispatcher = dispatcher(config, parts)?;
        Ok(Self {
            inbox,
            submitter,
            trajectory,
            status,
            replies,
            tools,
            dispatcher,
            confirmations,
            scheduler,
            config_jobs: Some(config_jobs),
            watches,
            interrupted_actions,
            #[cfg(feature = "email")]
            email,
            pipeline,
            outbox,
            usage,
            todos,
        })
    }

    /// What every channel's context carries (see [`crate::channels::context`]).
    pub fn shared(&self) -> Shared {
        Shared {
            submitter: self.submitter.clone(),
            status: self.status.clone(),
            replies: self.replies.clone(),
            confirmations: self.confirmations.clone(),
            outbox: self.outbox.clone(),
            usage: self.usage.clone(),
            todos: self.todos.clone(),
        }
    }
}

/// The roots the file tools may touch: `tools.roots`, or the workspace when none is set.
fn file_access(config: &Config, workspace: PathBuf) -> anyhow::Result<Arc<FileAccess>> {
    let roots = if config.tools.roots.is_empty() {
        vec![workspace]
    } else {
        config.tools.roots.clone()
    };
    for (index, root) in config.tools.roots.iter().enumerate() {
        if let Err(e) = root.canonicalize() {
            return Err(ConfigProblem {
                key: format!("tools.roots[{index}]"),
                message: format!("cannot use {}: {e}", root.display()),
            }
            .into());
        }
    }
    let files = FileAccess::new(&roots)
        .map_err(|source| ConfigProblem {
            key: "tools.roots".into(),
            message: format!("cannot use {source}"),
        })?
        .with_untrusted(&config.tools.untrusted_roots);
    Ok(Arc::new(files))
}

/// The tool pipeline over `tools` (result budget, ledger, policy, pending confirmations),
/// its pending store, and the actions a crash left half-done (ledger key → tool), each
/// told once.
fn pipeline(
    config: &Config,
    store: &Store,
    data_dir: &Path,
    tools: Arc<ToolRegistry>,
) -> anyhow::Result<(ToolPipeline, PendingStore, BTreeMap<String, String>)> {
    let budget = ResultBudget::new(data_dir.join("spill"), BATCH_BUDGET_BYTES);
    let cleaned = budget.clean(SPILL_RETENTION);
    if cleaned > 0 {
        info!(cleaned, "removed old spill files");
    }
    let ledger = Ledger::new(store.ledger_tree()?);
    let mut interrupted: BTreeMap<String, String> = ledger
        .recover()?
        .into_iter()
        .map(|entry| (entry.key, entry.tool))
        .collect();
    let pending = PendingStore::new(store.pending_tree()?);
    // An approved action cut short appears in both stores (same key): told once.
    for action in pending.recover()? {
        warn!(pending_id = %action.id, tool = %action.tool, "an approved action was interrupted; its outcome is unknown");
        interrupted.insert(action.key, action.tool);
    }
    let pipeline = ToolPipeline::new(tools, budget)
        .with_ledger(ledger)
        .with_authorization(Authorization {
            rules: steward_tools::policy::PolicyRules::new(
                config.tools.policy.iter().map(policy_rule).collect(),
            ),
            pending: pending.clone(),
            expiry: config.tools.confirm_expiry,
        });
    Ok((pipeline, pending, interrupted))
}

/// `owner.timezone`, or the system's zone: where events are dated and the zone of a job
/// that names none.
pub(crate) fn owner_zone_name(config: &Config) -> String {
    config
        .owner
        .timezone
        .clone()
        .unwrap_or_else(crate::channels::timer::jobs::system_zone)
}

/// The owner's zone, checked.
pub(crate) fn owner_zone(config: &Config) -> Result<crate::zone::Zone, ConfigProblem> {
    let name = owner_zone_name(config);
    crate::channels::timer::schedule::parse_zone(&name).map_err(|e| ConfigProblem {
        key: "owner.timezone".into(),
        message: e.to_string(),
    })
}

/// What the dispatcher is built from, besides the configuration.
struct DispatcherParts<'a> {
    inbox: &'a Arc<Inbox>,
    trajectory: &'a Arc<Trajectory>,
    status: &'a Arc<StatusBoard>,
    replies: &'a ReplyHub,
    pipeline: &'a ToolPipeline,
    outbox: &'a Outbox,
    pending: PendingStore,
    files: Arc<FileAccess>,
    usage: &'a Arc<UsageLedger>,
    agents: SubAgents,
    skills_note: String,
}

/// The brain a model section names.
fn brain_of(model: &ModelConfig, status: &Arc<StatusBoard>) -> anyhow::Result<Arc<dyn Brain>> {
    Ok(match model.provider {
        ModelProvider::None => Arc::new(NoneBrain::new(status.clone())),
        ModelProvider::OpenAi => Arc::new(OpenAiBrain::new(model)?),
        ModelProvider::Anthropic => Arc::new(AnthropicBrain::new(model)?),
    })
}

/// The brain the config names, the step runner over it, the side lanes and the dispatcher.
fn dispatcher(config: &Config, parts: DispatcherParts<'_>) -> anyhow::Result<Dispatcher> {
    let DispatcherParts {
        inbox,
        trajectory,
        status,
        replies,
        pipeline,
        outbox,
        pending,
        files,
        usage,
        agents,
        skills_note,
    } = parts;
    let brain = brain_of(&config.model, status)?;
    status.set_brain(brain.name());
    let mut profiles = BTreeMap::new();
    for (name, model) in &config.models {
        let brain = brain_of(model, status).map_err(|e| ConfigProblem {
            key: format!("models.{name}"),
            message: format!("{e:#}"),
        })?;
        profiles.insert(name.clone(), Model::new(brain, model));
    }
    let steps = Arc::new(StepRunner {
        brains: Models {
            default: Model::new(brain, &config.model),
            profiles,
        },
        ledger: usage.clone(),
        pipeline: pipeline.clone(),
        replies: replies.clone(),
        outbox: outbox.clone(),
        pending,
        zone: owner_zone(config)?,
        max_model_calls: config.dispatcher.max_steps_per_turn,
        files,
        usage: status.clone(),
        mode: if config.tools.plan_mode {
            Mode::Plan
        } else {
            Mode::Normal
        },
        prompt_budget: config.model.context_window_tokens - config.model.max_output_tokens,
        estimator: TokenEstimator::default(),
        main_view: Default::default(),
        skills_note,
    });
    let lanes = Lanes::new(
        inbox.clone(),
        steps.clone(),
        status.clone(),
        replies.clone(),
        config.lanes.max_parallel,
        agents,
    );
    Ok(Dispatcher {
        inbox: inbox.clone(),
        trajectory: trajectory.clone(),
        steps,
        lanes,
        status: status.clone(),
        replies: replies.clone(),
    })
}

/// The email account (its password and trust anchor read now: a missing one is a config
/// problem) and its sender.
#[cfg(feature = "email")]
pub(crate) fn email_parts(
    config: &steward_config::EmailConfig,
) -> anyhow::Result<crate::channels::email::EmailParts> {
    use crate::channels::email::account::{Account, AccountError};
    let account = Account::new(config.clone()).map_err(|e| ConfigProblem {
        key: match (&e, &config.password) {
            (AccountError::Tls(_), _) => "email.ca_file".into(),
            (AccountError::Password(_), steward_config::SecretSource::Env(_)) => {
                "email.password_env".into()
            }
            (AccountError::Password(_), steward_config::SecretSource::File(_)) => {
                "email.password_file".into()
            }
        },
        message: e.to_string(),
    })?;
    let mailer = crate::channels::email::outbound::Mailer::new(account.clone()).map_err(|e| {
        ConfigProblem {
            key: "email.smtp_host".into(),
            message: format!("{e:#}"),
        }
    })?;
    Ok(crate::channels::email::EmailParts { account, mailer })
}

pub(crate) fn policy_rule(rule: &PolicyRuleConfig) -> PolicyRule {
    PolicyRule {
        id: rule.id.clone(),
        tool: rule.tool.clone(),
        decision: match rule.decision {
            PolicyDecisionConfig::Allow => RuleDecision::Allow,
            PolicyDecisionConfig::Confirm => RuleDecision::Confirm,
            PolicyDecisionConfig::Deny => RuleDecision::Deny,
        },
    }
}

/// Creates `dir` (and parents) readable only by the owner, and tightens an existing `dir`
/// that others could read: it holds every message the owner ever sent.
pub(crate) fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let mode = std::fs::metadata(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        warn!(dir = %dir.display(), mode = format!("{:o}", mode & 0o777), "data dir was readable by others; setting it to 0700");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_this_build_lacks_is_refused_naming_it() {
        let parse = |text: &str| Config::from_toml(text, None).expect("a valid section");
        let email = parse(
            "[email]\nimap_host = \"127.0.0.1\"\nimap_tls = \"none\"\nusername = \"u\"\naddress = \"u@example.com\"\npassword_env = \"P\"\n",
        );
        let http = parse("[http]\nlisten = \"127.0.0.1:0\"\n");
        let mcp = parse("[[mcp.servers]]\nname = \"time\"\ncommand = \"mcp-server-time\"\n");
        let matrix = parse(
            "[matrix]\nhomeserver = \"http://127.0.0.1:8008\"\nuser_id = \"@s:localhost\"\npassword_env = \"P\"\n",
        );
        let table = [
            (email, "email", cfg!(feature = "email")),
            (http, "http", cfg!(feature = "http")),
            (mcp, "mcp.servers", cfg!(feature = "mcp")),
            (matrix, "matrix", cfg!(feature = "matrix")),
        ];
        for (config, key, built_in) in table {
            match check_features(&config) {
                Ok(()) => assert!(built_in, "{key} accepted without its feature"),
                Err(problem) => {
                    assert!(!built_in, "{key} refused with its feature: {problem}");
                    assert_eq!(problem.key, key);
                    assert!(problem.message.contains("built without"), "{problem}");
                }
            }
        }
        assert!(check_features(&Config::default()).is_ok());
    }

    /// Every tool a full daemon offers — built-ins, web, memory, cron, watch, email and an
    /// MCP server's — declares a complete contract; the daemon's own tools take exactly the
    /// arguments their structs read (an unknown one is refused by the schema).
    #[cfg(all(feature = "email", feature = "mcp"))]
    #[test]
    fn every_tool_of_a_full_daemon_declares_a_complete_contract() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let password = dir.path().join("password");
        std::fs::write(&password, "secret").expect("a password file");
        let config = Config::from_toml(
            &format!(
                "[tools]\nprofile = \"full\"\n\n[email]\nimap_host = \"127.0.0.1\"\nimap_tls = \"none\"\nsmtp_tls = \"none\"\nusername = \"u\"\naddress = \"u@example.com\"\npassword_file = \"{}\"\n",
                password.display()
            ),
            None,
        )
        .expect("a valid config");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).expect("a workspace");
        let store = Store::open(&dir.path().join("db")).expect("a store");
        let core = Core::build(&config, store, dir.path().to_path_buf(), workspace, None)
            .expect("the config builds");
        let server: steward_config::McpServerConfig = Config::from_toml(
            "[[mcp.servers]]\nname = \"time\"\ncommand = \"mcp-server-time\"\n",
            None,
        )
        .expect("a valid server")
        .mcp_servers
        .remove(0);
        let listed = serde_json::json!({
            "name": "get_current_time",
            "description": "The time in a zone.",
            "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}
        });
        let contract = crate::mcp::contract(&server, &listed, "time_get_current_time".into())
            .expect("a contract");
        let rejected = core.tools.replace_source(
            &steward_tools::ToolSource::Mcp("time".into()),
            vec![(
                contract,
                Arc::new(NoCall) as Arc<dyn steward_tools::ToolHandler>,
            )],
        );
        assert!(rejected.is_empty(), "{rejected:?}");

        let contracts = core.tools.contracts();
        let names: Vec<&str> = contracts.iter().map(|c| c.name.as_str()).collect();
        for expected in [
            "fs_read",
            "shell",
            "http_request",
            "web_fetch",
            "memory_write",
            "cron_create",
            "watch_create",
            "email_send",
            "tool_search",
            "call_tool",
            "time_get_current_time",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        for contract in &contracts {
            let name = &contract.name;
            assert!(
                !contract.description.trim().is_empty(),
                "{name}: no description"
            );
            assert!(!contract.groups.is_empty(), "{name}: no group");
            assert!(contract.result_budget > 0, "{name}");
            let schema = &contract.parameters;
            assert_eq!(schema["type"], "object", "{name}");
            assert!(jsonschema::meta::is_valid(schema), "{name}: {schema}");
            if matches!(contract.source, steward_tools::ToolSource::Mcp(_)) {
                continue;
            }
            assert_eq!(schema["additionalProperties"], false, "{name}: {schema}");
            // Left out is how an argument is absent; no `null` is ever asked for.
            assert!(!schema.to_string().contains("null"), "{name}: {schema}");
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for required in schema["required"].as_array().into_iter().flatten() {
                let required = required.as_str().unwrap_or_default();
                assert!(
                    properties.contains_key(required),
                    "{name}: {required} undeclared"
                );
            }
            for (field, property) in &properties {
                assert!(
                    property.get("type").is_some() || property.get("enum").is_some(),
                    "{name}.{field} has no type: {property}"
                );
            }
            let validator = jsonschema::validator_for(schema).expect("compiles");
            let mut unknown = serde_json::Map::new();
            unknown.insert("no_such_argument".into(), serde_json::json!(1));
            assert!(
                !validator.is_valid(&serde_json::Value::Object(unknown)),
                "{name} takes an argument it does not read"
            );
        }
    }

    /// An MCP tool's handler, never called here.
    #[cfg(all(feature = "email", feature = "mcp"))]
    struct NoCall;

    #[cfg(all(feature = "email", feature = "mcp"))]
    impl steward_tools::ToolHandler for NoCall {
        fn call<'a>(
            &'a self,
            _args: &'a serde_json::Value,
            _ctx: &'a steward_tools::ExecutionContext,
        ) -> steward_tools::ToolFuture<'a> {
            Box::pin(async { steward_events::ToolOutcome::error("not called in this test") })
        }
    }
}

//! Steward's configuration: a TOML file read in two stages. [`raw`] mirrors the file exactly
//! (unknown keys are errors); [`Config::from_toml`] resolves it into validated values. Every
//! error names the key and, where the file has it, the line — so a bad config can be fixed
//! from the message alone. The daemon exits with code 78 (`EX_CONFIG`) on any of them.
// Everything here reads outside input (config files): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

mod budget;
mod email;
mod error;
mod matrix;
mod raw;
mod sections;
mod skills;
mod spanned;
mod telegram;
mod url;
mod validate;
mod web_search;

use std::path::{Path, PathBuf};
use std::time::Duration;

use steward_events::{Urgency, UrgencyRule};

pub use budget::{BudgetConfig, Prices, RunSettings, UsageConfig};
pub use email::{EmailConfig, MailServer, MailTls};
pub use error::ConfigError;
pub use matrix::{MatrixConfig, MatrixLogin};
pub use skills::SkillsConfig;
pub use telegram::{DEFAULT_API_URL as TELEGRAM_API_URL, TelegramConfig};
pub use web_search::{WebSearchBackend, WebSearchConfig};

/// The commented default configuration written by `steward init`.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("default.toml");

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub inbox: InboxConfig,
    pub dispatcher: DispatcherConfig,
    pub trajectory: TrajectoryConfig,
    pub owner: OwnerConfig,
    pub lanes: LaneConfig,
    pub model: ModelConfig,
    /// `[models.NAME]`: profiles a job, route or watch may run on.
    pub models: std::collections::BTreeMap<String, ModelConfig>,
    pub budget: BudgetConfig,
    pub usage: UsageConfig,
    pub urgency_rules: Vec<UrgencyRule>,
    pub tools: ToolsConfig,
    /// `[[mcp.servers]]`.
    pub mcp_servers: Vec<McpServerConfig>,
    /// `[[cron]]`: scheduled jobs from the file (jobs made at run time live in the store).
    pub cron: Vec<CronJobConfig>,
    /// `[[watch]]`: directories whose changes become events.
    pub watch: Vec<WatchConfig>,
    /// `[http]`: the HTTP server, when configured (a `[http]` table or webhook routes).
    pub http: Option<HttpConfig>,
    /// `[[webhook.routes]]`.
    pub webhook_routes: Vec<WebhookRouteConfig>,
    /// `[senders]`: who is the owner, who is trusted, what happens to everyone else.
    pub senders: steward_events::SenderPolicy,
    /// `[email]`: the email channel, when configured.
    pub email: Option<EmailConfig>,
    /// `[matrix]`: the Matrix account, when configured.
    pub matrix: Option<MatrixConfig>,
    /// `[telegram]`: the Telegram bot, when configured.
    pub telegram: Option<TelegramConfig>,
    /// `[web_search]`: the backend of `web_search`, when configured.
    pub web_search: Option<WebSearchConfig>,
    /// `[skills]`: where skills are found and which directories are trusted.
    pub skills: SkillsConfig,
    pub agents: AgentsConfig,
}

/// `[agents]`: sub-agents (`agent_spawn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentsConfig {
    pub max_running: usize,
    pub allow_sending: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// `host:port`; default `127.0.0.1:8787`. Port 0 picks a free one.
    pub listen: String,
    pub max_body_bytes: usize,
    /// `/metrics` without the API token (for a local Prometheus); off by default.
    pub metrics_public: bool,
    /// Longest a request may take, reading its body included (default 30 s).
    pub request_timeout: Duration,
    /// `http.hosts`: names accepted in `Host` besides the bound address and loopback.
    pub hosts: Vec<String>,
    /// `http.max_connections`: connections served at once.
    pub max_connections: usize,
    /// `http.header_timeout_secs`: time to send a request's headers.
    pub header_timeout: Duration,
    /// `http.web`: the owner's web page under `/`.
    pub web: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookRouteConfig {
    /// Served at `/hooks/NAME`; events on channel `webhook:NAME`.
    pub name: String,
    /// `github`, `stripe`, `standard` or `bearer`.
    pub auth: String,
    pub secret: SecretSource,
    pub urgency: Urgency,
    /// A template over `{header.NAME}` and `{body.path.to.field}`.
    pub text: String,
    pub max_body_bytes: usize,
    pub rate_per_min: u32,
    pub tolerance_secs: i64,
    /// `untrusted` (default) or `trusted`.
    pub trusted: bool,
    pub run: RunSettings,
}

/// Where a secret comes from (never the config file itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// The secret (a file's content without surrounding whitespace), or why it is missing.
    /// A file path may start with `$CREDENTIALS_DIRECTORY/` (or `${CREDENTIALS_DIRECTORY}/`):
    /// systemd's `LoadCredential=` directory of the running service.
    pub fn read(&self) -> Result<String, String> {
        match self {
            SecretSource::Env(var) => {
                std::env::var(var).map_err(|_| format!("the variable {var} is not set"))
            }
            SecretSource::File(path) => {
                let path = credentials_path(path, std::env::var_os("CREDENTIALS_DIRECTORY"))?;
                std::fs::read_to_string(&path)
                    .map(|s| s.trim().to_owned())
                    .map_err(|e| format!("{}: {e}", path.display()))
            }
        }
    }
}

/// Expands a leading `$CREDENTIALS_DIRECTORY` / `${CREDENTIALS_DIRECTORY}` (systemd's
/// `LoadCredential=`) in a secret file's path.
pub fn credentials_path(
    path: &Path,
    directory: Option<std::ffi::OsString>,
) -> Result<PathBuf, String> {
    let text = path.to_string_lossy();
    let rest = ["$CREDENTIALS_DIRECTORY/", "${CREDENTIALS_DIRECTORY}/"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix));
    match (rest, directory) {
        (None, _) => Ok(path.to_owned()),
        (Some(rest), Some(directory)) => Ok(PathBuf::from(directory).join(rest)),
        (Some(_), None) => Err(format!(
            "{} names $CREDENTIALS_DIRECTORY, which is not set (LoadCredential= in the service unit sets it)",
            path.display()
        )),
    }
}

impl WatchConfig {
    /// The kinds of change a watch can report (all of them when `events` is not given).
    pub const EVENTS: [&'static str; 4] = ["create", "modify", "remove", "rename"];
    /// `debounce_ms` when not given.
    pub const DEFAULT_DEBOUNCE_MS: u64 = 500;

    /// `text` when not given.
    pub fn default_text(path: &Path) -> String {
        format!("Files changed under {}.", path.display())
    }
}

/// One `[[watch]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchConfig {
    pub name: String,
    /// An absolute path (a directory, or a file).
    pub path: PathBuf,
    pub recursive: bool,
    /// Globs over paths relative to `path`; empty: everything.
    pub include: Vec<String>,
    /// Globs excluded besides the defaults (`.git`, `target`, `node_modules`, swap files).
    pub exclude: Vec<String>,
    /// Of `create`, `modify`, `remove`, `rename`; all by default.
    pub events: Vec<String>,
    pub debounce: Duration,
    /// What the event says to the brain before the list of changes.
    pub text: String,
    /// `queue` (the default) or `parallel`.
    pub urgency: Urgency,
    pub run: RunSettings,
}

/// One `[[cron]]` job. The schedule and zone are checked by the timer when it starts (a bad
/// one stops the daemon with exit 78, naming `cron[i].schedule` or `cron[i].tz`).
#[derive(Clone, Debug, PartialEq)]
pub struct CronJobConfig {
    pub name: String,
    /// A cron expression (5 or 6 fields), `every DURATION` or `at TIME`.
    pub schedule: String,
    /// An IANA zone name; `None`: the system's zone.
    pub tz: Option<String>,
    pub what: CronWhat,
    /// `parallel` (the default) or `queue`.
    pub urgency: Urgency,
    /// `skip`, `once` (the default) or `all`.
    pub missed: String,
    pub max_lateness: Duration,
    pub enabled: bool,
    pub run: RunSettings,
}

/// What an occurrence does.
#[derive(Clone, Debug, PartialEq)]
pub enum CronWhat {
    /// An event with this text, for the brain.
    Text(String),
    /// A tool call through the pipeline, without the model.
    Action {
        tool: String,
        args: serde_json::Value,
    },
}

/// One MCP server whose tools Steward offers (as deferred tools, group `mcp:NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    /// Names the server in tool names (`NAME_tool`), groups and `steward status`.
    pub name: String,
    pub transport: McpTransport,
    /// Tools that only read. MCP's `readOnlyHint` is a hint from the server, not trusted:
    /// every other tool is treated as a write that is not idempotent (confirmed first).
    pub read_only_tools: Vec<String>,
    /// Tools safe to repeat with the same arguments (no confirmation needed).
    pub idempotent_tools: Vec<String>,
    /// Eligible for deferred loading (the default); `false` always sends their schemas.
    pub defer: bool,
    pub call_timeout: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC over stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP at this URL, with an optional bearer token from the environment.
    Http {
        url: String,
        bearer_token_env: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolsConfig {
    /// Absolute directories file tools may touch; empty means the workspace
    /// (`<data_dir>/workspace`). The first is where relative paths start.
    pub roots: Vec<PathBuf>,
    /// `tools.untrusted_roots`: folders whose files are someone else's words (downloads, a
    /// shared folder). Reading them taints the step, as reading a watched folder does.
    pub untrusted_roots: Vec<PathBuf>,
    /// How long a request for confirmation waits for the owner before it expires.
    pub confirm_expiry: Duration,
    /// `[[tools.policy]]`, first match wins.
    pub policy: Vec<PolicyRuleConfig>,
    /// `tools.ledger_retention_days`: how long settled ledger records (and answered
    /// confirmation requests) are kept.
    pub ledger_retention: Duration,
    /// `tools.plan_mode`: only read-only tools run (look, don't touch).
    pub plan_mode: bool,
    /// `[tools.http] allow_hosts`: hosts (or host:port) `http_request` may reach even when
    /// they resolve to loopback or private addresses.
    pub http_allow_hosts: Vec<String>,
    /// `[tools.http] trusted_hosts`: hosts (or host:port) that may receive requests from a
    /// tainted step without asking — the owner's own services. Any other request in a step
    /// that read untrusted content needs confirmation, GET included: a URL carries data.
    pub http_trusted_hosts: Vec<String>,
    /// `[tools.shell]`: how shell commands are confined.
    pub shell: ShellConfig,
    /// `tools.profile`: the groups of tools enabled before `allow` and `deny`.
    pub profile: ToolProfile,
    /// `tools.allow` / `tools.deny`: tool names or `group:NAME` (`group:mcp:*`).
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `tools.defer_threshold_pct`: deferred-eligible tools are shown by name only once
    /// their schemas would take more than this share of the context window (0: always).
    pub defer_threshold_pct: u8,
    /// `tools.search.embedding_model`: the static embedding model of tool search's
    /// semantic channel (none: lexical ranking only).
    pub search_embedding_model: Option<PathBuf>,
    /// `tools.search.learn`: requests that led to a call of a tool are remembered and rank
    /// it higher.
    pub search_learn: bool,
}

/// `[tools.shell]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ShellConfig {
    /// `tools.shell.sandbox`: confined by Landlock (default) or not at all (`"none"`, only
    /// when written so).
    pub sandbox: ShellSandbox,
    /// `tools.shell.network`: sandboxed commands may open IPv4/IPv6 sockets (never Unix ones).
    pub network: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ShellSandbox {
    #[default]
    Landlock,
    None,
}

/// `tools.profile`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolProfile {
    Minimal,
    #[default]
    Assistant,
    Coding,
    Full,
}

/// One `[[tools.policy]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRuleConfig {
    pub id: String,
    /// A tool name, `group:NAME` or `*`.
    pub tool: String,
    pub decision: PolicyDecisionConfig,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyDecisionConfig {
    Allow,
    Confirm,
    Deny,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    pub shutdown_grace: Duration,
    /// `None`: `steward.sock` in the data dir.
    pub socket_path: Option<PathBuf>,
    pub log_format: LogFormat,
    /// Below this much free space on the data dir's file system, new input is refused
    /// (0: never).
    pub min_free_bytes: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InboxConfig {
    pub dedupe_retention: Duration,
    pub capacity: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DispatcherConfig {
    /// Model calls in one turn (a trajectory step) before it is ended with a message.
    pub max_steps_per_turn: u32,
}

/// `[owner]`: where the owner lives and how they are reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerConfig {
    /// `owner.timezone` (checked by the daemon); `None`: the system's zone.
    pub timezone: Option<String>,
    /// `owner.email_after_secs`: an owner message no channel delivered within this is
    /// mailed to the owner; `None`: never by mail.
    pub email_after: Option<Duration>,
    /// `[owner.deliver]`: which owner channels push which classes of owner messages.
    pub deliver: steward_events::DeliveryRules,
    /// `owner.outbox_retention_days`: owner messages older than this are removed (the
    /// newest always stays, so ids keep growing).
    pub outbox_retention: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrajectoryConfig {
    /// `trajectory.retention_days`: items older than this leave the disk (the newest
    /// summary and the last step always stay); `None` keeps every item for ever.
    pub retention: Option<Duration>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LaneConfig {
    pub max_parallel: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelProvider {
    /// No LLM: slash commands and rules only.
    None,
    /// An OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, vLLM, llama.cpp,
    /// LM Studio, OpenRouter…).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub provider: ModelProvider,
    /// e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub model: String,
    /// Where the API key comes from; none for local servers.
    pub api_key: ApiKeySource,
    /// Longest wait for the start of a response, and between two streamed chunks.
    pub timeout: Duration,
    /// How many tokens the model reads at most; the trajectory is compacted to fit.
    pub context_window_tokens: u64,
    /// The longest answer asked for (Anthropic requires it); reserved out of the window.
    pub max_output_tokens: u64,
    /// What its tokens cost, when the owner said.
    pub prices: Option<Prices>,
}

/// Names of jobs, watches and webhook routes: 1-64 ASCII letters, digits, `-` or `_`
/// (they appear in channels, URLs and tool arguments).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The context window of well-known models, for when `context_window_tokens` is not set.
/// Unknown models (most local ones) get a conservative 32k.
pub fn known_context_window(provider: ModelProvider, model: &str) -> u64 {
    let model = model.to_ascii_lowercase();
    let name = model.rsplit('/').next().unwrap_or(&model);
    if provider == ModelProvider::Anthropic || name.starts_with("claude") {
        200_000
    } else if name.starts_with("gpt-4.1") {
        1_047_576
    } else if name.starts_with("gpt-5") {
        400_000
    } else if name.starts_with("o1") || name.starts_with("o3") || name.starts_with("o4") {
        200_000
    } else if name.starts_with("gpt-4o") || name.starts_with("gpt-4-turbo") {
        128_000
    } else {
        32_768
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiKeySource {
    None,
    Env(String),
    File(PathBuf),
}

impl Default for Config {
    fn default() -> Self {
        // The embedded defaults are the ones documented in default.toml; a test keeps the two
        // equal, so parsing an empty document is the single source of truth.
        Self::from_toml("", None).expect("the empty configuration is valid")
    }
}

/// The JSON Schema of the config file (`steward config schema`), generated from the types
/// the file is read into: every table and key, their types, and no others (unknown keys are
/// errors). Ranges and cross-checks are beyond a schema; `steward config check` applies them.
pub fn json_schema() -> serde_json::Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(raw::RawConfig)).unwrap_or_default();
    if let Some(object) = schema.as_object_mut() {
        object.insert("title".into(), "steward config.toml".into());
    }
    schema
}

impl Config {
    /// Parses and validates `text`; `origin` names the file in error messages.
    pub fn from_toml(text: &str, origin: Option<&Path>) -> Result<Self, ConfigError> {
        // A file of many jobs is read in sections; any error is found again by reading it
        // whole, so that it names the same key and line (see `sections`).
        if let Some(config) =
            sections::parse(text).and_then(|raw| validate::resolve(raw, text).ok())
        {
            return Ok(config);
        }
        let raw = raw::parse(text).map_err(|e| e.with_origin(origin))?;
        validate::resolve(raw, text).map_err(|e| e.with_origin(origin))
    }

    /// Reads `path`. A missing file is `Ok(None)`: the caller runs on the embedded defaults.
    pub fn load(path: &Path) -> Result<Option<Self>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_toml(&text, Some(path)).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests;

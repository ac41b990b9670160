//! The file as written: serde structs with `deny_unknown_fields` and named defaults. Values
//! that need checking beyond their type keep their span (`Spanned`) so that validation errors
//! can point at the line.

use crate::spanned::Spanned;
use serde::Deserialize;

use crate::error::{ConfigError, line_of};

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConfig {
    pub daemon: RawDaemon,
    pub inbox: RawInbox,
    pub dispatcher: RawDispatcher,
    pub trajectory: RawTrajectory,
    pub lanes: RawLanes,
    pub model: RawModel,
    pub urgency: RawUrgency,
    pub tools: RawTools,
    pub mcp: RawMcp,
    pub cron: Vec<RawCronJob>,
    pub watch: Vec<RawWatch>,
    pub http: Option<RawHttpServer>,
    pub webhook: RawWebhook,
    pub senders: RawSenders,
    pub email: Option<crate::email::RawEmail>,
    pub matrix: Option<crate::matrix::RawMatrix>,
    pub telegram: Option<crate::telegram::RawTelegram>,
    pub owner: RawOwner,
    /// `[models.NAME]`: model profiles a job, route or watch may name with `model`.
    pub models: std::collections::BTreeMap<String, RawModel>,
    pub budget: crate::budget::RawBudget,
    pub usage: crate::budget::RawUsage,
    pub web_search: Option<crate::web_search::RawWebSearch>,
    pub skills: crate::skills::RawSkills,
    pub agents: RawAgents,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAgents {
    /// Sub-agents at work at once (queued or running).
    pub max_running: Spanned<u64>,
    /// Whether a sub-agent may be given tools that reach people (notify_owner, email sends).
    pub allow_sending: bool,
}

impl Default for RawAgents {
    fn default() -> Self {
        Self {
            max_running: Spanned::new(0..0, 2),
            allow_sending: false,
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawOwner {
    /// IANA zone the owner lives in (default: the system's).
    pub timezone: Option<Spanned<String>>,
    /// Mail an owner message no channel delivered after this many seconds (0: at once;
    /// unset: never by mail). Needs `[email]` and an owner address.
    pub email_after_secs: Option<Spanned<u64>>,
    /// Which owner channels are given which messages: channel (`socket`, `http`, `email`)
    /// → classes (`answers`, `notices`, `confirmations`). A channel not named gets all.
    pub deliver: std::collections::BTreeMap<String, Vec<Spanned<String>>>,
    /// Owner messages older than this many days leave the outbox (the newest stays).
    pub outbox_retention_days: Spanned<f64>,
}

impl Default for RawOwner {
    fn default() -> Self {
        Self {
            timezone: None,
            email_after_secs: None,
            deliver: Default::default(),
            outbox_retention_days: Spanned::new(0..0, 90.0),
        }
    }
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawSenders {
    pub owner: Vec<String>,
    pub trusted: Vec<String>,
    pub unknown: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttpServer {
    pub listen: Option<Spanned<String>>,
    pub max_body_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    pub metrics_public: bool,
    pub request_timeout_secs: Option<Spanned<u64>>,
    /// Names the owner API answers to in `Host` besides the bound address and loopback
    /// (e.g. the name a reverse proxy forwards); any other `Host` is refused (DNS rebinding).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Connections served at once (more wait until one ends); default 256.
    pub max_connections: Option<Spanned<u64>>,
    /// Seconds a client has to send a request's headers (slowloris); default 10.
    pub header_timeout_secs: Option<Spanned<u64>>,
    /// The owner's web page under `/` (log in with `steward web login`); default true.
    pub web: Option<bool>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawWebhook {
    pub routes: Vec<RawWebhookRoute>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebhookRoute {
    pub name: Spanned<String>,
    pub auth: Spanned<String>,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub urgency: Option<Spanned<String>>,
    pub text: Option<String>,
    pub max_body_bytes: Option<Spanned<u64>>,
    pub rate_per_min: Option<Spanned<u64>>,
    pub tolerance_secs: Option<Spanned<u64>>,
    pub trust: Option<Spanned<String>>,
    /// A `[models.NAME]` profile its turns run on (default: `[model]`).
    pub model: Option<Spanned<String>>,
    /// Tokens one run may use; the turn stops before the call that would pass it.
    pub max_tokens_per_run: Option<Spanned<u64>>,
    /// Model calls one run may make.
    pub max_model_calls_per_run: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWatch {
    pub name: Spanned<String>,
    pub path: Spanned<String>,
    #[serde(default = "default_true")]
    pub recursive: bool,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    pub events: Option<Spanned<Vec<String>>>,
    pub debounce_ms: Option<Spanned<u64>>,
    pub text: Option<String>,
    pub urgency: Option<Spanned<String>>,
    /// A `[models.NAME]` profile its turns run on (default: `[model]`).
    pub model: Option<Spanned<String>>,
    /// Tokens one run may use; the turn stops before the call that would pass it.
    pub max_tokens_per_run: Option<Spanned<u64>>,
    /// Model calls one run may make.
    pub max_model_calls_per_run: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCronJob {
    pub name: Spanned<String>,
    pub schedule: Spanned<String>,
    pub tz: Option<Spanned<String>>,
    pub text: Option<String>,
    pub action: Option<RawCronAction>,
    pub urgency: Option<Spanned<String>>,
    pub missed: Option<Spanned<String>>,
    pub max_lateness_secs: Option<Spanned<u64>>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A `[models.NAME]` profile its turns run on (default: `[model]`).
    pub model: Option<Spanned<String>>,
    /// Tokens one run may use; the turn stops before the call that would pass it.
    pub max_tokens_per_run: Option<Spanned<u64>>,
    /// Model calls one run may make.
    pub max_model_calls_per_run: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCronAction {
    pub tool: String,
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub args: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawMcp {
    pub servers: Vec<RawMcpServer>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub name: Spanned<String>,
    pub command: Option<Spanned<String>>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    pub url: Option<Spanned<String>>,
    pub bearer_token_env: Option<String>,
    #[serde(default)]
    pub read_only_tools: Vec<String>,
    #[serde(default)]
    pub idempotent_tools: Vec<String>,
    #[serde(default = "default_true")]
    pub defer: bool,
    #[serde(default = "default_call_timeout")]
    pub call_timeout_secs: Spanned<u64>,
}

fn default_true() -> bool {
    true
}

fn default_call_timeout() -> Spanned<u64> {
    Spanned::new(0..0, 120)
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawTools {
    pub roots: Vec<Spanned<String>>,
    pub untrusted_roots: Vec<Spanned<String>>,
    pub confirm_expiry_secs: Spanned<u64>,
    pub policy: Vec<RawPolicyRule>,
    pub plan_mode: bool,
    pub ledger_retention_days: Spanned<f64>,
    pub http: RawHttp,
    pub shell: RawShell,
    pub profile: Spanned<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub defer_threshold_pct: Spanned<u64>,
    pub search: RawToolSearch,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawToolSearch {
    /// A static embedding model (model2vec format: tokenizer.json + model.safetensors) for
    /// the semantic channel of tool search; an absolute directory.
    pub embedding_model: Option<Spanned<String>>,
    /// Learn from use: requests that led to a call of a tool rank it higher (default true).
    pub learn: Option<bool>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawShell {
    /// "landlock" (the default: every command confined by the kernel) or "none".
    pub sandbox: Option<Spanned<String>>,
    /// Let sandboxed commands open IPv4/IPv6 sockets (default false; Unix sockets never).
    pub network: bool,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawHttp {
    pub allow_hosts: Vec<String>,
    pub trusted_hosts: Vec<String>,
}

impl Default for RawTools {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            untrusted_roots: Vec::new(),
            confirm_expiry_secs: Spanned::new(0..0, 3600),
            policy: Vec::new(),
            plan_mode: false,
            ledger_retention_days: Spanned::new(0..0, 7.0),
            http: RawHttp::default(),
            shell: RawShell::default(),
            profile: Spanned::new(0..0, "assistant".into()),
            allow: Vec::new(),
            deny: Vec::new(),
            defer_threshold_pct: Spanned::new(0..0, 10),
            search: RawToolSearch::default(),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicyRule {
    pub id: Spanned<String>,
    pub tool: Spanned<String>,
    pub decision: Spanned<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawDaemon {
    pub shutdown_grace_secs: Spanned<u64>,
    pub socket_path: Option<Spanned<String>>,
    pub log_format: Spanned<String>,
    pub min_free_mb: Spanned<u64>,
}

impl Default for RawDaemon {
    fn default() -> Self {
        Self {
            shutdown_grace_secs: Spanned::new(0..0, 10),
            socket_path: None,
            log_format: Spanned::new(0..0, "pretty".into()),
            min_free_mb: Spanned::new(0..0, 64),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawInbox {
    pub dedupe_retention_days: Spanned<f64>,
    pub capacity: Spanned<u64>,
}

impl Default for RawInbox {
    fn default() -> Self {
        Self {
            dedupe_retention_days: Spanned::new(0..0, 30.0),
            capacity: Spanned::new(0..0, 10_000),
        }
    }
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawTrajectory {
    /// Unset: every item is kept for ever.
    pub retention_days: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawDispatcher {
    pub max_steps_per_turn: Spanned<u64>,
}

impl Default for RawDispatcher {
    fn default() -> Self {
        Self {
            max_steps_per_turn: Spanned::new(0..0, 25),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawLanes {
    pub max_parallel: Spanned<u64>,
}

impl Default for RawLanes {
    fn default() -> Self {
        Self {
            max_parallel: Spanned::new(0..0, 4),
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawModel {
    pub provider: Spanned<String>,
    pub base_url: Option<Spanned<String>>,
    pub model: Option<Spanned<String>>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    pub timeout_secs: Spanned<u64>,
    pub context_window_tokens: Option<Spanned<u64>>,
    pub max_output_tokens: Spanned<u64>,
    /// Price per million input tokens (for `steward usage` and `budget.daily_cost`).
    pub price_in_per_mtok: Option<f64>,
    /// Price per million input tokens read from the provider's cache.
    pub price_cached_per_mtok: Option<f64>,
    pub price_out_per_mtok: Option<f64>,
}

impl Default for RawModel {
    fn default() -> Self {
        Self {
            provider: Spanned::new(0..0, "none".into()),
            base_url: None,
            model: None,
            api_key_env: None,
            api_key_file: None,
            timeout_secs: Spanned::new(0..0, 120),
            context_window_tokens: None,
            max_output_tokens: Spanned::new(0..0, 4096),
            price_in_per_mtok: None,
            price_cached_per_mtok: None,
            price_out_per_mtok: None,
        }
    }
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawUrgency {
    pub rules: Vec<RawUrgencyRule>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUrgencyRule {
    pub source: Option<Spanned<String>>,
    pub channel: Option<String>,
    pub trust: Option<Spanned<String>>,
    pub field: Option<Spanned<String>>,
    pub equals: Option<serde_json::Value>,
    pub urgency: Spanned<String>,
}

/// Parses the document into the raw structs; type errors and unknown keys name the key path.
pub(crate) fn parse(text: &str) -> Result<RawConfig, ConfigError> {
    let document = || toml::Deserializer::parse(text).map_err(|e| syntax_error(text, &e));
    // Tracking the path of every value is only needed to name the key of an error, and it
    // slowed the parse of a large file (10,000 jobs): a file that fails is read again with it.
    if let Ok(raw) = RawConfig::deserialize(document()?) {
        return Ok(raw);
    }
    let deserializer = document()?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        // `Spanned` values show up as a private segment in the path; the user never wrote it.
        let mut key = e
            .path()
            .to_string()
            .split('.')
            .filter(|segment| !segment.starts_with("$__"))
            .collect::<Vec<_>>()
            .join(".");
        let inner = e.inner();
        let message = inner.message().trim().to_owned();
        // serde reports an unknown key against its parent table; name the key itself.
        if let Some(name) = message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
        {
            key = if key == "." || key.is_empty() {
                name.to_owned()
            } else if key == name || key.ends_with(&format!(".{name}")) {
                key
            } else {
                format!("{key}.{name}")
            };
        }
        let line = inner.span().map(|span| line_of(text, span.start));
        ConfigError::invalid(key, line, message)
    })
}

fn syntax_error(text: &str, error: &toml::de::Error) -> ConfigError {
    let line = error.span().map(|span| line_of(text, span.start));
    let key = error
        .span()
        .and_then(|span| text.get(span))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.len() < 80)
        .unwrap_or_else(|| "(syntax)".to_owned());
    ConfigError::invalid(
        key,
        line,
        format!("TOML syntax: {}", error.message().trim()),
    )
}

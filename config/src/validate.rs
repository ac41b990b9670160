//! From the raw file to a validated [`Config`]: ranges, enumerations and cross-checks, each
//! error pointing at the key and its line.

use std::path::PathBuf;
use std::time::Duration;

use crate::spanned::{InRange, LineOf, Spanned};
use steward_events::{FieldMatch, Source, Trust, Urgency, UrgencyRule};

/// Where Anthropic's Messages API lives when `base_url` is not set.
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

use crate::error::{ConfigError, line_of};
use crate::raw::RawWatch;
use crate::raw::{RawCronJob, RawMcpServer};
use crate::{CronJobConfig, CronWhat, WatchConfig};

/// The body limit of the server and of routes that set none.
const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// `[http]` (its defaults when only webhook routes are configured).
fn resolve_http_server(
    raw: Option<&crate::raw::RawHttpServer>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<crate::HttpConfig, ConfigError> {
    let listen = raw.and_then(|h| h.listen.as_ref());
    let address = listen.map_or("127.0.0.1:8787".to_owned(), |l| l.get_ref().clone());
    if address.parse::<std::net::SocketAddr>().is_err() {
        return Err(ConfigError::invalid(
            "http.listen",
            listen.and_then(|l| at(l.span())),
            format!("{address:?} is not host:port (an IP address, e.g. 127.0.0.1:8787)"),
        ));
    }
    let max_body = match raw.and_then(|h| h.max_body_bytes.as_ref()) {
        Some(bytes) => in_range("http.max_body_bytes", bytes, 1, 1 << 30)? as usize,
        None => DEFAULT_MAX_BODY,
    };
    Ok(crate::HttpConfig {
        listen: address,
        max_body_bytes: max_body,
        metrics_public: raw.is_some_and(|h| h.metrics_public),
        web: raw.and_then(|h| h.web).unwrap_or(true),
        hosts: raw
            .map(|h| {
                h.hosts
                    .iter()
                    .map(|n| n.trim().to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default(),
        max_connections: match raw.and_then(|h| h.max_connections.as_ref()) {
            Some(max) => in_range("http.max_connections", max, 1, 65_536)? as usize,
            None => 256,
        },
        header_timeout: Duration::from_secs(
            match raw.and_then(|h| h.header_timeout_secs.as_ref()) {
                Some(secs) => in_range("http.header_timeout_secs", secs, 1, 600)?,
                None => 10,
            },
        ),
        request_timeout: Duration::from_secs(
            match raw.and_then(|h| h.request_timeout_secs.as_ref()) {
                Some(secs) => in_range("http.request_timeout_secs", secs, 1, 3600)?,
                None => 30,
            },
        ),
    })
}

fn resolve_http(
    http: Option<crate::raw::RawHttpServer>,
    routes: Vec<crate::raw::RawWebhookRoute>,
    profiles: &std::collections::BTreeMap<String, ModelConfig>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<(Option<crate::HttpConfig>, Vec<crate::WebhookRouteConfig>), ConfigError> {
    let server = match (&http, routes.is_empty()) {
        (None, true) => None,
        (raw, _) => Some(resolve_http_server(raw.as_ref(), at, in_range)?),
    };
    let mut resolved: Vec<crate::WebhookRouteConfig> = Vec::new();
    for (i, route) in routes.into_iter().enumerate() {
        let key = |name: &str| format!("webhook.routes[{i}].{name}");
        let name = route.name.get_ref().clone();
        let valid_name = crate::is_plain_name(&name);
        if !valid_name || resolved.iter().any(|r| r.name == name) {
            return Err(ConfigError::invalid(
                key("name"),
                at(route.name.span()),
                format!("{name:?}: 1-64 letters, digits, '-' or '_', unique"),
            ));
        }
        let auth = route.auth.get_ref().clone();
        if !["github", "stripe", "standard", "bearer"].contains(&auth.as_str()) {
            return Err(ConfigError::invalid(
                key("auth"),
                at(route.auth.span()),
                format!("{auth:?}: expected \"github\", \"stripe\", \"standard\" or \"bearer\""),
            ));
        }
        let secret = match (route.secret_env, route.secret_file) {
            (Some(var), None) => crate::SecretSource::Env(var),
            (None, Some(file)) => crate::SecretSource::File(PathBuf::from(file)),
            _ => {
                return Err(ConfigError::invalid(
                    key("secret_env"),
                    at(route.name.span()),
                    "set exactly one of secret_env and secret_file",
                ));
            }
        };
        let urgency = match route.urgency.as_ref().map(|u| u.get_ref().as_str()) {
            None | Some("queue") => Urgency::Queue,
            Some("parallel") => Urgency::Parallel,
            Some("cancel") => Urgency::Cancel,
            Some(other) => {
                return Err(ConfigError::invalid(
                    key("urgency"),
                    route.urgency.as_ref().and_then(|u| at(u.span())),
                    format!("{other:?}: expected queue, parallel or cancel"),
                ));
            }
        };
        let trusted = match route.trust.as_ref().map(|t| t.get_ref().as_str()) {
            None | Some("untrusted") => false,
            Some("trusted") => true,
            Some(other) => {
                return Err(ConfigError::invalid(
                    key("trust"),
                    route.trust.as_ref().and_then(|t| at(t.span())),
                    format!("{other:?}: expected \"untrusted\" or \"trusted\""),
                ));
            }
        };
        let max_body = match &route.max_body_bytes {
            Some(bytes) => in_range(&key("max_body_bytes"), bytes, 1, 1 << 30)? as usize,
            None => server
                .as_ref()
                .map_or(DEFAULT_MAX_BODY, |s| s.max_body_bytes),
        };
        let rate = match &route.rate_per_min {
            Some(rate) => in_range(&key("rate_per_min"), rate, 1, 1_000_000)? as u32,
            None => 6000,
        };
        let tolerance = match &route.tolerance_secs {
            Some(t) => in_range(&key("tolerance_secs"), t, 1, 86_400)? as i64,
            None => 300,
        };
        resolved.push(crate::WebhookRouteConfig {
            run: crate::budget::run_settings(
                || key("").trim_end_matches('.').to_owned(),
                crate::budget::RawRunSettings {
                    model: &route.model,
                    max_tokens_per_run: &route.max_tokens_per_run,
                    max_model_calls_per_run: &route.max_model_calls_per_run,
                },
                profiles,
                at,
                in_range,
            )?,
            text: route
                .text
                .unwrap_or_else(|| format!("A delivery on the webhook route {name}.")),
            name,
            auth,
            secret,
            urgency,
            max_body_bytes: max_body,
            rate_per_min: rate,
            tolerance_secs: tolerance,
            trusted,
        });
    }
    Ok((server, resolved))
}

fn resolve_watches(
    watches: Vec<RawWatch>,
    profiles: &std::collections::BTreeMap<String, ModelConfig>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<Vec<WatchConfig>, ConfigError> {
    let mut resolved: Vec<WatchConfig> = Vec::new();
    for (i, watch) in watches.into_iter().enumerate() {
        let key = |name: &str| format!("watch[{i}].{name}");
        let name = watch.name.get_ref().clone();
        let valid_name = crate::is_plain_name(&name);
        if !valid_name || resolved.iter().any(|w| w.name == name) {
            return Err(ConfigError::invalid(
                key("name"),
                at(watch.name.span()),
                format!("{name:?}: 1-64 letters, digits, '-' or '_', unique"),
            ));
        }
        let path = PathBuf::from(watch.path.get_ref());
        if !path.is_absolute() {
            return Err(ConfigError::invalid(
                key("path"),
                at(watch.path.span()),
                format!("{:?} is not an absolute path", watch.path.get_ref()),
            ));
        }
        for (list, patterns) in [("include", &watch.include), ("exclude", &watch.exclude)] {
            for (j, pattern) in patterns.iter().enumerate() {
                if let Err(e) = globset::Glob::new(pattern) {
                    return Err(ConfigError::invalid(
                        format!("{}[{j}]", key(list)),
                        at(watch.path.span()),
                        format!("{pattern:?} is not a glob: {}", e.kind()),
                    ));
                }
            }
        }
        let events = match watch.events {
            None => WatchConfig::EVENTS
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
            Some(events) => {
                let span = events.span();
                let events = events.into_inner();
                if let Some(bad) = events
                    .iter()
                    .find(|e| !WatchConfig::EVENTS.contains(&e.as_str()))
                {
                    return Err(ConfigError::invalid(
                        key("events"),
                        at(span),
                        format!("{bad:?}: expected create, modify, remove or rename"),
                    ));
                }
                events
            }
        };
        let urgency = match watch.urgency.as_ref().map(|u| u.get_ref().as_str()) {
            None | Some("queue") => Urgency::Queue,
            Some("parallel") => Urgency::Parallel,
            Some(other) => {
                return Err(ConfigError::invalid(
                    key("urgency"),
                    watch.urgency.as_ref().and_then(|u| at(u.span())),
                    format!("{other:?}: a watch is \"queue\" or \"parallel\""),
                ));
            }
        };
        let debounce = match &watch.debounce_ms {
            Some(ms) => in_range(&key("debounce_ms"), ms, 10, 600_000)?,
            None => WatchConfig::DEFAULT_DEBOUNCE_MS,
        };
        resolved.push(WatchConfig {
            run: crate::budget::run_settings(
                || key("").trim_end_matches('.').to_owned(),
                crate::budget::RawRunSettings {
                    model: &watch.model,
                    max_tokens_per_run: &watch.max_tokens_per_run,
                    max_model_calls_per_run: &watch.max_model_calls_per_run,
                },
                profiles,
                at,
                in_range,
            )?,
            text: watch
                .text
                .unwrap_or_else(|| WatchConfig::default_text(&path)),
            name,
            path,
            recursive: watch.recursive,
            include: watch.include,
            exclude: watch.exclude,
            events,
            debounce: Duration::from_millis(debounce),
            urgency,
        });
    }
    Ok(resolved)
}

fn resolve_cron_jobs(
    jobs: Vec<RawCronJob>,
    profiles: &std::collections::BTreeMap<String, ModelConfig>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<Vec<CronJobConfig>, ConfigError> {
    let mut resolved: Vec<CronJobConfig> = Vec::with_capacity(jobs.len());
    // A set, not a scan of the jobs so far: 10,000 jobs were 50 million comparisons.
    let mut names = std::collections::HashSet::with_capacity(jobs.len());
    for (i, job) in jobs.into_iter().enumerate() {
        let key = |name: &str| format!("cron[{i}].{name}");
        let name = job.name.get_ref().clone();
        let valid_name = crate::is_plain_name(&name);
        if !valid_name {
            return Err(ConfigError::invalid(
                key("name"),
                at(job.name.span()),
                format!("{name:?}: 1-64 letters, digits, '-' or '_'"),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(ConfigError::invalid(
                key("name"),
                at(job.name.span()),
                format!("{name:?} is used by another job"),
            ));
        }
        let what = match (job.text, job.action) {
            (Some(text), None) => CronWhat::Text(text),
            (None, Some(action)) => CronWhat::Action {
                tool: action.tool,
                args: match action.args {
                    Some(args) => serde_json::to_value(args).map_err(|e| {
                        ConfigError::invalid(key("action"), at(job.name.span()), e.to_string())
                    })?,
                    None => serde_json::json!({}),
                },
            },
            _ => {
                return Err(ConfigError::invalid(
                    key("text"),
                    at(job.name.span()),
                    "set exactly one of `text` (for the brain) and `action` (a tool call)",
                ));
            }
        };
        let urgency = match job.urgency.as_ref().map(|u| u.get_ref().as_str()) {
            None | Some("parallel") => Urgency::Parallel,
            Some("queue") => Urgency::Queue,
            Some(other) => {
                return Err(ConfigError::invalid(
                    key("urgency"),
                    job.urgency.as_ref().and_then(|u| at(u.span())),
                    format!("{other:?}: a job is \"parallel\" or \"queue\""),
                ));
            }
        };
        let missed = match job.missed.as_ref().map(|m| m.get_ref().as_str()) {
            None => "once".to_owned(),
            Some(policy @ ("skip" | "once" | "all")) => policy.to_owned(),
            Some(other) => {
                return Err(ConfigError::invalid(
                    key("missed"),
                    job.missed.as_ref().and_then(|m| at(m.span())),
                    format!("{other:?}: expected \"skip\", \"once\" or \"all\""),
                ));
            }
        };
        let max_lateness = match &job.max_lateness_secs {
            Some(secs) => in_range(&key("max_lateness_secs"), secs, 1, 366 * 86_400)?,
            None => 3600,
        };
        resolved.push(CronJobConfig {
            run: crate::budget::run_settings(
                || key("").trim_end_matches('.').to_owned(),
                crate::budget::RawRunSettings {
                    model: &job.model,
                    max_tokens_per_run: &job.max_tokens_per_run,
                    max_model_calls_per_run: &job.max_model_calls_per_run,
                },
                profiles,
                at,
                in_range,
            )?,
            name,
            schedule: job.schedule.into_inner(),
            tz: job.tz.map(Spanned::into_inner),
            what,
            urgency,
            missed,
            max_lateness: Duration::from_secs(max_lateness),
            enabled: job.enabled,
        });
    }
    Ok(resolved)
}
use crate::raw::{RawConfig, RawDaemon, RawModel, RawSenders, RawTools, RawUrgencyRule};
use crate::{
    ApiKeySource, Config, DaemonConfig, DispatcherConfig, InboxConfig, LaneConfig, LogFormat,
    McpServerConfig, McpTransport, ModelConfig, ModelProvider, OwnerConfig, PolicyDecisionConfig,
    PolicyRuleConfig, ShellConfig, ShellSandbox, ToolProfile, ToolsConfig, TrajectoryConfig,
    known_context_window,
};

/// A retention in days, fractions allowed (`0.5` is twelve hours): at least a minute (the
/// purge runs at a quarter of the shortest retention, never more often than every 15 s) and
/// at most ten years.
fn retention_days(
    key: &str,
    value: &Spanned<f64>,
    at: LineOf<'_>,
) -> Result<Duration, ConfigError> {
    const MIN_DAYS: f64 = 1.0 / 1440.0;
    let days = *value.get_ref();
    if days.is_finite() && (MIN_DAYS..=3650.0).contains(&days) {
        Ok(Duration::from_secs_f64(days * 86_400.0))
    } else {
        Err(ConfigError::invalid(
            key,
            at(value.span()),
            format!("{days} is out of range; expected days from 0.000695 (one minute) to 3650"),
        ))
    }
}

/// The owner channels `[owner.deliver]` may name: those that push owner messages.
const OWNER_CHANNELS: [&str; 5] = ["socket", "http", "email", "matrix", "telegram"];

fn delivery_rules(
    raw: &std::collections::BTreeMap<String, Vec<Spanned<String>>>,
    at: LineOf<'_>,
) -> Result<steward_events::DeliveryRules, ConfigError> {
    use steward_events::DeliveryClass;
    let mut named = std::collections::BTreeMap::new();
    for (channel, classes) in raw {
        let key = format!("owner.deliver.{channel}");
        if !OWNER_CHANNELS.contains(&channel.as_str()) {
            return Err(ConfigError::invalid(
                key,
                classes.first().and_then(|c| at(c.span())),
                format!(
                    "no owner channel is called {channel:?}; expected one of {}",
                    OWNER_CHANNELS.join(", ")
                ),
            ));
        }
        let mut set = std::collections::BTreeSet::new();
        for (index, class) in classes.iter().enumerate() {
            let parsed = DeliveryClass::parse(class.get_ref()).ok_or_else(|| {
                ConfigError::invalid(
                    format!("{key}[{index}]"),
                    at(class.span()),
                    format!(
                        "{:?} is not a kind of owner message; expected answers, notices or confirmations",
                        class.get_ref()
                    ),
                )
            })?;
            set.insert(parsed);
        }
        named.insert(channel.clone(), set);
    }
    Ok(steward_events::DeliveryRules::new(named))
}

fn resolve_mcp_servers(
    servers: Vec<RawMcpServer>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let mut resolved: Vec<McpServerConfig> = Vec::new();
    for (i, server) in servers.into_iter().enumerate() {
        let key = |name: &str| format!("mcp.servers[{i}].{name}");
        let name = server.name.get_ref().clone();
        let valid_name = !name.is_empty()
            && name.len() <= 32
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid_name {
            return Err(ConfigError::invalid(
                key("name"),
                at(server.name.span()),
                format!(
                    "{name:?}: 1-32 letters, digits or '-' (it prefixes the server's tool names)"
                ),
            ));
        }
        if resolved.iter().any(|s| s.name == name) {
            return Err(ConfigError::invalid(
                key("name"),
                at(server.name.span()),
                format!("{name:?} is used by another server"),
            ));
        }
        let transport = match (server.command, server.url) {
            (Some(command), None) => McpTransport::Stdio {
                command: command.into_inner(),
                args: server.args,
                env: server.env.into_iter().collect(),
            },
            (None, Some(url)) => {
                let text = url.get_ref();
                if !(text.starts_with("http://") || text.starts_with("https://")) {
                    return Err(ConfigError::invalid(
                        key("url"),
                        at(url.span()),
                        format!("{text:?} is not an http(s) URL"),
                    ));
                }
                McpTransport::Http {
                    url: url.into_inner(),
                    bearer_token_env: server.bearer_token_env,
                }
            }
            _ => {
                return Err(ConfigError::invalid(
                    key("command"),
                    at(server.name.span()),
                    "set exactly one of `command` (stdio) and `url` (streamable HTTP)",
                ));
            }
        };
        resolved.push(McpServerConfig {
            name,
            transport,
            read_only_tools: server.read_only_tools,
            idempotent_tools: server.idempotent_tools,
            defer: server.defer,
            call_timeout: Duration::from_secs(in_range(
                &key("call_timeout_secs"),
                &server.call_timeout_secs,
                1,
                3600,
            )?),
        });
    }
    Ok(resolved)
}

pub(crate) fn resolve(raw: RawConfig, text: &str) -> Result<Config, ConfigError> {
    let at = |span: std::ops::Range<usize>| (span != (0..0)).then(|| line_of(text, span.start));
    let in_range = |key: &str, value: &Spanned<u64>, min: u64, max: u64| {
        let v = *value.get_ref();
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(ConfigError::invalid(
                key,
                at(value.span()),
                format!("{v} is out of range; expected {min}..={max}"),
            ))
        }
    };

    let daemon = resolve_daemon(&raw.daemon, &at, &in_range)?;
    let inbox = InboxConfig {
        dedupe_retention: retention_days(
            "inbox.dedupe_retention_days",
            &raw.inbox.dedupe_retention_days,
            &at,
        )?,
        capacity: in_range("inbox.capacity", &raw.inbox.capacity, 1, 10_000_000)? as usize,
    };
    let dispatcher = DispatcherConfig {
        max_steps_per_turn: in_range(
            "dispatcher.max_steps_per_turn",
            &raw.dispatcher.max_steps_per_turn,
            1,
            1000,
        )? as u32,
    };
    let trajectory = TrajectoryConfig {
        retention: match &raw.trajectory.retention_days {
            Some(days) => Some(retention_days("trajectory.retention_days", days, &at)?),
            None => None,
        },
    };
    let owner = OwnerConfig {
        timezone: match &raw.owner.timezone {
            Some(zone) if zone.get_ref().trim().is_empty() => {
                return Err(ConfigError::invalid(
                    "owner.timezone",
                    at(zone.span()),
                    "must not be empty (leave it out for the system's zone)",
                ));
            }
            Some(zone) => Some(zone.get_ref().clone()),
            None => None,
        },
        email_after: match &raw.owner.email_after_secs {
            Some(secs) => Some(Duration::from_secs(in_range(
                "owner.email_after_secs",
                secs,
                0,
                30 * 86_400,
            )?)),
            None => None,
        },
        deliver: delivery_rules(&raw.owner.deliver, &at)?,
        outbox_retention: retention_days(
            "owner.outbox_retention_days",
            &raw.owner.outbox_retention_days,
            &at,
        )?,
    };
    let lanes = LaneConfig {
        max_parallel: in_range("lanes.max_parallel", &raw.lanes.max_parallel, 1, 256)? as usize,
    };
    let model = resolve_model("model", raw.model, &at, &in_range)?;
    let mut models = std::collections::BTreeMap::new();
    for (name, profile) in raw.models {
        if !crate::is_plain_name(&name) {
            return Err(ConfigError::invalid(
                format!("models.{name}"),
                None,
                format!("{name:?}: a profile's name is 1-64 letters, digits, '-' or '_'"),
            ));
        }
        let resolved = resolve_model(&format!("models.{name}"), profile, &at, &in_range)?;
        models.insert(name, resolved);
    }
    let budget = crate::budget::resolve_budget(&raw.budget, &in_range)?;
    let usage = crate::budget::resolve_usage(&raw.usage, &in_range)?;
    let urgency_rules = raw
        .urgency
        .rules
        .into_iter()
        .enumerate()
        .map(|(i, rule)| resolve_rule(i, rule, &at))
        .collect::<Result<Vec<_>, _>>()?;

    let mcp_servers = resolve_mcp_servers(raw.mcp.servers, &at, &in_range)?;
    let cron = resolve_cron_jobs(raw.cron, &models, &at, &in_range)?;
    let watch = resolve_watches(raw.watch, &models, &at, &in_range)?;
    let (http, webhook_routes) =
        resolve_http(raw.http, raw.webhook.routes, &models, &at, &in_range)?;
    let email = match raw.email {
        Some(email) => Some(crate::email::resolve(email, &at, &in_range)?),
        None => None,
    };
    let matrix = match raw.matrix {
        Some(matrix) => Some(crate::matrix::resolve(matrix, &at)?),
        None => None,
    };
    let telegram = match raw.telegram {
        Some(telegram) => Some(crate::telegram::resolve(telegram, &at)?),
        None => None,
    };
    let senders = resolve_senders(raw.senders, &at)?;
    let web_search = match raw.web_search {
        Some(search) => Some(crate::web_search::resolve(search, &at, &in_range)?),
        None => None,
    };
    Ok(Config {
        daemon,
        inbox,
        dispatcher,
        trajectory,
        owner,
        lanes,
        model,
        models,
        budget,
        usage,
        urgency_rules,
        mcp_servers,
        cron,
        watch,
        http,
        webhook_routes,
        senders,
        email,
        matrix,
        telegram,
        web_search,
        skills: crate::skills::resolve(&raw.skills, &at)?,
        agents: crate::AgentsConfig {
            max_running: in_range("agents.max_running", &raw.agents.max_running, 1, 64)? as usize,
            allow_sending: raw.agents.allow_sending,
        },
        tools: resolve_tools(raw.tools, &at, &in_range)?,
    })
}

/// `[daemon]`.
fn resolve_daemon(
    raw: &RawDaemon,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<DaemonConfig, ConfigError> {
    Ok(DaemonConfig {
        shutdown_grace: Duration::from_secs(in_range(
            "daemon.shutdown_grace_secs",
            &raw.shutdown_grace_secs,
            1,
            3600,
        )?),
        socket_path: match &raw.socket_path {
            Some(path) if path.get_ref().is_empty() => {
                return Err(ConfigError::invalid(
                    "daemon.socket_path",
                    at(path.span()),
                    "must not be empty (leave it out for the default)",
                ));
            }
            Some(path) => Some(PathBuf::from(path.get_ref())),
            None => None,
        },
        log_format: match raw.log_format.get_ref().as_str() {
            "pretty" => LogFormat::Pretty,
            "json" => LogFormat::Json,
            other => {
                return Err(ConfigError::invalid(
                    "daemon.log_format",
                    at(raw.log_format.span()),
                    format!("{other:?} is not a log format; expected \"pretty\" or \"json\""),
                ));
            }
        },
        min_free_bytes: in_range("daemon.min_free_mb", &raw.min_free_mb, 0, 1 << 20)? * 1024 * 1024,
    })
}

/// `[model]`: the provider, its URL and key, the model's window.
fn resolve_model(
    prefix: &str,
    raw: RawModel,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<ModelConfig, ConfigError> {
    let provider = match raw.provider.get_ref().as_str() {
        "none" => ModelProvider::None,
        "openai" => ModelProvider::OpenAi,
        "anthropic" => ModelProvider::Anthropic,
        other => {
            return Err(ConfigError::invalid(
                format!("{prefix}.provider"),
                at(raw.provider.span()),
                format!(
                    "{other:?} is not a supported provider; expected \"none\", \"openai\" or \"anthropic\""
                ),
            ));
        }
    };
    let required = |key: &str, value: &Option<Spanned<String>>| match value {
        Some(v) if !v.get_ref().trim().is_empty() => Ok(v.get_ref().clone()),
        _ if provider == ModelProvider::None => Ok(String::new()),
        Some(v) => Err(ConfigError::invalid(
            format!("{prefix}.{key}"),
            at(v.span()),
            "must not be empty",
        )),
        None => Err(ConfigError::invalid(
            format!("{prefix}.{key}"),
            at(raw.provider.span()),
            format!("is required with provider {:?}", raw.provider.get_ref()),
        )),
    };
    let base_url = match (&raw.base_url, provider) {
        (None, ModelProvider::Anthropic) => ANTHROPIC_BASE_URL.to_owned(),
        (value, _) => required("base_url", value)?,
    };
    if provider != ModelProvider::None
        && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
    {
        return Err(ConfigError::invalid(
            format!("{prefix}.base_url"),
            raw.base_url.as_ref().and_then(|u| at(u.span())),
            format!("{base_url:?} is not an http(s) URL"),
        ));
    }
    let model_name = required("model", &raw.model)?;
    let max_output_tokens = in_range(
        &format!("{prefix}.max_output_tokens"),
        &raw.max_output_tokens,
        16,
        1_000_000,
    )?;
    let context_window_tokens = match &raw.context_window_tokens {
        Some(window) => in_range(
            &format!("{prefix}.context_window_tokens"),
            window,
            max_output_tokens * 2,
            100_000_000,
        )?,
        None => known_context_window(provider, &model_name).max(max_output_tokens * 2),
    };
    Ok(ModelConfig {
        prices: crate::budget::resolve_prices(
            prefix,
            raw.price_in_per_mtok,
            raw.price_cached_per_mtok,
            raw.price_out_per_mtok,
        )?,
        model: model_name,
        context_window_tokens,
        max_output_tokens,
        base_url: base_url.trim_end_matches('/').to_owned(),
        provider,
        api_key: match (raw.api_key_env, raw.api_key_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    format!("{prefix}.api_key_env"),
                    None,
                    "set either api_key_env or api_key_file, not both",
                ));
            }
            (Some(var), None) => ApiKeySource::Env(var),
            (None, Some(file)) => ApiKeySource::File(PathBuf::from(file)),
            (None, None) => ApiKeySource::None,
        },
        timeout: Duration::from_secs(in_range(
            &format!("{prefix}.timeout_secs"),
            &raw.timeout_secs,
            1,
            3600,
        )?),
    })
}

/// `[tools]`: roots, policy rules, the selection and its limits.
fn resolve_tools(
    raw: RawTools,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<ToolsConfig, ConfigError> {
    let absolute = |key: &str, paths: &[Spanned<String>]| {
        paths
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let absolute = PathBuf::from(path.get_ref());
                if absolute.is_absolute() {
                    Ok(absolute)
                } else {
                    Err(ConfigError::invalid(
                        format!("{key}[{i}]"),
                        at(path.span()),
                        format!("{:?} is not an absolute path", path.get_ref()),
                    ))
                }
            })
            .collect::<Result<Vec<PathBuf>, ConfigError>>()
    };
    let roots = absolute("tools.roots", &raw.roots)?;
    let search_embedding_model = match &raw.search.embedding_model {
        None => None,
        Some(path) => {
            let dir = PathBuf::from(path.get_ref());
            if !dir.is_absolute() {
                return Err(ConfigError::invalid(
                    "tools.search.embedding_model",
                    at(path.span()),
                    format!("{:?} is not an absolute path", path.get_ref()),
                ));
            }
            if !dir.join("model.safetensors").is_file() || !dir.join("tokenizer.json").is_file() {
                return Err(ConfigError::invalid(
                    "tools.search.embedding_model",
                    at(path.span()),
                    format!(
                        "{} holds no model: model.safetensors and tokenizer.json are needed \
                         (scripts/embedding-model/build.sh makes one)",
                        dir.display()
                    ),
                ));
            }
            Some(dir)
        }
    };
    let untrusted_roots = absolute("tools.untrusted_roots", &raw.untrusted_roots)?;

    let mut policy = Vec::new();
    for (i, rule) in raw.policy.iter().enumerate() {
        let key = |name: &str| format!("tools.policy[{i}].{name}");
        for (name, value) in [("id", &rule.id), ("tool", &rule.tool)] {
            if value.get_ref().trim().is_empty() {
                return Err(ConfigError::invalid(
                    key(name),
                    at(value.span()),
                    "must not be empty",
                ));
            }
        }
        let decision = match rule.decision.get_ref().as_str() {
            "allow" => PolicyDecisionConfig::Allow,
            "confirm" => PolicyDecisionConfig::Confirm,
            "deny" => PolicyDecisionConfig::Deny,
            other => {
                return Err(ConfigError::invalid(
                    key("decision"),
                    at(rule.decision.span()),
                    format!("{other:?} is not one of allow, confirm, deny"),
                ));
            }
        };
        policy.push(PolicyRuleConfig {
            id: rule.id.get_ref().clone(),
            tool: rule.tool.get_ref().clone(),
            decision,
        });
    }

    Ok(ToolsConfig {
        roots,
        untrusted_roots,
        search_embedding_model,
        search_learn: raw.search.learn.unwrap_or(true),
        confirm_expiry: Duration::from_secs(in_range(
            "tools.confirm_expiry_secs",
            &raw.confirm_expiry_secs,
            1,
            30 * 86_400,
        )?),
        policy,
        plan_mode: raw.plan_mode,
        ledger_retention: retention_days(
            "tools.ledger_retention_days",
            &raw.ledger_retention_days,
            &at,
        )?,
        http_allow_hosts: raw.http.allow_hosts,
        http_trusted_hosts: raw.http.trusted_hosts,
        shell: ShellConfig {
            sandbox: match raw.shell.sandbox.as_ref() {
                None => ShellSandbox::Landlock,
                Some(mode) => match mode.get_ref().as_str() {
                    "landlock" => ShellSandbox::Landlock,
                    "none" => ShellSandbox::None,
                    other => {
                        return Err(ConfigError::invalid(
                            "tools.shell.sandbox",
                            at(mode.span()),
                            format!(
                                "{other:?} is not a sandbox; expected \"landlock\" or \"none\""
                            ),
                        ));
                    }
                },
            },
            network: raw.shell.network,
        },
        profile: match raw.profile.get_ref().as_str() {
            "minimal" => ToolProfile::Minimal,
            "assistant" => ToolProfile::Assistant,
            "coding" => ToolProfile::Coding,
            "full" => ToolProfile::Full,
            other => {
                return Err(ConfigError::invalid(
                    "tools.profile",
                    at(raw.profile.span()),
                    format!(
                        "{other:?} is not a profile; expected \"minimal\", \"assistant\", \"coding\" or \"full\""
                    ),
                ));
            }
        },
        allow: raw.allow,
        deny: raw.deny,
        defer_threshold_pct: in_range(
            "tools.defer_threshold_pct",
            &raw.defer_threshold_pct,
            0,
            100,
        )? as u8,
    })
}

/// `[senders]`.
fn resolve_senders(
    raw: RawSenders,
    at: LineOf<'_>,
) -> Result<steward_events::SenderPolicy, ConfigError> {
    Ok(steward_events::SenderPolicy {
        owner: raw.owner,
        trusted: raw.trusted,
        unknown: match raw.unknown.as_ref().map(|u| u.get_ref().as_str()) {
            None | Some("untrusted") => steward_events::Unknown::Untrusted,
            Some("reject") => steward_events::Unknown::Reject,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "senders.unknown",
                    raw.unknown.as_ref().and_then(|u| at(u.span())),
                    format!("{other:?}: expected \"untrusted\" or \"reject\""),
                ));
            }
        },
    })
}

fn resolve_rule(
    index: usize,
    rule: RawUrgencyRule,
    at: &dyn Fn(std::ops::Range<usize>) -> Option<usize>,
) -> Result<UrgencyRule, ConfigError> {
    let key = |name: &str| format!("urgency.rules[{index}].{name}");
    let enumerated = |name: &str, value: &Spanned<String>, allowed: &[&str]| {
        ConfigError::invalid(
            key(name),
            at(value.span()),
            format!("{:?} is not one of {}", value.get_ref(), allowed.join(", ")),
        )
    };
    let source = match &rule.source {
        Some(s) => Some(Source::parse(s.get_ref()).ok_or_else(|| {
            let names: Vec<&str> = Source::ALL.iter().map(|s| s.as_str()).collect();
            enumerated("source", s, &names)
        })?),
        None => None,
    };
    let trust = match &rule.trust {
        Some(t) => Some(
            Trust::parse(t.get_ref())
                .ok_or_else(|| enumerated("trust", t, &["owner", "trusted", "untrusted"]))?,
        ),
        None => None,
    };
    let urgency = Urgency::parse(rule.urgency.get_ref())
        .ok_or_else(|| enumerated("urgency", &rule.urgency, &["cancel", "queue", "parallel"]))?;
    let field = match (rule.field, rule.equals) {
        (Some(path), Some(equals)) if !path.get_ref().is_empty() => Some(FieldMatch {
            path: path.into_inner(),
            equals,
        }),
        (Some(path), _) => {
            return Err(ConfigError::invalid(
                key("field"),
                at(path.span()),
                "needs a non-empty path and an `equals` value",
            ));
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                key("equals"),
                None,
                "`equals` needs `field` (the payload path to compare)",
            ));
        }
        (None, None) => None,
    };
    Ok(UrgencyRule {
        source,
        channel: rule.channel,
        trust,
        field,
        urgency,
    })
}

//! The command line. Declarations here generate the help text; each command's work lives in
//! its own module. Exit codes follow sysexits: 78 bad config, 69 daemon unreachable,
//! 75 `send --wait` timed out or another instance holds the data dir, 1 any other failure
//! (including a step that failed while `send --wait` watched it),
//! 2 bad usage (clap).

mod actions;
mod chat;
mod check_shell;
mod cron;
mod doctor;
mod init;
mod listing;
mod output;
mod send;
mod service;
mod skills;
mod table;
mod tools_bench;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use steward_config::Config;

use crate::paths;
use steward_protocol::client::ClientError;

pub const EX_CONFIG: u8 = 78;
const EX_UNAVAILABLE: u8 = 69;
pub const EX_TEMPFAIL: u8 = 75;

#[derive(Debug, Parser)]
#[command(
    name = "steward",
    version,
    about = "A personal assistant that lives in a daemon"
)]
struct Cli {
    /// Config file [default: $XDG_CONFIG_HOME/steward/config.toml]
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Data directory [default: $XDG_DATA_HOME/steward]
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon in the foreground
    Run {
        /// Log format on stderr [default: daemon.log_format]
        #[arg(long, value_enum)]
        log_format: Option<LogFormatArg>,
    },
    /// Write a commented default config file
    Init {
        /// Overwrite an existing config file
        #[arg(long)]
        force: bool,
    },
    /// Send a message to the assistant; prints the event id
    Send(send::SendArgs),
    /// Talk to the assistant interactively: lines typed are sent, replies printed
    Chat,
    /// Show what the daemon is doing
    Status {
        #[arg(long)]
        json: bool,
    },
    /// List events and their states
    Events(EventsArgs),
    /// Show the main trajectory
    Trajectory(TrajectoryArgs),
    /// Check what a working daemon needs: config, data dir, daemon, ports, mail, model…
    Doctor {
        /// One JSON object: {"ok", "checks": [{"name", "status", "detail", "fix"?}]}
        #[arg(long)]
        json: bool,
    },
    /// Check the config file, or print its JSON Schema
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Install, remove or inspect the service (systemd unit or launchd agent)
    Service {
        #[command(subcommand)]
        command: ServiceCommand,
    },
    /// List requests for confirmation (all states, oldest first)
    Pending {
        #[arg(long)]
        json: bool,
        /// Answered, expired and failed ones too
        #[arg(long)]
        all: bool,
    },
    /// Approve a pending action: it runs once
    Confirm {
        /// The pending action's id
        id: String,
        /// Run it with these arguments instead (checked again first)
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Deny a pending action
    Deny {
        id: String,
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Inspect tools
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Scheduled jobs
    Cron {
        #[command(subcommand)]
        command: CronCommandArgs,
    },
    /// Messages for the owner (answers, notices, confirmation requests and outcomes) and
    /// where each was delivered
    Outbox {
        /// JSON Lines, one owner message each
        #[arg(long)]
        json: bool,
        /// Only the newest N
        #[arg(long)]
        limit: Option<usize>,
        /// Then show each new message and each new delivery as it happens (a message
        /// again, with its new state) until interrupted
        #[arg(long, short)]
        follow: bool,
    },
    /// File watches
    Watch {
        #[command(subcommand)]
        command: WatchCommandArgs,
    },
    /// The HTTP API's bearer token
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// The owner's web page: log in with a one-time link, or log every browser out
    Web {
        #[command(subcommand)]
        command: WebCommandArgs,
    },
    /// The Telegram bot's owners: pair one with a code, list them, remove one
    Telegram {
        #[command(subcommand)]
        command: TelegramCommandArgs,
    },
    /// Model calls, tokens and cost, grouped by day, job, channel or model
    Usage {
        /// How calls are grouped
        #[arg(long, value_enum, default_value = "day")]
        by: UsageByArg,
        /// The first day counted (YYYY-MM-DD, in the owner's zone); default: everything kept
        #[arg(long)]
        since: Option<chrono::NaiveDate>,
        /// JSON Lines: key, model_calls, tokens_in, tokens_cached, tokens_out, cost
        #[arg(long)]
        json: bool,
    },
    /// The daily caps on model work
    Budget {
        #[command(subcommand)]
        command: BudgetCommand,
    },
    /// Skills (procedures in SKILL.md folders) the model can load
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill (name, description, folder, trusted) and every folder that is not one
    List {
        #[arg(long)]
        json: bool,
    },
    /// A skill's text and files, as `skill_load` gives them
    Show { name: String },
}

/// `steward usage --by`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum UsageByArg {
    Day,
    Job,
    Channel,
    Model,
}

impl From<UsageByArg> for steward_protocol::UsageBy {
    fn from(by: UsageByArg) -> Self {
        match by {
            UsageByArg::Day => Self::Day,
            UsageByArg::Job => Self::Job,
            UsageByArg::Channel => Self::Channel,
            UsageByArg::Model => Self::Model,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BudgetCommand {
    /// Today's tokens and cost against the caps, and whether model work waits
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebCommandArgs {
    /// Print a link that logs this browser in (works once, for 5 minutes)
    Login {
        #[arg(long)]
        json: bool,
    },
    /// End web sessions
    Logout {
        /// Every session (the only kind there is to end from here)
        #[arg(long, required = true)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TelegramCommandArgs {
    /// Print a one-time code (valid 10 minutes); send it to the bot as `/start CODE` from
    /// the Telegram account that is to be an owner
    Pair {
        #[arg(long)]
        json: bool,
    },
    /// The owners: those in telegram.owners and those paired
    Owners {
        #[arg(long)]
        json: bool,
    },
    /// Remove a paired owner
    Unpair {
        /// Their Telegram user id (as `steward telegram owners` shows it)
        user_id: i64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Print it (from the data dir; no daemon needed)
    Show,
    /// Replace it (through the daemon; the old one stops working at once) and print it
    Rotate,
}

#[derive(Debug, Subcommand)]
enum WatchCommandArgs {
    /// The watches (from the config and made at run time) and their state
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CronCommandArgs {
    /// The jobs, with their next run and last outcome
    List {
        #[arg(long)]
        json: bool,
    },
    /// Schedule a job (kept across restarts; not touched by the config file)
    Add {
        name: String,
        /// A cron expression (5 or 6 fields), `every 10m`, or `at TIME` / `at +20m`
        #[arg(long, value_name = "EXPR")]
        schedule: String,
        /// IANA time zone (default: the system's)
        #[arg(long, value_name = "TZ")]
        tz: Option<String>,
        /// What the event says to the brain
        #[arg(
            long,
            value_name = "TEXT",
            conflicts_with = "action",
            required_unless_present = "action"
        )]
        text: Option<String>,
        /// A tool call run without the model: {"tool": NAME, "args": {...}}
        #[arg(long, value_name = "JSON")]
        action: Option<String>,
        /// parallel (default) or queue
        #[arg(long, value_name = "U")]
        urgency: Option<String>,
        /// What happens to occurrences missed while stopped: skip, once (default), all
        #[arg(long, value_name = "P")]
        missed: Option<String>,
    },
    /// Delete a job made at run time
    Remove { name: String },
    /// Stop a job firing until resumed
    Pause { name: String },
    /// Let a paused job fire again (from now on)
    Resume { name: String },
    /// Run one occurrence now, marked manual; prints its event id
    Trigger { name: String },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormatArg {
    Pretty,
    Json,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Print JSON Lines
    #[arg(long)]
    json: bool,
    /// Only the most recent N (printed oldest first)
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only events in this state
    #[arg(long, value_name = "S", value_parser = steward_events::EventState::NAMES)]
    state: Option<String>,
    /// Keep printing new events and state changes
    #[arg(long)]
    follow: bool,
}

#[derive(Debug, Args)]
pub struct TrajectoryArgs {
    /// Print JSON Lines
    #[arg(long)]
    json: bool,
    /// Only the most recent N items (printed oldest first)
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Keep printing new items
    #[arg(long)]
    follow: bool,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// List the registered tools with every contract field (tier, groups, source…)
    List {
        #[arg(long)]
        json: bool,
    },
    /// Rank the enabled tools for a query, exactly as the model's `tool_search` does
    /// (`select:a,b`, `+name_word more words`, or keywords)
    Search {
        query: String,
        /// How many tools to show
        #[arg(long, value_name = "N", default_value_t = 5)]
        max_results: usize,
        #[arg(long)]
        json: bool,
    },
    /// Measure tool search on a labelled corpus (the format of shared/data/toolsearch):
    /// Recall@1, Recall@k, Complete@k, MRR, query latency, index build time. Runs locally,
    /// without a daemon.
    Bench {
        /// tools.jsonl: one tool per line (id, server, name, description, parameters)
        #[arg(long, value_name = "FILE")]
        tools: PathBuf,
        /// queries.jsonl: one labelled query per line (query, relevant, relevant_groups?)
        #[arg(long, value_name = "FILE")]
        queries: PathBuf,
        #[arg(long, value_name = "N", default_value_t = 5)]
        k: usize,
        /// Labelled queries (the queries format) fed first as past usage: each one a request
        /// that led to a call of the tools it needs. Keep them apart from --queries: a query
        /// found verbatim in both is counted and reported
        #[arg(long, value_name = "FILE")]
        usage: Option<PathBuf>,
        /// A static embedding model directory (tools.search.embedding_model) for the semantic
        /// channel
        #[arg(long, value_name = "DIR")]
        embedding_model: Option<PathBuf>,
        /// One JSON object: recall_at_1, recall_at_k, complete_at_k, mrr, p50_us, p99_us,
        /// build_ms, queries, tools
        #[arg(long)]
        json: bool,
    },
    /// Classify shell commands read one per line from stdin (a literal `\n` is a newline),
    /// as the shell tool would: tier and reasons. Needs no daemon and never runs anything.
    CheckShell {
        /// JSON Lines: {"command", "tier", "reasons"}
        #[arg(long)]
        json: bool,
        /// The working directory the commands would run in [default: the current one]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// The home directory (`~`, `$HOME`) [default: $HOME]
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// Run one tool as the owner through the full pipeline, in the main trajectory
    Call {
        name: String,
        /// The arguments, a JSON object
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Print {"outcome", "result"?, "reason"?, "pending_id"?}
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a config file as the daemon would at start (exit 78 naming the key)
    Check {
        /// The file [default: --config, else the default path]
        path: Option<PathBuf>,
    },
    /// Print the JSON Schema of the config file
    Schema,
}

#[derive(Debug, Subcommand)]
enum ServiceCommand {
    /// Write the unit (or agent) for this binary, then enable and start it
    Install(ServiceArgs),
    /// Stop, disable and remove it
    Uninstall(ServiceArgs),
    /// Whether it is installed, matches this binary, and runs
    Status(ServiceScopeArgs),
}

#[derive(Debug, Args)]
struct ServiceScopeArgs {
    /// A user service (`systemctl --user`; the default)
    #[arg(long, conflicts_with = "system")]
    user: bool,
    /// A system-wide service running as the `steward` user
    #[arg(long)]
    system: bool,
}

#[derive(Debug, Args)]
struct ServiceArgs {
    #[command(flatten)]
    scope: ServiceScopeArgs,
    /// Print the file and the commands instead of doing anything
    #[arg(long)]
    dry_run: bool,
}

impl ServiceScopeArgs {
    fn scope(&self) -> service::Scope {
        if self.system {
            service::Scope::System
        } else {
            service::Scope::User
        }
    }
}

/// The paths a service for `scope` runs with: absolute, named or defaulted per scope.
fn service_paths(
    cli_config: Option<&PathBuf>,
    cli_data_dir: Option<&PathBuf>,
    ctx: &Context,
    scope: service::Scope,
) -> Result<service::Paths, String> {
    let absolute = |p: &PathBuf| -> Result<PathBuf, String> {
        std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let (config, data_dir) = match scope {
        service::Scope::User => (
            ctx.config_path
                .clone()
                .ok_or("no config path: set --config, XDG_CONFIG_HOME or HOME")?,
            ctx.data_dir.clone(),
        ),
        service::Scope::System => (
            cli_config
                .cloned()
                .unwrap_or_else(|| "/etc/steward/config.toml".into()),
            cli_data_dir
                .cloned()
                .unwrap_or_else(|| "/var/lib/steward".into()),
        ),
    };
    let binary = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find this binary: {e}"))?;
    Ok(service::Paths {
        binary,
        config: absolute(&config)?,
        data_dir: absolute(&data_dir)?,
        extra_writable: ctx
            .config
            .tools
            .roots
            .iter()
            .map(absolute)
            .collect::<Result<_, _>>()?,
        home: std::env::var_os("HOME").map(PathBuf::from),
        config_home: paths::default_config_path()
            .and_then(|p| p.parent().and_then(|d| d.parent()).map(PathBuf::from)),
    })
}

impl Command {
    /// Commands that only talk to a running daemon (and `doctor`, which reports a broken
    /// config rather than stopping at it).
    fn is_client(&self) -> bool {
        !matches!(
            self,
            Command::Run { .. }
                | Command::Init { .. }
                | Command::Service { .. }
                | Command::Config { .. }
                | Command::Skills { .. }
        )
    }
}

/// What a command needs to find the config and the daemon.
#[derive(Debug)]
pub struct Context {
    pub config: Config,
    pub config_path: Option<PathBuf>,
    pub data_dir: PathBuf,
}

impl Context {
    pub fn socket_path(&self) -> PathBuf {
        paths::socket_path(self.config.daemon.socket_path.as_ref(), &self.data_dir)
    }
}

use steward_tools::sandbox::launcher;

pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        // The sandbox launcher hosted here (see `steward_tools::sandbox::launcher`), read
        // before any other parsing so that a command starts fast.
        Some(launcher::EXEC_COMMAND) => return launcher::exec(&args[2..]),
        Some(launcher::PROBE_COMMAND) => return launcher::probe(),
        _ => {}
    }
    let cli = Cli::parse();
    let config_path = cli.config.clone().or_else(paths::default_config_path);
    if let Command::Init { force } = cli.command {
        return init::init(config_path, force);
    }
    if let Command::Config { command } = &cli.command {
        return match command {
            ConfigCommand::Schema => {
                output::out!("{:#}", steward_config::json_schema());
                ExitCode::SUCCESS
            }
            ConfigCommand::Check { path } => check_config(path.clone().or(config_path)),
        };
    }
    // Needs neither the config nor a daemon.
    if let Command::Tools {
        command:
            ToolsCommand::Bench {
                tools,
                queries,
                k,
                usage,
                embedding_model,
                json,
            },
    } = &cli.command
    {
        let inputs = tools_bench::Inputs {
            tools,
            queries,
            usage: usage.as_deref(),
            embedding_model: embedding_model.as_deref(),
        };
        return tools_bench::run(&inputs, *k, *json);
    }
    if let Command::Tools {
        command:
            ToolsCommand::CheckShell {
                json,
                workspace,
                home,
            },
    } = &cli.command
    {
        return check_shell::run(*json, workspace.clone(), home.clone());
    }
    if let Command::Run { log_format } = cli.command {
        return init::run(&cli, config_path, log_format);
    }
    let ctx = match context(&cli, config_path) {
        Ok(ctx) => ctx,
        Err(code) => return code,
    };
    dispatch(cli, ctx)
}

/// The configuration (or the embedded defaults) and the data dir a command runs with; the
/// exit code when there are none.
fn context(cli: &Cli, config_path: Option<PathBuf>) -> Result<Context, ExitCode> {
    named_config_exists(cli)?;
    let config = load_config(cli, config_path.as_deref())?;
    let data_dir = data_dir(cli)?;
    Ok(Context {
        config,
        config_path,
        data_dir,
    })
}

/// The default config path may be absent (embedded defaults); a path the user named must
/// exist.
fn named_config_exists(cli: &Cli) -> Result<(), ExitCode> {
    match &cli.config {
        Some(named) if !named.exists() => {
            eprintln!(
                "steward: config file {} does not exist (run `steward init --config {0}` to create it)",
                named.display()
            );
            Err(ExitCode::from(EX_CONFIG))
        }
        _ => Ok(()),
    }
}

/// The config file parsed and checked, or the embedded defaults when there is none.
fn load_config(cli: &Cli, config_path: Option<&std::path::Path>) -> Result<Config, ExitCode> {
    match config_path.map(Config::load).transpose() {
        Ok(loaded) => Ok(loaded.flatten().unwrap_or_default()),
        // A client still reaches a daemon running the previous file (after an edit and a
        // SIGHUP, `steward status` is how one sees the reload was refused).
        Err(e) if cli.command.is_client() => {
            eprintln!("steward: warning: invalid configuration ({e}); using the default socket");
            Ok(Config::default())
        }
        Err(e) => {
            eprintln!("steward: invalid configuration: {e}");
            Err(ExitCode::from(EX_CONFIG))
        }
    }
}

/// `--data-dir`, else the XDG data dir.
fn data_dir(cli: &Cli) -> Result<PathBuf, ExitCode> {
    cli.data_dir
        .clone()
        .or_else(paths::default_data_dir)
        .ok_or_else(|| {
            eprintln!("steward: no data dir: set --data-dir, XDG_DATA_HOME or HOME");
            ExitCode::FAILURE
        })
}

/// Runs a command that needs the context.
fn dispatch(cli: Cli, ctx: Context) -> ExitCode {
    match cli.command {
        Command::Doctor { json } => {
            let paths = service_paths(
                cli.config.as_ref(),
                cli.data_dir.as_ref(),
                &ctx,
                service::Scope::User,
            )
            .ok();
            client_command(async { Ok(doctor::doctor(&ctx, paths, json).await) })
        }
        Command::Service { command } => {
            service_command(cli.config.as_ref(), cli.data_dir.as_ref(), &ctx, command)
        }
        Command::Run { .. } | Command::Init { .. } | Command::Config { .. } => {
            unreachable!("handled above")
        }
        Command::Send(args) => client_command(send::send(&ctx, args)),
        Command::Chat => client_command(chat::chat(&ctx)),
        Command::Status { json } => client_command(listing::status(&ctx, json)),
        Command::Events(args) => client_command(listing::events(&ctx, args)),
        Command::Trajectory(args) => client_command(listing::trajectory(&ctx, args)),
        Command::Tools {
            command: ToolsCommand::List { json },
        } => client_command(listing::tools(&ctx, json)),
        Command::Tools {
            command: ToolsCommand::Call { name, args, json },
        } => client_command(actions::call_tool(&ctx, name, args, json)),
        Command::Tools {
            command:
                ToolsCommand::Search {
                    query,
                    max_results,
                    json,
                },
        } => client_command(listing::search_tools(&ctx, query, max_results, json)),
        Command::Tools {
            command: ToolsCommand::Bench { .. } | ToolsCommand::CheckShell { .. },
        } => unreachable!("handled above"),
        Command::Cron { command } => client_command(cron::run(&ctx, command)),
        Command::Telegram { command } => client_command(listing::telegram(&ctx, command)),
        Command::Web {
            command: WebCommandArgs::Login { json },
        } => client_command(listing::web_login(&ctx, json)),
        Command::Web {
            command: WebCommandArgs::Logout { .. },
        } => client_command(listing::web_logout_all(&ctx)),
        Command::Token {
            command: TokenCommand::Show,
        } => show_token(&ctx),
        Command::Token {
            command: TokenCommand::Rotate,
        } => client_command(listing::rotate_token(&ctx)),
        Command::Watch {
            command: WatchCommandArgs::List { json },
        } => client_command(listing::watches(&ctx, json)),
        Command::Pending { json, all } => client_command(actions::pending(&ctx, json, all)),
        Command::Outbox {
            json,
            limit,
            follow,
        } => client_command(listing::outbox(&ctx, json, limit, follow)),
        Command::Usage { by, since, json } => {
            client_command(listing::usage(&ctx, by.into(), since, json))
        }
        Command::Budget {
            command: BudgetCommand::Status { json },
        } => client_command(listing::budget(&ctx, json)),
        Command::Skills { command } => skills::run(&ctx, command),
        Command::Confirm { id, args, json } => {
            client_command(actions::confirm(&ctx, id, args, json))
        }
        Command::Deny { id, reason, json } => client_command(actions::deny(&ctx, id, reason, json)),
    }
}

/// `steward service install|uninstall|status`.
fn service_command(
    config: Option<&PathBuf>,
    data_dir: Option<&PathBuf>,
    ctx: &Context,
    command: ServiceCommand,
) -> ExitCode {
    let scope = match &command {
        ServiceCommand::Install(args) | ServiceCommand::Uninstall(args) => args.scope.scope(),
        ServiceCommand::Status(args) => args.scope(),
    };
    let paths = match service_paths(config, data_dir, ctx, scope) {
        Ok(paths) => paths,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    match command {
        ServiceCommand::Install(args) => service::install(scope, &paths, args.dry_run),
        ServiceCommand::Uninstall(args) => service::uninstall(scope, &paths, args.dry_run),
        ServiceCommand::Status(_) => service::status(scope, &paths),
    }
}

/// `steward token show`: read from the data dir, so it works with the daemon stopped.
fn show_token(ctx: &Context) -> ExitCode {
    match std::fs::read_to_string(ctx.data_dir.join("api.token")) {
        Ok(token) => {
            output::out!("{}", token.trim());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("steward: no API token yet (it is made when the daemon starts): {e}");
            ExitCode::FAILURE
        }
    }
}

/// `steward config check`: the file's validation, then the daemon's start-up checks.
fn check_config(path: Option<PathBuf>) -> ExitCode {
    let Some(path) = path else {
        eprintln!("steward: no config path: name one, or set XDG_CONFIG_HOME or HOME");
        return ExitCode::from(EX_CONFIG);
    };
    let config = match Config::load(&path) {
        Ok(Some(config)) => config,
        Ok(None) => {
            eprintln!("steward: {} does not exist", path.display());
            return ExitCode::from(EX_CONFIG);
        }
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    match crate::core::check(&config) {
        Ok(()) => {
            output::out!("{}: ok", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("steward: {}: {e:#}", path.display());
            if e.downcast_ref::<crate::core::ConfigProblem>().is_some() {
                ExitCode::from(EX_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Runs a client command on a small runtime and maps its failure to an exit code.
fn client_command(command: impl Future<Output = Result<ExitCode, ClientError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("steward: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e @ ClientError::Connect { .. }) => {
            eprintln!("steward: {e}");
            ExitCode::from(EX_UNAVAILABLE)
        }
        Err(e) => {
            eprintln!("steward: {e}");
            ExitCode::FAILURE
        }
    }
}

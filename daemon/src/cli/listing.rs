//! `steward status`, `events`, `trajectory`, `outbox` and `tools list`: JSON Lines with
//! `--json`, aligned text under a header otherwise (see [`super::table`]).

use super::output::out;
use super::table::{self, Table};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;
use steward_events::{ItemKind, TrajectoryItem};

use super::{Context, EventsArgs, TrajectoryArgs};
use steward_protocol::client::{Client, ClientError};
use steward_protocol::{EventRow, Request, Response, StatusReport, StepStatus};

/// Sends `request` and hands every response to `print` until the listing ends.
pub(super) async fn stream(
    ctx: &Context,
    request: Request,
    mut print: impl FnMut(Response),
) -> Result<ExitCode, ClientError> {
    let mut client = Client::connect(&ctx.socket_path()).await?;
    client.request(&request).await?;
    while let Some(response) = client.next().await? {
        match response {
            Response::End => break,
            Response::Error { message } => {
                eprintln!("steward: {message}");
                return Ok(ExitCode::FAILURE);
            }
            other => print(other),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn json_line<T: Serialize>(value: &T) {
    out!("{}", serde_json::to_string(value).unwrap_or_default());
}

pub async fn status(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::Status, |response| {
        if let Response::Status { status } = response {
            if json {
                json_line(&status);
            } else {
                print_status(&status);
            }
        }
    })
    .await
}

fn print_status(s: &StatusReport) {
    out!("version        {}", s.version);
    out!("pid            {}", s.pid);
    out!("uptime         {}s", s.uptime_secs);
    out!("data dir       {}", s.data_dir.display());
    match &s.brain_last_error {
        Some(error) => out!("brain          {} (degraded: {error})", s.brain),
        None => out!("brain          {}", s.brain),
    }
    out!(
        "tokens         {} in ({} cached), {} out since start; step {}: {} in ({} cached), {} out",
        s.tokens_total.input,
        s.tokens_total.cached_input,
        s.tokens_total.output,
        s.tokens_last_step_number,
        s.tokens_last_step.input,
        s.tokens_last_step.cached_input,
        s.tokens_last_step.output
    );
    out!(
        "usage today    {} model calls, {} in ({} cached), {} out, cost {:.4}",
        s.usage_today.model_calls,
        s.usage_today.tokens_in,
        s.usage_today.tokens_cached,
        s.usage_today.tokens_out,
        s.usage_today.cost
    );
    for task in &s.todo {
        let mark = match task.status.as_str() {
            "done" => "[x]",
            "in_progress" => "[~]",
            _ => "[ ]",
        };
        out!("task           {mark} {}", task.text);
    }
    if !s.shell_sandbox.is_empty() {
        out!("shell sandbox  {}", s.shell_sandbox);
    }
    for c in &s.channels {
        out!("channel        {} ({})", c.name, c.state);
    }
    if let Some(error) = &s.config_error {
        out!("config         INVALID, still running the previous one: {error}");
    }
    if !s.restart_needed.is_empty() {
        out!(
            "config         changed, needs a restart: {}",
            s.restart_needed.join(", ")
        );
    }
    match &s.step {
        StepStatus::Idle => out!("step           idle"),
        StepStatus::Running { step, started_at } => {
            out!(
                "step           running #{step} since {}",
                table::local(*started_at)
            )
        }
    }
    out!("inbox pending  {}", s.inbox_pending);
    out!("lanes running  {}", s.lanes_running);
    out!("events total   {}", s.events_total);
}

pub async fn events(ctx: &Context, args: EventsArgs) -> Result<ExitCode, ClientError> {
    let request = Request::Events {
        limit: args.limit,
        state: args.state,
        follow: args.follow,
    };
    let mut table = Table::new(
        &[
            ("ID", 26),
            ("RECEIVED", 19),
            ("SOURCE", 7),
            ("CHANNEL", 14),
            ("URGENCY", 8),
            ("STATE", 9),
            ("TEXT", 0),
        ],
        args.follow,
    )
    .one_line();
    let code = stream(ctx, request, |response| {
        if let Response::Event { event } = response {
            if args.json {
                json_line(&event);
            } else {
                table.row(event_cells(&event));
            }
        }
    })
    .await?;
    if !table.finish() && !args.json && code == ExitCode::SUCCESS {
        eprintln!("steward: no events");
    }
    Ok(code)
}

fn event_cells(e: &EventRow) -> Vec<String> {
    let mut text = table::short(&e.text, 60);
    if let Some(detail) = &e.detail {
        text.push_str(&format!(" ({})", table::short(detail, 200)));
    }
    vec![
        e.id.to_string(),
        table::local(e.received_at),
        e.source.as_str().to_owned(),
        e.channel.clone(),
        e.urgency.as_str().to_owned(),
        e.state.clone(),
        text,
    ]
}

pub async fn trajectory(ctx: &Context, args: TrajectoryArgs) -> Result<ExitCode, ClientError> {
    let request = Request::Trajectory {
        limit: args.limit,
        follow: args.follow,
    };
    let mut table = Table::new(
        &[("SEQ", 5), ("AT", 19), ("KIND", 14), ("WHAT", 0)],
        args.follow,
    );
    let code = stream(ctx, request, |response| {
        if let Response::Item { item } = response {
            if args.json {
                json_line(&item);
            } else {
                table.row(vec![
                    item.seq.to_string(),
                    table::local(item.at),
                    item.kind.name().to_owned(),
                    item_detail(&item),
                ]);
            }
        }
    })
    .await?;
    table.finish();
    Ok(code)
}

/// What a trajectory item says, in one cell (folded to the terminal when printed).
fn item_detail(item: &TrajectoryItem) -> String {
    match &item.kind {
        ItemKind::Event {
            event_id,
            channel,
            text,
            ..
        } => format!("{event_id} {channel}: {text}"),
        ItemKind::Assistant { text, .. } => text.clone(),
        ItemKind::ToolCall {
            call_id,
            tool,
            args,
        } => format!("{call_id} {tool} {args}"),
        ItemKind::ToolResult {
            call_id,
            tool,
            status,
            result,
            ..
        } => {
            format!("{call_id} {tool} {status:?}: {result}")
        }
        ItemKind::StepStarted { events } => {
            format!("step {} with {} event(s)", item.step, events.len())
        }
        ItemKind::StepCompleted => format!("step {}", item.step),
        ItemKind::StepCancelled { reason, .. } => format!("step {}: {reason}", item.step),
        ItemKind::Summary {
            text,
            covers_through,
        } => format!("items up to {covers_through}: {text}"),
    }
}

pub async fn tools(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::Tools, |response| {
        if let Response::Tool { tool } = response {
            if json {
                json_line(&tool);
            } else {
                print_tool(&tool);
            }
        }
    })
    .await
}

pub async fn search_tools(
    ctx: &Context,
    query: String,
    max_results: usize,
    json: bool,
) -> Result<ExitCode, ClientError> {
    let request = Request::SearchTools {
        query,
        max_results: Some(max_results),
    };
    let mut found = 0;
    let code = stream(ctx, request, |response| {
        if let Response::Tool { tool } = response {
            found += 1;
            if json {
                json_line(&tool);
            } else {
                out!(
                    "{:<24} {}",
                    tool["name"].as_str().unwrap_or_default(),
                    tool["description"].as_str().unwrap_or_default()
                );
            }
        }
    })
    .await?;
    if found == 0 && !json && code == ExitCode::SUCCESS {
        eprintln!("steward: no tool matches; try broader or different words");
    }
    Ok(code)
}

fn print_tool(tool: &Value) {
    let field = |name: &str| match &tool[name] {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    let groups = tool["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    out!(
        "{:<20} {:<13} {:<12} idempotent={:<5} concurrency={:<9} tier={:<8} lane={:<5} disabled={:<5} {:<16} {}",
        field("name"),
        field("source"),
        field("side_effect"),
        field("idempotent"),
        field("concurrency"),
        field("tier"),
        field("allowed_in_lane"),
        field("disabled"),
        groups,
        field("description")
    );
}

pub async fn watches(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::Watches, |response| {
        if let Response::Watch { watch } = response {
            if json {
                json_line(&watch);
            } else {
                out!(
                    "{:<20} {:<8} {:<40} {}",
                    watch.name,
                    watch.origin,
                    watch.path.display(),
                    watch.state
                );
            }
        }
    })
    .await
}

/// `steward outbox`: each owner message with when, what, where it was delivered.
pub async fn outbox(
    ctx: &Context,
    json: bool,
    limit: Option<usize>,
    follow: bool,
) -> Result<ExitCode, ClientError> {
    let mut table = Table::new(
        &[
            ("ID", 5),
            ("QUEUED", 19),
            ("KIND", 12),
            ("DELIVERED", 14),
            ("TEXT", 0),
        ],
        follow,
    )
    .one_line();
    let code = stream(ctx, Request::Outbox { limit, follow }, |response| {
        if let Response::Message { message } = response {
            if json {
                json_line(&message);
            } else {
                let delivered: Vec<&str> = message.delivered.keys().map(String::as_str).collect();
                table.row(vec![
                    format!("#{}", message.id),
                    table::local(message.at),
                    message.kind.as_str().to_owned(),
                    if delivered.is_empty() {
                        "not yet".to_owned()
                    } else {
                        delivered.join(",")
                    },
                    message.text.clone(),
                ]);
            }
        }
    })
    .await?;
    if !table.finish() && !json && code == ExitCode::SUCCESS {
        eprintln!("steward: the outbox is empty");
    }
    Ok(code)
}

pub async fn rotate_token(ctx: &Context) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::RotateToken, |response| {
        if let Response::Token { token } = response {
            out!("{token}");
        }
    })
    .await
}

/// `steward telegram pair|owners|unpair`.
pub async fn telegram(
    ctx: &Context,
    command: super::TelegramCommandArgs,
) -> Result<ExitCode, ClientError> {
    use super::TelegramCommandArgs as Args;
    use steward_protocol::TelegramCommand;
    let pairing = matches!(command, Args::Pair { .. });
    let (request, json) = match command {
        Args::Pair { json } => (TelegramCommand::Pair, json),
        Args::Owners { json } => (TelegramCommand::Owners, json),
        Args::Unpair { user_id, json } => (TelegramCommand::Unpair { user_id }, json),
    };
    let mut any = false;
    let code = stream(
        ctx,
        Request::Telegram { command: request },
        |response| match response {
            Response::PairingCode { code, expires_at } if json => {
                json_line(&serde_json::json!({"code": code, "expires_at": expires_at}));
            }
            Response::PairingCode { code, expires_at } => {
                out!(
                    "Send this to the bot from the Telegram account to pair, before {}:",
                    table::local(expires_at)
                );
                out!("/start {code}");
            }
            Response::TelegramOwner { owner } if json => json_line(&owner),
            Response::TelegramOwner { owner } => {
                any = true;
                out!(
                    "{:<14} {:<7} {}",
                    owner.user_id,
                    owner.source,
                    owner
                        .username
                        .as_deref()
                        .map(|u| format!("@{u}"))
                        .unwrap_or_default()
                );
            }
            _ => {}
        },
    )
    .await?;
    if !any && !json && code == ExitCode::SUCCESS && !pairing {
        eprintln!("steward: the Telegram bot has no owner yet (`steward telegram pair`)");
    }
    Ok(code)
}

/// The page's address as a browser should name it: the bound address, with `localhost` for
/// an unspecified one (`0.0.0.0`).
fn web_base(ctx: &Context) -> String {
    let address = std::fs::read_to_string(ctx.data_dir.join("http.addr"))
        .ok()
        .and_then(|text| text.trim().parse::<std::net::SocketAddr>().ok());
    match address {
        Some(address) if address.ip().is_unspecified() => {
            format!("http://localhost:{}", address.port())
        }
        Some(address) => format!("http://{address}"),
        None => "http://127.0.0.1:8787".to_owned(),
    }
}

/// `steward web login`: the one-time link.
pub async fn web_login(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    let base = web_base(ctx);
    stream(ctx, Request::WebLogin, |response| {
        if let Response::LoginLink { token, expires_at } = response {
            let url = format!("{base}/login?token={token}");
            if json {
                json_line(&serde_json::json!({"url": url, "expires_at": expires_at}));
            } else {
                out!(
                    "Open this link to log in (once, before {}):",
                    table::local(expires_at)
                );
                out!("{url}");
            }
        }
    })
    .await
}

/// `steward web logout --all`.
pub async fn web_logout_all(ctx: &Context) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::WebLogoutAll, |response| {
        if let Response::LoggedOut { sessions } = response {
            out!("{sessions} web sessions ended");
        }
    })
    .await
}

/// `steward usage`.
pub async fn usage(
    ctx: &Context,
    by: steward_protocol::UsageBy,
    since: Option<chrono::NaiveDate>,
    json: bool,
) -> Result<ExitCode, ClientError> {
    if !json {
        out!(
            "{:<32} {:>7} {:>12} {:>12} {:>12} {:>10}",
            "KEY",
            "CALLS",
            "TOKENS IN",
            "CACHED",
            "TOKENS OUT",
            "COST"
        );
    }
    stream(ctx, Request::Usage { by, since }, |response| {
        if let Response::Usage { row } = response {
            if json {
                json_line(&row);
            } else {
                out!(
                    "{:<32} {:>7} {:>12} {:>12} {:>12} {:>10.4}",
                    row.key,
                    row.model_calls,
                    row.tokens_in,
                    row.tokens_cached,
                    row.tokens_out,
                    row.cost
                );
            }
        }
    })
    .await
}

/// `steward budget status`.
pub async fn budget(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    stream(ctx, Request::Budget, |response| {
        if let Response::Budget { budget } = response {
            if json {
                json_line(&budget);
                return;
            }
            let cap = |cap: Option<String>| cap.unwrap_or_else(|| "no cap".to_owned());
            out!("day            {}", budget.day);
            out!(
                "tokens today   {} (budget.daily_tokens: {})",
                budget.tokens_today,
                cap(budget.daily_tokens.map(|c| c.to_string()))
            );
            out!(
                "cost today     {:.4} (budget.daily_cost: {})",
                budget.cost_today,
                cap(budget.daily_cost.map(|c| c.to_string()))
            );
            match &budget.waiting {
                Some(reason) => out!("model work     WAITS: {reason}"),
                None => out!("model work     runs"),
            }
        }
    })
    .await
}

//! The page's HTML, rendered on the server (maud: checked and escaped at compile time).
//!
//! Decided here:
//! - Every action is a plain `<form method="post">` carrying the session's CSRF token in the
//!   hidden field `csrf`: it works without JavaScript; htmx (`hx-boost`) only spares the
//!   reload. Pending actions show their whole id, the short form (a prefix) in bold.
//! - The part of a page that changes while it is open is `<div id="live">`; `app.js`
//!   fetches the page again when the stream says something happened and swaps just that.
//! - Times are shown in the owner's zone (`owner.timezone`), a job's next run in its own.
//! - Long lists are paged: the chat shows [`CHAT_PAGE`] items with a link to earlier ones,
//!   the activity [`ACTIVITY_PAGE`] events: a page never reads the whole trajectory.

use crate::zone::Zone;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;
use steward_events::{ItemKind, TrajectoryItem};
use steward_protocol::{
    BudgetReport, ChannelStatus, EventRow, JobRow, OwnerMessage, PendingRow, StatusReport,
    StepStatus, UsageRow, WatchRow,
};

pub const CHAT_PAGE: usize = 100;
pub const ACTIVITY_PAGE: usize = 200;

/// The pages in the navigation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    Now,
    Chat,
    Approvals,
    Activity,
    Schedule,
    Usage,
}

const PAGES: [(Nav, &str, &str); 6] = [
    (Nav::Now, "/", "Now"),
    (Nav::Chat, "/chat", "Chat"),
    (Nav::Approvals, "/approvals", "Approvals"),
    (Nav::Activity, "/activity", "Activity"),
    (Nav::Schedule, "/schedule", "Schedule"),
    (Nav::Usage, "/usage", "Usage"),
];

/// What every page knows besides its own data.
#[derive(Debug)]
pub struct Frame<'a> {
    pub csrf: &'a str,
    pub zone: Zone,
}

impl Frame<'_> {
    fn time(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.zone)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string()
    }

    fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.csrf); }
    }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            // No indicator styles injected (the CSP has no 'unsafe-inline'), no eval.
            meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}"#;
            title { (title) " · Steward" }
            link rel="stylesheet" href="/static/style.css";
            script src="/static/htmx.min.js" defer {}
            script src="/static/app.js" defer {}
        }
    }
}

/// A whole page: navigation, the log-out form, then `body` (its changing part inside).
pub fn layout(frame: &Frame<'_>, current: Nav, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body hx-boost="true" {
                a.skip href="#main" { "Skip to the content" }
                header {
                    strong { "Steward" }
                    nav aria-label="Pages" {
                        ul {
                            @for (nav, href, name) in PAGES {
                                li {
                                    @if nav == current {
                                        a href=(href) aria-current="page" { (name) }
                                    } @else {
                                        a href=(href) { (name) }
                                    }
                                }
                            }
                        }
                    }
                    form.inline method="post" action="/logout" {
                        (frame.csrf_field())
                        button.secondary type="submit" { "Log out" }
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page outside a session: not logged in, or the login link's answer.
pub fn bare(title: &str, body: Markup, refresh_to: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(to) = refresh_to {
                    meta http-equiv="refresh" content=(format!("0;url={to}"));
                }
                title { (title) " · Steward" }
                link rel="stylesheet" href="/static/style.css";
            }
            body {
                main #main { h1 { (title) } (body) }
            }
        }
    }
}

fn state_class(state: &str) -> String {
    let word = state.split([' ', ':', '(']).next().unwrap_or_default();
    format!("state-{word}")
}

fn short<'a>(id: &'a str, all: &[&str]) -> &'a str {
    crate::owner::notices::short_id(id, all)
}

fn channels(list: &[ChannelStatus]) -> Markup {
    html! {
        table {
            thead { tr { th { "Channel" } th { "State" } } }
            tbody {
                @for channel in list {
                    tr {
                        td { (channel.name) }
                        td class=(state_class(&channel.health)) { (channel.state) }
                    }
                }
            }
        }
    }
}

/// The forms that answer one pending action.
fn answer_forms(frame: &Frame<'_>, row: &PendingRow, with_args: bool) -> Markup {
    html! {
        form method="post" action=(format!("/approvals/{}/confirm", row.id)) {
            (frame.csrf_field())
            @if with_args {
                label {
                    "Arguments (edit before approving; they are checked again)"
                    textarea name="args" { (serde_json::to_string_pretty(&row.args).unwrap_or_default()) }
                }
            }
            button type="submit" { "Approve " (row.tool) }
        }
        form.row method="post" action=(format!("/approvals/{}/deny", row.id)) {
            (frame.csrf_field())
            label { "Reason (optional)" input type="text" name="reason"; }
            button.danger type="submit" { "Deny" }
        }
    }
}

fn pending_card(frame: &Frame<'_>, row: &PendingRow, ids: &[&str], with_args: bool) -> Markup {
    let short = short(&row.id, ids);
    html! {
        div.card {
            div {
                b { (short) } span.muted { (row.id.get(short.len()..).unwrap_or_default()) }
                " · " code { (row.tool) }
                " · " span.time { "asked " (frame.time(row.requested_at)) ", expires " (frame.time(row.expires_at)) }
            }
            p { (row.preview) }
            @if !row.reason.is_empty() { p.muted { (row.reason) } }
            (answer_forms(frame, row, with_args))
        }
    }
}

fn message_line(frame: &Frame<'_>, message: &OwnerMessage) -> Markup {
    html! {
        div.line {
            span.time { (frame.time(message.at)) } " "
            span.muted { (message.kind.as_str()) } " "
            span { (message.text) }
        }
    }
}

/// **Now**: channels, the step, what waits for the owner, today's messages.
pub fn now(
    frame: &Frame<'_>,
    status: &StatusReport,
    pending: &[PendingRow],
    today: &[OwnerMessage],
) -> Markup {
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    let waiting: Vec<&PendingRow> = pending.iter().filter(|p| p.state == "pending").collect();
    html! {
        div #live {
            h2 { "Working on" }
            @match &status.step {
                StepStatus::Idle => p.muted { "Nothing: idle. " (status.inbox_pending) " events wait." },
                StepStatus::Running { step, started_at } => p {
                    "Step " (step) " since " span.time { (frame.time(*started_at)) }
                    " · " (status.inbox_pending) " events wait."
                },
            }
            p.muted { "Model: " (status.brain) " (" (format!("{:?}", status.brain_state).to_lowercase()) ")"
                @if let Some(error) = &status.brain_last_error { " — " (error) } }
            @if !status.todo.is_empty() {
                h2 { "Task list" }
                ul.todo {
                    @for task in &status.todo {
                        li class=(format!("todo-{}", task.status)) {
                            span.muted { (task.status.replace('_', " ")) } " " (task.text)
                        }
                    }
                }
            }
            h2 { "Waiting for you (" (waiting.len()) ")" }
            @if waiting.is_empty() { p.empty { "Nothing waits for your approval." } }
            @for row in &waiting { (pending_card(frame, row, &ids, false)) }
            h2 { "Channels" }
            (channels(&status.channels))
            h2 { "Today's messages for you" }
            @if today.is_empty() { p.empty { "None yet today." } }
            @for message in today.iter().rev() { (message_line(frame, message)) }
        }
    }
}

/// **Approvals**: waiting ones (arguments editable), then the history with outcomes.
pub fn approvals(frame: &Frame<'_>, rows: &[PendingRow]) -> Markup {
    let ids: Vec<&str> = rows.iter().map(|p| p.id.as_str()).collect();
    html! {
        div #live {
            h2 { "Waiting" }
            @let waiting: Vec<&PendingRow> = rows.iter().filter(|p| p.state == "pending").collect();
            @if waiting.is_empty() { p.empty { "Nothing waits for your approval." } }
            @for row in &waiting { (pending_card(frame, row, &ids, true)) }
            h2 { "Answered" }
            table {
                thead { tr { th { "Asked" } th { "Id" } th { "Tool" } th { "Outcome" } } }
                tbody {
                    @for row in rows.iter().rev().filter(|p| p.state != "pending") {
                        tr {
                            td.time { (frame.time(row.requested_at)) }
                            td { code { (short(&row.id, &ids)) } }
                            td { details { summary { (row.tool) } pre { (row.preview) } } }
                            td class=(state_class(&row.state)) {
                                (row.state)
                                @if let Some(why) = &row.state_reason { ": " (why) }
                                @if let Some(result) = &row.result { div.muted { (result.content_text()) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// **Usage**: the daily budget, then model calls per day and per job (with their
/// tokens and cost) over the last weeks.
pub fn usage(budget: &BudgetReport, days: &[UsageRow], jobs: &[UsageRow]) -> Markup {
    let table = |caption: &str, rows: &[UsageRow]| {
        html! {
            table {
                caption { (caption) }
                thead { tr { th { "" } th.num { "Calls" } th.num { "Tokens in" } th.num { "Cached" } th.num { "Tokens out" } th.num { "Cost" } } }
                tbody {
                    @for row in rows {
                        tr {
                            td { b { (row.key) } }
                            td.num data-label="Calls" { (row.model_calls) }
                            td.num data-label="Tokens in" { (row.tokens_in) }
                            td.num data-label="Cached" { (row.tokens_cached) }
                            td.num data-label="Tokens out" { (row.tokens_out) }
                            td.num data-label="Cost" { (format!("{:.4}", row.cost)) }
                        }
                    }
                }
            }
            @if rows.is_empty() { p.empty { "No model calls yet." } }
        }
    };
    html! {
        div #live {
            section aria-label="Budget" {
                h2 { "Today (" (budget.day) ")" }
                p {
                    (budget.tokens_today) " tokens"
                    @if let Some(cap) = budget.daily_tokens { " of " (cap) " (budget.daily_tokens)" }
                    "; cost " (format!("{:.4}", budget.cost_today))
                    @if let Some(cap) = budget.daily_cost { " of " (cap) " (budget.daily_cost)" }
                    @if budget.daily_tokens.is_none() && budget.daily_cost.is_none() { " — no daily cap is set" }
                    "."
                }
                @if let Some(reason) = &budget.waiting {
                    p.state-waiting role="status" { "Model work waits: " (reason) }
                }
            }
            (table("Per day", days))
            (table("Per job (last 30 days)", jobs))
        }
    }
}

/// **Schedule**: jobs (next run in their zone, last outcome, pause / resume / trigger),
/// a form to add one, and the file watches.
pub fn schedule(frame: &Frame<'_>, jobs: &[JobRow], watches: &[WatchRow]) -> Markup {
    html! {
        div #live {
            table {
                thead { tr { th { "Job" } th { "When" } th { "Next run" } th { "Last" } th { "" } } }
                tbody {
                    @for job in jobs {
                        tr {
                            td { b { (job.name) } div.muted { (job.text) } }
                            td { code { (job.schedule) } div.muted { (job.tz) } }
                            td.time {
                                @if job.paused { span.state-waiting { "paused" } }
                                @else if let Some(next) = job.next_run {
                                    (next_in_zone(next, &job.tz))
                                } @else { "—" }
                            }
                            td { (job.last_outcome.as_deref().unwrap_or("—")) }
                            td {
                                @for (action, label) in job_actions(job) {
                                    form.inline method="post" action=(format!("/schedule/{}/{action}", job.name)) {
                                        (frame.csrf_field())
                                        button.secondary type="submit" { (label) }
                                    }
                                    " "
                                }
                            }
                        }
                    }
                }
            }
            @if jobs.is_empty() { p.empty { "No scheduled jobs." } }
        }
        h2 { "Add a job" }
        form.row method="post" action="/schedule" {
            (frame.csrf_field())
            label { "Name" input type="text" name="name" required; }
            label { "When (cron, every 10m, at 09:00, in 20m)" input type="text" name="schedule" required; }
            label { "Zone" input type="text" name="tz" placeholder=(frame.zone.name()); }
            label { "What it says" input type="text" name="text" required; }
            button type="submit" { "Add" }
        }
        h2 { "File watches" }
        @if watches.is_empty() { p.empty { "No file watches." } }
        table {
            tbody {
                @for watch in watches {
                    tr { td { b { (watch.name) } } td { code { (watch.path.display()) } } td { (watch.state) } }
                }
            }
        }
    }
}

fn job_actions(job: &JobRow) -> Vec<(&'static str, &'static str)> {
    let mut actions = vec![if job.paused {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    }];
    actions.push(("trigger", "Run now"));
    actions
}

fn next_in_zone(at: DateTime<Utc>, zone: &str) -> String {
    match zone.parse::<Zone>() {
        Ok(tz) => at
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M %Z")
            .to_string(),
        Err(_) => at.format("%Y-%m-%d %H:%M UTC").to_string(),
    }
}

/// The filters the activity page was asked with.
#[derive(Debug, Default)]
pub struct ActivityFilter {
    pub state: Option<String>,
    pub source: Option<String>,
    pub channel: Option<String>,
}

/// **Activity**: events with state, source, channel and text, filtered; each links to its
/// whole path.
pub fn activity(frame: &Frame<'_>, rows: &[EventRow], filter: &ActivityFilter) -> Markup {
    let states = [
        "",
        "pending",
        "merged",
        "duplicate",
        "rejected",
        "dead",
        "missed",
        "handled",
    ];
    html! {
        form.row method="get" action="/activity" {
            label { "State"
                select name="state" {
                    @for state in states {
                        @if filter.state.as_deref().unwrap_or_default() == state {
                            option value=(state) selected { (if state.is_empty() { "any" } else { state }) }
                        } @else {
                            option value=(state) { (if state.is_empty() { "any" } else { state }) }
                        }
                    }
                }
            }
            label { "Source"
                select name="source" {
                    @for source in ["", "user", "chat", "timer", "watch", "email", "webhook", "system", "lane"] {
                        @if filter.source.as_deref().unwrap_or_default() == source {
                            option value=(source) selected { (if source.is_empty() { "any" } else { source }) }
                        } @else {
                            option value=(source) { (if source.is_empty() { "any" } else { source }) }
                        }
                    }
                }
            }
            label { "Channel starts with" input type="text" name="channel" value=(filter.channel.as_deref().unwrap_or_default()); }
            button.secondary type="submit" { "Filter" }
        }
        div #live {
            table {
                thead { tr { th { "Received" } th { "State" } th { "Source" } th { "Channel" } th { "Text" } } }
                tbody {
                    @for row in rows.iter().rev() {
                        tr {
                            td.time { a href=(format!("/activity/{}", row.id)) { (frame.time(row.received_at)) } }
                            td class=(state_class(&row.state)) { (row.state) }
                            td { (row.source.as_str()) }
                            td { (row.channel) }
                            td { (crate::text::cut(&row.text, 200)) @if let Some(detail) = &row.detail { div.muted { (detail) } } }
                        }
                    }
                }
            }
            @if rows.is_empty() { p.empty { "No events." } }
        }
    }
}

/// One event's whole path: the event, then the items of the step that took it (tool calls,
/// results, the answer).
pub fn event_path(frame: &Frame<'_>, row: &EventRow, items: &[TrajectoryItem]) -> Markup {
    html! {
        div.card {
            div { span class=(state_class(&row.state)) { (row.state) } " · " (row.source.as_str()) " · " (row.channel) " · " span.muted { (row.sender) " (" (row.trust.as_str()) ")" } }
            div.time { "received " (frame.time(row.received_at)) ", happened " (frame.time(row.occurred_at)) }
            pre { (row.text) }
            @if let Some(detail) = &row.detail { p.muted { (detail) } }
        }
        @if items.is_empty() { p.empty { "Not in the conversation (yet): it is " (row.state) "." } }
        div #live { @for item in items { (trajectory_line(frame, item)) } }
    }
}

/// One trajectory item as a line of the conversation; tool calls and results folded.
fn trajectory_line(frame: &Frame<'_>, item: &TrajectoryItem) -> Markup {
    let time = frame.time(item.at);
    html! {
        div.line {
            span.time { (time) } " "
            @match &item.kind {
                ItemKind::Event { channel, sender, text, .. } => {
                    span.who { (sender.identity) } span.muted { "via " (channel) } pre { (text) }
                }
                ItemKind::Assistant { text, .. } => { span.who { "Steward" } pre { (text) } }
                ItemKind::ToolCall { tool, args, .. } => {
                    details { summary { "calls " code { (tool) } } pre { (pretty(args)) } }
                }
                ItemKind::ToolResult { tool, status, result, .. } => {
                    details { summary { code { (tool) } " " (format!("{status:?}").to_lowercase()) } pre { (pretty(result)) } }
                }
                ItemKind::StepStarted { .. } => span.muted { "step " (item.step) " started" },
                ItemKind::StepCompleted => span.muted { "step " (item.step) " done" },
                ItemKind::StepCancelled { reason, .. } => span.state-rejected { "step " (item.step) " cancelled: " (reason) },
                _ => span.muted { (item.kind.name()) },
            }
        }
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// **Chat**: the conversation (newest last, paged), and a box to write in.
pub fn chat(frame: &Frame<'_>, items: &[TrajectoryItem], earlier: Option<u64>) -> Markup {
    html! {
        @if let Some(before) = earlier {
            p { a href=(format!("/chat?before={before}")) { "Earlier messages" } }
        }
        div #live {
            @if items.is_empty() { p.empty { "Nothing said yet." } }
            @for item in items { (trajectory_line(frame, item)) }
        }
        form method="post" action="/chat" {
            (frame.csrf_field())
            label { "Message" textarea name="text" required autofocus {} }
            button type="submit" { "Send" }
        }
    }
}

/// The login link's page: the cookie is set; on to the page.
pub fn logged_in() -> Markup {
    bare(
        "Logged in",
        html! { p { "You are logged in. " a href="/" { "Go to the page" } "." } },
        Some("/"),
    )
}

/// Any page without a session.
pub fn login_needed() -> Markup {
    bare(
        "Log in",
        html! {
            p { "Run " code { "steward web login" } " on the machine Steward runs on and open the link it prints (it works once, for five minutes)." }
        },
        None,
    )
}

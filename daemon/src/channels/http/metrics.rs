//! `/metrics` in the Prometheus text format: what `steward status` knows, as numbers —
//! inbox depth, events accepted and their terminal states by source, step count and
//! duration, tool calls by tool and outcome, ledger actions by state, model tokens, pending
//! actions by state, channels up and their restarts, uptime. Counters count since the
//! daemon started. Behind the API token unless `[http] metrics_public = true`.

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::owner::OwnerApi;
use steward_protocol::StatusReport;

/// One metric family: its name, type, help and samples (labels, value).
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self {
            name,
            kind,
            help,
            samples: Vec::new(),
        }
    }

    fn value(mut self, value: f64) -> Self {
        self.samples.push((String::new(), value));
        self
    }

    /// Adds a sample labelled `label="value"` for each pair.
    fn by<'a>(mut self, label: &str, pairs: impl IntoIterator<Item = (&'a str, f64)>) -> Self {
        for (value, n) in pairs {
            self.samples
                .push((format!("{{{label}=\"{}\"}}", escape(value)), n));
        }
        self
    }
}

pub fn metrics(owner: &OwnerApi) -> Response {
    let status = owner.status();
    let mut families = activity(owner, &status);
    families.extend(tools(owner));
    families.extend(channels(owner));
    families.extend(model_usage(owner));
    let mut out = String::new();
    for family in families {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} {}",
            family.name, family.help, family.name, family.kind
        );
        for (labels, value) in family.samples {
            let _ = writeln!(out, "{}{labels} {value}", family.name);
        }
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out,
    )
        .into_response()
}

/// Uptime, the inbox, events, steps, lanes and model tokens.
fn activity(owner: &OwnerApi, status: &StatusReport) -> Vec<Family> {
    let outcomes = owner.inbox().outcome_counts();
    let (steps, seconds) = owner.shared.status.steps_done();
    let tokens = status.tokens_total;
    let mut terminal = Family::new(
        "steward_events_terminal_total",
        "counter",
        "Events that reached a terminal state, by source and state.",
    );
    for (source, state, n) in outcomes {
        terminal.samples.push((
            format!("{{source=\"{}\",state=\"{state}\"}}", source.as_str()),
            n as f64,
        ));
    }
    vec![
        Family::new(
            "steward_uptime_seconds",
            "gauge",
            "Seconds since the daemon started.",
        )
        .value(status.uptime_secs as f64),
        Family::new(
            "steward_inbox_pending",
            "gauge",
            "Events durable in the inbox and not yet merged.",
        )
        .value(status.inbox_pending as f64),
        Family::new(
            "steward_events_total",
            "counter",
            "Events accepted since the daemon started.",
        )
        .value(status.events_total as f64),
        Family::new("steward_lanes_running", "gauge", "Side lanes running now.")
            .value(status.lanes_running as f64),
        terminal,
        Family::new(
            "steward_steps_total",
            "counter",
            "Finished steps of the main trajectory.",
        )
        .value(steps as f64),
        Family::new(
            "steward_step_seconds_total",
            "counter",
            "Time spent in finished steps.",
        )
        .value(seconds),
        Family::new(
            "steward_model_tokens_total",
            "counter",
            "Model tokens since the daemon started.",
        )
        .by(
            "kind",
            [
                ("input", tokens.input as f64),
                ("cached_input", tokens.cached_input as f64),
                ("output", tokens.output as f64),
            ],
        ),
    ]
}

/// Model calls, tokens and cost by channel and model (the usage ledger's counters).
fn model_usage(owner: &OwnerApi) -> Vec<Family> {
    let mut calls = Family::new(
        "steward_model_calls_total",
        "counter",
        "Model calls since the daemon started, by the channel that caused them and the model.",
    );
    let mut tokens = Family::new(
        "steward_model_call_tokens_total",
        "counter",
        "Model tokens since the daemon started, by channel, model and kind (in counts cached).",
    );
    let mut cost = Family::new(
        "steward_model_cost_total",
        "counter",
        "Model cost since the daemon started (in the unit of the configured prices).",
    );
    for ((channel, model), row) in owner.shared.usage.counters() {
        let labels = format!(
            "channel=\"{}\",model=\"{}\"",
            escape(&channel),
            escape(&model)
        );
        calls
            .samples
            .push((format!("{{{labels}}}"), row.model_calls as f64));
        for (kind, n) in [
            ("in", row.tokens_in),
            ("cached", row.tokens_cached),
            ("out", row.tokens_out),
        ] {
            tokens
                .samples
                .push((format!("{{{labels},kind=\"{kind}\"}}"), n as f64));
        }
        cost.samples.push((format!("{{{labels}}}"), row.cost));
    }
    vec![calls, tokens, cost]
}

/// Tool calls, the ledger and pending confirmations.
fn tools(owner: &OwnerApi) -> Vec<Family> {
    let pipeline = &owner.shared.confirmations.pipeline;
    let mut calls = Family::new(
        "steward_tool_calls_total",
        "counter",
        "Tool calls by tool and outcome.",
    );
    for (tool, status, n) in pipeline.call_counts() {
        let outcome = serde_json::to_value(status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        calls.samples.push((
            format!("{{tool=\"{}\",outcome=\"{outcome}\"}}", escape(&tool)),
            n as f64,
        ));
    }
    let ledger = pipeline.ledger_states();
    let mut families = vec![
        calls,
        Family::new(
            "steward_ledger_actions",
            "gauge",
            "Actions in the idempotency ledger (its retention window), by state.",
        )
        .by("state", ledger.iter().map(|(state, n)| (*state, *n as f64))),
    ];
    if let Ok(actions) = owner.pending() {
        let mut by_state: BTreeMap<String, f64> = BTreeMap::new();
        for action in actions {
            *by_state.entry(action.state).or_default() += 1.0;
        }
        families.push(
            Family::new(
                "steward_pending_actions",
                "gauge",
                "Requests for the owner's confirmation, by state.",
            )
            .by(
                "state",
                by_state.iter().map(|(state, n)| (state.as_str(), *n)),
            ),
        );
    }
    families
}

/// Channel restarts and which channels are up.
fn channels(owner: &OwnerApi) -> Vec<Family> {
    let board = &owner.shared.status;
    let restarts = board.restarts();
    let up = board.channels_up();
    vec![
        Family::new(
            "steward_channel_restarts_total",
            "counter",
            "Times a channel went into backoff.",
        )
        .by(
            "channel",
            restarts.iter().map(|(name, n)| (name.as_str(), *n as f64)),
        ),
        Family::new("steward_channel_up", "gauge", "1 when a channel is up.").by(
            "channel",
            up.iter()
                .map(|(name, up)| (name.as_str(), if *up { 1.0 } else { 0.0 })),
        ),
    ]
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

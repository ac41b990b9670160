//! `/metrics` in the Prometheus text format: what `steward status` knows, as numbers —
//! inbox depth, events accepted and their terminal states by source, step count and
//! duration, tool calls by tool and outcome, ledger actions by state, model tokens, pending
//! actions by state, channels up and their restarts, uptime. Counters count since the
//! daemon started. Behind the API token unless `[http] metrics_public = true`.

use std::fmt::Write;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::api::Api;

pub async fn metrics(State(api): State<Api>) -> Response {
    let status = api.status.report();
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    metric(
        "steward_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &[(String::new(), status.uptime_secs as f64)],
    );
    metric(
        "steward_inbox_pending",
        "gauge",
        "Events durable in the inbox and not yet merged.",
        &[(String::new(), status.inbox_pending as f64)],
    );
    metric(
        "steward_events_total",
        "counter",
        "Events accepted since the daemon started.",
        &[(String::new(), status.events_total as f64)],
    );
    metric(
        "steward_lanes_running",
        "gauge",
        "Side lanes running now.",
        &[(String::new(), status.lanes_running as f64)],
    );
    let outcomes: Vec<(String, f64)> = api
        .submitter
        .inbox()
        .outcome_counts()
        .into_iter()
        .map(|(source, state, n)| {
            (
                format!("{{source=\"{}\",state=\"{state}\"}}", source.as_str()),
                n as f64,
            )
        })
        .collect();
    metric(
        "steward_events_terminal_total",
        "counter",
        "Events that reached a terminal state, by source and state.",
        &outcomes,
    );
    let (steps, seconds) = api.status.steps_done();
    metric(
        "steward_steps_total",
        "counter",
        "Finished steps of the main trajectory.",
        &[(String::new(), steps as f64)],
    );
    metric(
        "steward_step_seconds_total",
        "counter",
        "Time spent in finished steps.",
        &[(String::new(), seconds)],
    );
    let calls: Vec<(String, f64)> = api
        .confirmations
        .pipeline
        .call_counts()
        .into_iter()
        .map(|(tool, status, n)| {
            let outcome = serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            (
                format!("{{tool=\"{}\",outcome=\"{outcome}\"}}", escape(&tool)),
                n as f64,
            )
        })
        .collect();
    metric(
        "steward_tool_calls_total",
        "counter",
        "Tool calls by tool and outcome.",
        &calls,
    );
    let ledger: Vec<(String, f64)> = api
        .confirmations
        .pipeline
        .ledger_states()
        .into_iter()
        .map(|(state, n)| (format!("{{state=\"{state}\"}}"), n as f64))
        .collect();
    metric(
        "steward_ledger_actions",
        "gauge",
        "Actions in the idempotency ledger (its retention window), by state.",
        &ledger,
    );
    let restarts: Vec<(String, f64)> = api
        .status
        .restarts()
        .into_iter()
        .map(|(channel, n)| (format!("{{channel=\"{}\"}}", escape(&channel)), n as f64))
        .collect();
    metric(
        "steward_channel_restarts_total",
        "counter",
        "Times a channel went into backoff.",
        &restarts,
    );
    let tokens = status.tokens_total;
    metric(
        "steward_model_tokens_total",
        "counter",
        "Model tokens since the daemon started.",
        &[
            ("{kind=\"input\"}".into(), tokens.input as f64),
            ("{kind=\"cached_input\"}".into(), tokens.cached_input as f64),
            ("{kind=\"output\"}".into(), tokens.output as f64),
        ],
    );
    let up: Vec<(String, f64)> = api
        .status
        .channels_up()
        .into_iter()
        .map(|(name, up)| {
            (
                format!("{{channel=\"{}\"}}", escape(&name)),
                if up { 1.0 } else { 0.0 },
            )
        })
        .collect();
    metric(
        "steward_channel_up",
        "gauge",
        "1 when a channel is up.",
        &up,
    );
    if let Ok(actions) = api.confirmations.list() {
        let mut by_state: std::collections::BTreeMap<String, f64> = Default::default();
        for action in &actions {
            *by_state
                .entry(crate::protocol::PendingRow::from(action).state)
                .or_default() += 1.0;
        }
        let samples: Vec<(String, f64)> = by_state
            .into_iter()
            .map(|(state, n)| (format!("{{state=\"{}\"}}", escape(&state)), n))
            .collect();
        metric(
            "steward_pending_actions",
            "gauge",
            "Requests for the owner's confirmation, by state.",
            &samples,
        );
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out,
    )
        .into_response()
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

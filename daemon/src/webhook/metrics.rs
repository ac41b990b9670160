//! `/metrics` in the Prometheus text format: what `steward status` knows, as numbers —
//! inbox depth, events accepted, model tokens, pending actions by state, channels up,
//! uptime. Behind the API token unless `[http] metrics_public = true`.

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
    let up: Vec<(String, f64)> = status
        .channels
        .iter()
        .map(|c| {
            let down = c.state.starts_with("backoff") || c.state.starts_with("waiting");
            (
                format!("{{channel=\"{}\"}}", escape(&c.name)),
                if down { 0.0 } else { 1.0 },
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

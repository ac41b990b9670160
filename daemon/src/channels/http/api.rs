//! The owner's HTTP API under `/v1` (bearer token required): a thin transport over the
//! owner API ([`crate::owner`]) — send messages, follow replies and pending actions as
//! server-sent events, read the status, events, trajectory, jobs, watches and pending
//! actions, and answer them. The same data and field names as the CLI's `--json`; the
//! service's errors become 400 (invalid), 404 (not found), 409 (conflict) or 503
//! (unavailable), with `{"error": MESSAGE}`.
//!
//! The token is [`crate::owner::token`]'s. Requests without it get 401 with
//! `WWW-Authenticate: Bearer` and a JSON error, and touch nothing. A request whose `Host` is
//! not this server (the bound address, loopback on its port, or `http.hosts`) gets 421
//! before its token is looked at: that is what a DNS-rebinding page sends.
//!
//! `POST /v1/messages` takes a message as the control socket does (the same rule):
//! `202 {"event_id"}`, or for an empty or oversized text `422 {"event_id", "rejected":
//! REASON}` with the message recorded as a `rejected` event; `/confirm ID` and `/deny ID`
//! answer the action (`200` with the action, as `POST /v1/pending/ID/confirm`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::Urgency;
use tokio_util::sync::CancellationToken;

use crate::owner::{CronDone, FrontDoor, OwnerApi, OwnerError, Sent};
use crate::replies::Announcement;
use steward_protocol::CronCommand;

/// The server's state: the owner API and the server's shutdown (a message waiting on a
/// full inbox gives up with it).
#[derive(Clone, Debug)]
pub struct Api {
    pub owner: OwnerApi,
    pub shutdown: CancellationToken,
    pub hosts: std::sync::Arc<AllowedHosts>,
}

/// The `Host` values the owner API answers to: the bound address, loopback names on its
/// port, and `http.hosts`. A browser page on another origin that resolves its own name to
/// this address (DNS rebinding) sends its own name, and is refused with 421.
#[derive(Clone, Debug)]
pub struct AllowedHosts {
    port: u16,
    names: Vec<String>,
}

impl AllowedHosts {
    pub fn new(bound: std::net::SocketAddr, configured: Vec<String>) -> Self {
        let mut names = configured;
        names.push(bound.ip().to_string());
        names.push(format!("[{}]", bound.ip()));
        if bound.ip().is_loopback() || bound.ip().is_unspecified() {
            names.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
        }
        Self {
            port: bound.port(),
            names,
        }
    }

    /// Whether a request's `Host` names this server.
    pub fn admits(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !port.contains(']') && port.parse::<u16>().is_ok() => {
                (name, port.parse::<u16>().ok())
            }
            _ => (host.as_str(), None),
        };
        port.is_none_or(|p| p == self.port) && self.names.iter().any(|n| n == name)
    }
}

/// The `/v1` routes and `/metrics`, all behind the token unless `metrics_public`.
pub fn routes(api: Api, metrics_public: bool) -> Router {
    let public = if metrics_public {
        Router::new()
            .route("/metrics", get(metrics))
            .with_state(api.clone())
    } else {
        Router::new()
    };
    let private = if metrics_public {
        Router::new()
    } else {
        Router::new().route("/metrics", get(metrics))
    };
    private
        .route("/v1/messages", post(message))
        .route("/v1/status", get(status))
        .route("/v1/events", get(events))
        .route("/v1/trajectory", get(trajectory))
        .route("/v1/pending", get(pending))
        .route("/v1/pending/{id}/confirm", post(confirm))
        .route("/v1/pending/{id}/deny", post(deny))
        .route("/v1/cron", get(cron))
        .route("/v1/watches", get(watches))
        .route("/v1/stream", get(stream))
        .route_layer(middleware::from_fn_with_state(api.clone(), authorize))
        .route_layer(middleware::from_fn_with_state(api.clone(), named_host))
        .with_state(api)
        .merge(public)
}

/// Refuses a request whose `Host` is not this server (421, JSON), before the token is
/// looked at.
async fn named_host(State(api): State<Api>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    if api.hosts.admits(host) {
        return next.run(request).await;
    }
    json_response(
        StatusCode::MISDIRECTED_REQUEST,
        json!({"error": format!("Host {host:?} is not this server; add it to http.hosts if it is (a name that is not is how DNS rebinding reaches a local API)")}),
    )
}

async fn authorize(State(api): State<Api>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(token) if api.owner.token.accepts(token.trim()) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [
                (header::WWW_AUTHENTICATE, "Bearer realm=\"steward\""),
                (header::CONTENT_TYPE, "application/json"),
            ],
            json!({"error": "this needs the owner's bearer token (steward token show)"})
                .to_string(),
        )
            .into_response(),
    }
}

async fn metrics(State(api): State<Api>) -> Response {
    super::metrics::metrics(&api.owner)
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn bad_request(message: impl std::fmt::Display) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        json!({"error": message.to_string()}),
    )
}

/// The service's answer as a response: `200` with `ok`'s JSON, or the error's status.
fn answer<T: serde::Serialize>(result: Result<T, OwnerError>) -> Response {
    match result {
        Ok(body) => json_response(StatusCode::OK, json!(body)),
        Err(e) => {
            let status = match e {
                OwnerError::Invalid(_) => StatusCode::BAD_REQUEST,
                OwnerError::NotFound(_) => StatusCode::NOT_FOUND,
                OwnerError::Conflict(_) => StatusCode::CONFLICT,
                OwnerError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            json_response(status, json!({"error": e.to_string()}))
        }
    }
}

#[derive(Deserialize)]
struct NewMessage {
    text: String,
    #[serde(default)]
    urgency: Option<String>,
}

async fn message(State(api): State<Api>, body: Bytes) -> Response {
    let request: NewMessage = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return bad_request(format!("expected {{\"text\", \"urgency\"?}}: {e}")),
    };
    let urgency = match request.urgency.as_deref().map(Urgency::parse) {
        None => None,
        Some(Some(urgency)) => Some(urgency),
        Some(None) => return bad_request("urgency is cancel, queue or parallel"),
    };
    let sent = api
        .owner
        .send(FrontDoor::Http, request.text, urgency, &api.shutdown)
        .await;
    match sent {
        Ok(Sent::Accepted { event_id, .. }) => {
            json_response(StatusCode::ACCEPTED, json!({"event_id": event_id}))
        }
        Ok(Sent::Rejected { event_id, reason }) => json_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"event_id": event_id, "rejected": reason}),
        ),
        Ok(Sent::Answered(action)) => answer(Ok(*action)),
        Ok(Sent::Said(text)) => answer(Ok(json!({ "reply": text }))),
        Err(e) => answer::<()>(Err(e)),
    }
}

async fn status(State(api): State<Api>) -> Response {
    answer(Ok(api.owner.status()))
}

/// `?limit=N&state=S`, as `steward events --json` (a JSON array).
#[derive(Deserialize)]
struct Listing {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    state: Option<String>,
}

async fn events(State(api): State<Api>, Query(listing): Query<Listing>) -> Response {
    answer(
        api.owner
            .events(listing.limit, listing.state.as_deref())
            .map(|listing| listing.rows),
    )
}

/// `?limit=N`, as `steward trajectory --json` (a JSON array).
async fn trajectory(State(api): State<Api>, Query(listing): Query<Listing>) -> Response {
    answer(api.owner.trajectory(listing.limit))
}

async fn pending(State(api): State<Api>) -> Response {
    answer(api.owner.pending())
}

/// As `steward cron list --json` (a JSON array).
async fn cron(State(api): State<Api>) -> Response {
    answer(
        api.owner
            .cron(CronCommand::List)
            .await
            .map(|done| match done {
                CronDone::Jobs(jobs) => jobs,
                CronDone::Triggered(_) => Vec::new(),
            }),
    )
}

/// As `steward watch list --json` (a JSON array).
async fn watches(State(api): State<Api>) -> Response {
    answer(Ok(api.owner.watches()))
}

async fn confirm(State(api): State<Api>, UrlPath(id): UrlPath<String>, body: Bytes) -> Response {
    let args = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(value) => value.get("args").cloned(),
            Err(e) => return bad_request(format!("expected {{\"args\"?}}: {e}")),
        }
    };
    answer(api.owner.confirm(&id, args).await)
}

async fn deny(State(api): State<Api>, UrlPath(id): UrlPath<String>, body: Bytes) -> Response {
    let reason = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_owned));
    answer(api.owner.deny(&id, reason).await)
}

/// Owner messages routed to `http` (`pending` for a request for confirmation, `message`
/// for the rest, each with its outbox id as the event id) and replies, step endings and
/// tool results as they are announced — and `partial` (the text so far) while a model's
/// answer streams in. A client that reconnects with `Last-Event-ID` is
/// first given every owner message after that id.
async fn stream(State(api): State<Api>, headers: axum::http::HeaderMap) -> impl IntoResponse {
    let announced = api.owner.replies().subscribe();
    let outbox = api.owner.outbox().clone();
    let queued = outbox.subscribe();
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let backlog: Vec<_> = match resume {
        Some(id) => outbox.after(id).unwrap_or_default(),
        None => Vec::new(),
    };
    let shown = backlog.last().map(|m| m.id).or(resume).unwrap_or(0);
    let backlog: Vec<_> = backlog
        .into_iter()
        .filter(|m| outbox.routes(HTTP, m))
        .collect();
    let backlog = futures_util::stream::iter(backlog.into_iter().map(|m| Ok(message_event(&m))));
    let announcements = futures_util::stream::unfold(announced, |mut receiver| async move {
        let event = match receiver.recv().await {
            Ok(announcement) => {
                let (kind, data) = describe(announcement);
                SseEvent::default().event(kind).data(data.to_string())
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => SseEvent::default()
                .event("lagged")
                .data(json!({"missed": missed}).to_string()),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<_, std::convert::Infallible>(event), receiver))
    });
    let caught_up = std::collections::VecDeque::new();
    let live = futures_util::stream::unfold(
        (queued, outbox, shown, caught_up),
        |(mut receiver, outbox, mut shown, mut caught_up)| async move {
            loop {
                let message = match caught_up.pop_front() {
                    Some(message) => message,
                    None => match receiver.recv().await {
                        Ok(message) => std::sync::Arc::unwrap_or_clone(message),
                        // Fell behind the broadcast: the outbox has what was missed.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            caught_up = outbox.after(shown).unwrap_or_default().into();
                            continue;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    },
                };
                if message.id <= shown {
                    continue;
                }
                shown = message.id;
                if !outbox.routes(HTTP, &message) {
                    continue;
                }
                if let Err(e) = outbox.delivered(message.id, HTTP).await {
                    tracing::warn!(error = %e, "could not record a delivery");
                }
                let event = message_event(&message);
                return Some((Ok(event), (receiver, outbox, shown, caught_up)));
            }
        },
    );
    use futures_util::StreamExt;
    let events = backlog.chain(futures_util::stream::select(live, announcements));
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// The outbox's name for deliveries over the event stream.
const HTTP: &str = "http";

/// An owner message as a stream event: `pending` (a request for confirmation) or
/// `message`, its id, its JSON.
fn message_event(message: &steward_protocol::OwnerMessage) -> SseEvent {
    let kind = match message.kind {
        steward_protocol::MessageKind::Confirmation => "pending",
        _ => "message",
    };
    SseEvent::default()
        .event(kind)
        .id(message.id.to_string())
        .data(json!(message).to_string())
}

/// An announcement as a stream event: its kind and its JSON.
fn describe(announcement: Announcement) -> (&'static str, Value) {
    match announcement {
        Announcement::Reply { text, reply_to } => {
            ("reply", json!({"text": text, "reply_to": reply_to}))
        }
        Announcement::Partial { text, reply_to } => {
            ("partial", json!({"text": text, "reply_to": reply_to}))
        }
        Announcement::StepEnded { events, outcome } => {
            ("step_ended", json!({"events": events, "outcome": outcome}))
        }
        Announcement::ToolResult { origin, outcome } => {
            ("tool_result", json!({"origin": origin, "outcome": outcome}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AllowedHosts;

    #[test]
    fn only_this_servers_names_are_admitted_as_host() {
        let loopback = AllowedHosts::new(
            "127.0.0.1:8787".parse().unwrap(),
            vec!["steward.home.arpa".into()],
        );
        let table = [
            ("127.0.0.1:8787", true),
            ("localhost:8787", true),
            ("LOCALHOST:8787", true),
            ("[::1]:8787", true),
            ("localhost", true),
            ("steward.home.arpa", true),
            ("steward.home.arpa:8787", true),
            ("127.0.0.1:9999", false),
            ("evil.example:8787", false),
            ("evil.example", false),
            ("localhost.evil.example:8787", false),
            ("", false),
        ];
        for (host, admitted) in table {
            assert_eq!(loopback.admits(host), admitted, "{host:?}");
        }
        let lan = AllowedHosts::new("192.168.1.5:80".parse().unwrap(), Vec::new());
        assert!(lan.admits("192.168.1.5"));
        assert!(
            !lan.admits("localhost:80"),
            "a LAN bind is not reached as localhost"
        );
    }
}

//! The owner's HTTP API under `/v1` (bearer token required): send messages, follow replies
//! and pending actions as server-sent events, read the status and the pending actions, and
//! answer them. The same data and field names as the CLI's `--json`.
//!
//! The token lives in `DATA_DIR/api.token` (mode 0600), made on the first start;
//! `steward token show` prints it and `steward token rotate` replaces it (the old one stops
//! working at once). Requests without it get 401 and touch nothing.
//!
//! `POST /v1/messages` takes a message as the control socket does (the same rule,
//! [`crate::channels::owner_message`]): `202 {"event_id"}`, or for an empty or oversized text
//! `422 {"event_id", "rejected": REASON}` with the message recorded as a `rejected` event.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

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
use steward_events::{Event, Payload, Sender, Source, StateKind, Trust, Urgency};

use super::verify::constant_time_eq;
use crate::confirmations::{Answer, Confirmations};
use crate::protocol::{EventRow, PendingRow};
use crate::replies::{Announcement, ReplyHub};
use crate::status::StatusBoard;

/// The API token, shared by the server and the control socket (which rotates it).
#[derive(Clone, Debug)]
pub struct ApiToken {
    path: PathBuf,
    value: Arc<RwLock<String>>,
}

impl ApiToken {
    /// The token of `data_dir`, made (0600) when there is none yet.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<Self> {
        let path = data_dir.join("api.token");
        let value = match std::fs::read_to_string(&path) {
            Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
            _ => write_new(&path)?,
        };
        Ok(Self {
            path,
            value: Arc::new(RwLock::new(value)),
        })
    }

    /// Replaces the token; returns the new one.
    pub fn rotate(&self) -> std::io::Result<String> {
        let token = write_new(&self.path)?;
        *self.value.write().unwrap_or_else(|p| p.into_inner()) = token.clone();
        Ok(token)
    }

    fn accepts(&self, given: &str) -> bool {
        let token = self.value.read().unwrap_or_else(|p| p.into_inner());
        constant_time_eq(token.as_bytes(), given.as_bytes())
    }
}

/// 160 random bits from two ULIDs' random parts, hex.
fn write_new(path: &Path) -> std::io::Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let token = format!(
        "{:020x}{:020x}",
        ulid::Ulid::generate().random(),
        ulid::Ulid::generate().random()
    );
    let temporary = path.with_extension("new");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    Ok(token)
}

#[derive(Clone, Debug)]
pub struct Api {
    pub token: ApiToken,
    pub submitter: crate::channels::Submitter,
    pub status: Arc<StatusBoard>,
    pub confirmations: Arc<Confirmations>,
    pub replies: ReplyHub,
    pub trajectory: Arc<crate::store::Trajectory>,
}

/// The `/v1` routes and `/metrics`, all behind the token unless `metrics_public`.
pub fn routes(api: Api, metrics_public: bool) -> Router {
    let public = if metrics_public {
        Router::new()
            .route("/metrics", get(super::metrics::metrics))
            .with_state(api.clone())
    } else {
        Router::new()
    };
    let private = if metrics_public {
        Router::new()
    } else {
        Router::new().route("/metrics", get(super::metrics::metrics))
    };
    private
        .route("/v1/messages", post(message))
        .route("/v1/status", get(status))
        .route("/v1/events", get(events))
        .route("/v1/trajectory", get(trajectory))
        .route("/v1/pending", get(pending))
        .route("/v1/pending/{id}/confirm", post(confirm))
        .route("/v1/pending/{id}/deny", post(deny))
        .route("/v1/stream", get(stream))
        .route_layer(middleware::from_fn_with_state(api.clone(), authorize))
        .with_state(api)
        .merge(public)
}

async fn authorize(State(api): State<Api>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(token) if api.token.accepts(token.trim()) => next.run(request).await,
        _ => StatusCode::UNAUTHORIZED.into_response(),
    }
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
    let mut event = Event::new(
        Source::User,
        "user:http",
        Sender {
            identity: "owner".into(),
            authenticated_by: "api-token".into(),
        },
        Trust::Owner,
        Payload::Message { text: request.text },
    );
    event.requested_urgency = urgency;
    // Refused as the socket refuses it: recorded `rejected`, and the client told why.
    if let Some(reason) = crate::channels::owner_message::refusal(event.payload.text()) {
        return match api.submitter.reject(event, reason.clone()).await {
            Ok(submitted) => json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"event_id": submitted.id, "rejected": reason}),
            ),
            Err(e) => json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": e.to_string()}),
            ),
        };
    }
    match api.submitter.submit(event).await {
        Ok(submitted) => json_response(StatusCode::ACCEPTED, json!({"event_id": submitted.id})),
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": e.to_string()}),
        ),
    }
}

async fn status(State(api): State<Api>) -> Response {
    json_response(StatusCode::OK, json!(api.status.report()))
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
    let state = match listing.state.as_deref().map(StateKind::parse).transpose() {
        Ok(state) => state,
        Err(message) => return bad_request(message),
    };
    match api.submitter.inbox().list(listing.limit, state) {
        Ok(records) => {
            let rows: Vec<EventRow> = records.iter().map(EventRow::from).collect();
            json_response(StatusCode::OK, json!(rows))
        }
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": e.to_string()}),
        ),
    }
}

/// `?limit=N`, as `steward trajectory --json` (a JSON array).
async fn trajectory(State(api): State<Api>, Query(listing): Query<Listing>) -> Response {
    match api.trajectory.list(listing.limit) {
        Ok(items) => json_response(StatusCode::OK, json!(items)),
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": e.to_string()}),
        ),
    }
}

async fn pending(State(api): State<Api>) -> Response {
    match api.confirmations.list() {
        Ok(actions) => {
            let rows: Vec<PendingRow> = actions.iter().map(PendingRow::from).collect();
            json_response(StatusCode::OK, json!(rows))
        }
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": e.to_string()}),
        ),
    }
}

fn answer(result: Result<Answer, crate::confirmations::ConfirmError>) -> Response {
    match result {
        Ok(Answer::Ran(action) | Answer::Denied(action)) => {
            json_response(StatusCode::OK, json!(PendingRow::from(&action)))
        }
        Ok(Answer::Refused(message)) => {
            json_response(StatusCode::CONFLICT, json!({"error": message}))
        }
        Err(e) => json_response(StatusCode::NOT_FOUND, json!({"error": e.to_string()})),
    }
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
    answer(api.confirmations.approve(&id, args).await)
}

async fn deny(State(api): State<Api>, UrlPath(id): UrlPath<String>, body: Bytes) -> Response {
    let reason = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_owned));
    answer(api.confirmations.deny(&id, reason).await)
}

/// Replies, notices, step endings and tool results as they are announced.
async fn stream(State(api): State<Api>) -> impl IntoResponse {
    let receiver = api.replies.subscribe();
    let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
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
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// An announcement as a stream event: its kind and its JSON.
fn describe(announcement: Announcement) -> (&'static str, Value) {
    match announcement {
        Announcement::Reply { text, reply_to } => {
            ("reply", json!({"text": text, "reply_to": reply_to}))
        }
        Announcement::Notice { text, origin } => {
            ("notice", json!({"text": text, "origin": origin}))
        }
        Announcement::StepEnded { events, outcome } => {
            ("step_ended", json!({"events": events, "outcome": outcome}))
        }
        Announcement::ToolResult { origin, outcome } => {
            ("tool_result", json!({"origin": origin, "outcome": outcome}))
        }
    }
}

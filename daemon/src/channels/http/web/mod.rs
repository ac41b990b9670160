//! The owner's web page, served under `/` by the HTTP server when `http.web` is on (the
//! default): **Now**, **Chat**, **Approvals**, **Activity** (with an event's whole path),
//! **Schedule** and **Usage**, each a thin view over the owner API ([`crate::owner`]) — the same service
//! the socket and `/v1` use, so the page can do nothing the CLI cannot.
//!
//! - [`guard`]: `Host`, the session cookie, CSRF + `Origin` on every `POST`, and the
//!   security headers on every answer.
//! - [`pages`]: the HTML (server-rendered, no inline script); `static/` holds htmx, a
//!   small `app.js` (live updates from one event stream) and the stylesheet, all embedded in
//!   the binary.
//!
//! Decided here:
//! - `GET /login?token=…` (the link `steward web login` prints) makes the session and
//!   answers a page that sets the cookie and moves on to `/`, so the token does not stay in
//!   the address bar; after that no secret is ever in a URL. A used, expired or unknown
//!   token gets 403 and changes nothing.
//! - A `POST` answers `303 See Other` back to its page (the form's page shows the outcome).
//! - `/web/stream` is the session's event stream: owner messages and the reply hub's
//!   announcements as `changed` notices (the page fetches what it shows itself), and a
//!   streaming answer's text so far as `partial`. An open page costs the daemon that one
//!   connection and nothing else.
//! - **Usage** shows the daily budget and the usage ledger's last 30 days per day (newest
//!   first) and per job ([`crate::usage`]).

pub mod guard;
pub mod pages;

use std::sync::Arc;

use crate::zone::Zone;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::Utc;
use maud::Markup;
use serde::Deserialize;
use steward_protocol::{CronCommand, NewJob, UsageBy};
use tokio_util::sync::CancellationToken;

use self::pages::{ActivityFilter, Frame, Nav};
use super::api::AllowedHosts;
use crate::owner::{CronDone, FrontDoor, OwnerApi, OwnerError};
use crate::replies::Announcement;

/// What the page's handlers share.
#[derive(Clone, Debug)]
pub struct Web {
    pub owner: OwnerApi,
    pub hosts: Arc<AllowedHosts>,
    pub zone: Zone,
    pub shutdown: CancellationToken,
}

/// The page's routes (see the module docs).
pub fn routes(web: Web) -> Router {
    web.owner.web.set_served(true);
    Router::new()
        .route("/", get(now))
        .route("/chat", get(chat).post(send))
        .route("/approvals", get(approvals))
        .route("/approvals/{id}/{answer}", post(answer))
        .route("/activity", get(activity))
        .route("/activity/{id}", get(event_path))
        .route("/schedule", get(schedule).post(add_job))
        .route("/schedule/{name}/{action}", post(job_action))
        .route("/usage", get(usage))
        .route("/login", get(login))
        .route("/logout", post(logout))
        .route("/web/stream", get(stream))
        .route("/static/{file}", get(asset))
        .route_layer(middleware::from_fn_with_state(
            web.clone(),
            guard::named_host,
        ))
        .layer(middleware::from_fn(guard::headers))
        .with_state(web)
}

fn html(markup: Markup) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

fn login_needed() -> Response {
    (StatusCode::UNAUTHORIZED, html(pages::login_needed())).into_response()
}

/// Renders a page of a logged-in session, or the login page.
fn page(
    web: &Web,
    headers: &HeaderMap,
    render: impl FnOnce(&Frame<'_>) -> Result<Markup, OwnerError>,
) -> Response {
    let Some((_, session)) = guard::session(web, headers) else {
        return login_needed();
    };
    let frame = Frame {
        csrf: &session.csrf,
        zone: web.zone,
    };
    match render(&frame) {
        Ok(markup) => html(markup),
        Err(e) => guard::refused(status_of(&e), &e.to_string()),
    }
}

fn status_of(error: &OwnerError) -> StatusCode {
    match error {
        OwnerError::Invalid(_) => StatusCode::BAD_REQUEST,
        OwnerError::NotFound(_) => StatusCode::NOT_FOUND,
        OwnerError::Conflict(_) => StatusCode::CONFLICT,
        OwnerError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

async fn now(State(web): State<Web>, headers: HeaderMap) -> Response {
    page(&web, &headers, |frame| {
        let status = web.owner.status();
        let pending = web.owner.pending()?;
        let midnight = Utc::now()
            .with_timezone(&web.zone)
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .and_then(|t| t.and_local_timezone(web.zone).earliest())
            .map(|t| t.with_timezone(&Utc));
        let today: Vec<_> = web
            .owner
            .outbox_list(Some(200))?
            .into_iter()
            .filter(|m| midnight.is_none_or(|start| m.at >= start))
            .collect();
        Ok(pages::layout(
            frame,
            Nav::Now,
            "Now",
            pages::now(frame, &status, &pending, &today),
        ))
    })
}

#[derive(Deserialize)]
struct ChatQuery {
    #[serde(default)]
    before: Option<u64>,
}

async fn chat(
    State(web): State<Web>,
    headers: HeaderMap,
    Query(query): Query<ChatQuery>,
) -> Response {
    page(&web, &headers, |frame| {
        let items = web.owner.trajectory_page(query.before, pages::CHAT_PAGE)?;
        let earlier = items
            .first()
            .filter(|first| first.seq > 1 && items.len() == pages::CHAT_PAGE)
            .map(|first| first.seq);
        Ok(pages::layout(
            frame,
            Nav::Chat,
            "Chat",
            pages::chat(frame, &items, earlier),
        ))
    })
}

async fn approvals(State(web): State<Web>, headers: HeaderMap) -> Response {
    page(&web, &headers, |frame| {
        let rows = web.owner.pending()?;
        Ok(pages::layout(
            frame,
            Nav::Approvals,
            "Approvals",
            pages::approvals(frame, &rows),
        ))
    })
}

#[derive(Deserialize)]
struct ActivityQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    channel: Option<String>,
}

async fn activity(
    State(web): State<Web>,
    headers: HeaderMap,
    Query(query): Query<ActivityQuery>,
) -> Response {
    let filter = ActivityFilter {
        state: query.state.filter(|s| !s.is_empty()),
        source: query.source.filter(|s| !s.is_empty()),
        channel: query.channel.filter(|c| !c.is_empty()),
    };
    page(&web, &headers, |frame| {
        let mut rows = web
            .owner
            .events(Some(pages::ACTIVITY_PAGE), filter.state.as_deref())?
            .rows;
        if let Some(prefix) = &filter.channel {
            rows.retain(|r| r.channel.starts_with(prefix.as_str()));
        }
        if let Some(source) = &filter.source {
            rows.retain(|r| r.source.as_str() == source);
        }
        Ok(pages::layout(
            frame,
            Nav::Activity,
            "Activity",
            pages::activity(frame, &rows, &filter),
        ))
    })
}

async fn event_path(
    State(web): State<Web>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    page(&web, &headers, |frame| {
        let (row, items) = web.owner.event_path(&id)?;
        Ok(pages::layout(
            frame,
            Nav::Activity,
            "An event's path",
            pages::event_path(frame, &row, &items),
        ))
    })
}

async fn schedule(State(web): State<Web>, headers: HeaderMap) -> Response {
    let jobs = match web.owner.cron(CronCommand::List).await {
        Ok(CronDone::Jobs(jobs)) => jobs,
        Ok(CronDone::Triggered(_)) => Vec::new(),
        Err(e) => return guard::refused(status_of(&e), &e.to_string()),
    };
    page(&web, &headers, |frame| {
        Ok(pages::layout(
            frame,
            Nav::Schedule,
            "Schedule",
            pages::schedule(frame, &jobs, &web.owner.watches()),
        ))
    })
}

async fn usage(State(web): State<Web>, headers: HeaderMap) -> Response {
    let ledger = &web.owner.shared.usage;
    let since = ledger.day_of(chrono::Utc::now()) - chrono::Days::new(30);
    let rows = |by| {
        ledger
            .rows(by, Some(since))
            .map_err(|e| OwnerError::Unavailable(e.to_string()))
    };
    let (mut days, jobs) = match (rows(UsageBy::Day), rows(UsageBy::Job)) {
        (Ok(days), Ok(jobs)) => (days, jobs),
        (Err(e), _) | (_, Err(e)) => return guard::refused(status_of(&e), &e.to_string()),
    };
    days.reverse();
    let budget = ledger.report();
    page(&web, &headers, |frame| {
        Ok(pages::layout(
            frame,
            Nav::Usage,
            "Usage",
            pages::usage(&budget, &days, &jobs),
        ))
    })
}

/// After a change: back to `to`, or the refusal.
fn done(to: &str, outcome: Result<(), OwnerError>) -> Response {
    match outcome {
        Ok(()) => Redirect::to(to).into_response(),
        Err(e) => guard::refused(status_of(&e), &e.to_string()),
    }
}

async fn send(State(web): State<Web>, headers: HeaderMap, body: Bytes) -> Response {
    let form = match guard::changing(&web, &headers, &body) {
        Ok(checked) => checked.form,
        Err(refused) => return refused.into_response(),
    };
    let text = form.get("text").cloned().unwrap_or_default();
    let sent = web
        .owner
        .send(FrontDoor::Http, text, None, &web.shutdown)
        .await;
    done("/chat", sent.map(drop))
}

async fn answer(
    State(web): State<Web>,
    headers: HeaderMap,
    UrlPath((id, answer)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    let form = match guard::changing(&web, &headers, &body) {
        Ok(checked) => checked.form,
        Err(refused) => return refused.into_response(),
    };
    let outcome = match answer.as_str() {
        "confirm" => {
            let args = match form.get("args").map(|a| a.trim()).filter(|a| !a.is_empty()) {
                None => None,
                Some(text) => match serde_json::from_str(text) {
                    Ok(args) => Some(args),
                    Err(e) => {
                        return guard::refused(
                            StatusCode::BAD_REQUEST,
                            &format!("The arguments are not JSON: {e}"),
                        );
                    }
                },
            };
            web.owner.confirm(&id, args).await.map(drop)
        }
        "deny" => {
            let reason = form
                .get("reason")
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty());
            web.owner.deny(&id, reason).await.map(drop)
        }
        _ => return guard::refused(StatusCode::NOT_FOUND, "No such answer."),
    };
    done("/approvals", outcome)
}

async fn job_action(
    State(web): State<Web>,
    headers: HeaderMap,
    UrlPath((name, action)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    if let Err(refused) = guard::changing(&web, &headers, &body) {
        return refused.into_response();
    }
    let command = match action.as_str() {
        "pause" => CronCommand::Pause { name },
        "resume" => CronCommand::Resume { name },
        "trigger" => CronCommand::Trigger { name },
        _ => return guard::refused(StatusCode::NOT_FOUND, "No such action."),
    };
    done("/schedule", web.owner.cron(command).await.map(drop))
}

async fn add_job(State(web): State<Web>, headers: HeaderMap, body: Bytes) -> Response {
    let form = match guard::changing(&web, &headers, &body) {
        Ok(checked) => checked.form,
        Err(refused) => return refused.into_response(),
    };
    let field = |name: &str| {
        form.get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let job = NewJob {
        name: field("name").unwrap_or_default(),
        schedule: field("schedule").unwrap_or_default(),
        tz: field("tz"),
        text: field("text"),
        action: None,
        urgency: None,
        missed: None,
        max_lateness_secs: None,
    };
    done(
        "/schedule",
        web.owner.cron(CronCommand::Add { job }).await.map(drop),
    )
}

#[derive(Deserialize)]
struct LoginQuery {
    #[serde(default)]
    token: String,
}

async fn login(State(web): State<Web>, Query(query): Query<LoginQuery>) -> Response {
    match web.owner.web.redeem(&query.token, Utc::now()).await {
        Ok(Some((id, _))) => (
            [(header::SET_COOKIE, guard::cookie(&id))],
            html(pages::logged_in()),
        )
            .into_response(),
        Ok(None) => guard::refused(
            StatusCode::FORBIDDEN,
            "This login link is not valid: it was used already, or it expired (links work once, for five minutes). Run `steward web login` for a new one.",
        ),
        Err(e) => guard::refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn logout(State(web): State<Web>, headers: HeaderMap, body: Bytes) -> Response {
    let id = match guard::changing(&web, &headers, &body) {
        Ok(checked) => checked.session_id,
        Err(refused) => return refused.into_response(),
    };
    if let Err(e) = web.owner.web.end(&id).await {
        return guard::refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
    }
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, guard::cleared_cookie()),
            (header::LOCATION, "/".to_owned()),
        ],
    )
        .into_response()
}

/// `changed` whenever an owner message is queued (with its outbox id as the event id) or
/// the reply hub announces something; `partial` with `{"text"}` while a model's answer
/// streams in, then `answered` once the answer is in the conversation (or the step ended). A page that reconnects
/// with `Last-Event-ID` is told at once when owner messages came after that id while it
/// was away.
async fn stream(State(web): State<Web>, headers: HeaderMap) -> Response {
    if guard::session(&web, &headers).is_none() {
        return login_needed();
    }
    let queued = web.owner.outbox().subscribe();
    let announced = web.owner.replies().subscribe();
    let missed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .and_then(|seen| web.owner.outbox().after(seen).ok())
        .and_then(|after| after.last().map(|m| m.id));
    let catch_up = futures_util::stream::iter(missed.map(|id| changed(Some(id))));
    let messages = futures_util::stream::unfold(queued, |mut receiver| async move {
        match receiver.recv().await {
            Ok(message) => Some((changed(Some(message.id)), receiver)),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                Some((changed(None), receiver))
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
        }
    });
    let announcements = futures_util::stream::unfold(announced, |mut receiver| async move {
        match receiver.recv().await {
            Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
            Ok(Announcement::Partial { text, .. }) => {
                let data = serde_json::json!({ "text": text }).to_string();
                Some((
                    Ok(SseEvent::default().event("partial").data(data)),
                    receiver,
                ))
            }
            // The streamed text is over: the answer is in the conversation, or the step
            // ended without one.
            Ok(Announcement::Reply { .. } | Announcement::StepEnded { .. }) => Some((
                Ok(SseEvent::default().event("answered").data("{}")),
                receiver,
            )),
            _ => Some((changed(None), receiver)),
        }
    });
    use futures_util::StreamExt;
    let events = catch_up.chain(futures_util::stream::select(messages, announcements));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A `changed` notice; `id`: the owner message it tells of.
fn changed(id: Option<u64>) -> Result<SseEvent, std::convert::Infallible> {
    let event = SseEvent::default().event("changed").data("{}");
    Ok(match id {
        Some(id) => event.id(id.to_string()),
        None => event,
    })
}

/// The embedded files (see the module docs).
async fn asset(UrlPath(file): UrlPath<String>) -> Response {
    let (kind, body): (&str, &'static [u8]) = match file.as_str() {
        "htmx.min.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("assets/htmx.min.js"),
        ),
        "app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("assets/app.js"),
        ),
        "style.css" => (
            "text/css; charset=utf-8",
            include_bytes!("assets/style.css"),
        ),
        _ => return guard::refused(StatusCode::NOT_FOUND, "No such file."),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

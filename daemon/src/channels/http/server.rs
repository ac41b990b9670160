//! The HTTP server (axum): webhook routes at `/hooks/NAME`, the owner API under `/v1`
//! ([`super::api`]), `/healthz` and `/readyz`, and the owner's page ([`super::web`]) when
//! `http.web`.
//!
//! A delivery is answered only after its event is durable in the inbox: `202
//! {"event_id"}`, or `200 {"event_id": <original>, "duplicate": true}` for a redelivery
//! of the same delivery id. Refusals store nothing: 401 with an empty body for a failed
//! webhook signature (the reason goes to the log), 413 for a body over the route's limit, 429
//! with `Retry-After` over the route's rate, 404 for an unknown route, 503 when the inbox
//! cannot take the event, 408 for a request over `request_timeout_secs` (a trickled body).
//!
//! Connections are limited (`http.max_connections`, `http.header_timeout_secs`; see
//! [`serve`]). The server runs when the config has an `[http]` table or webhook routes; its address
//! (port 0 picks a free one) is written to `DATA_DIR/http.addr` and shown in `steward
//! status` as the channel `http`. It stops with the daemon: in-flight requests finish.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use steward_config::{HttpConfig, WebhookRouteConfig};
use steward_events::{Event, Payload, Sender, SenderDecision, SenderPolicy, Source, Trust};
use tokio::time::Instant;
use tracing::{info, warn};

use super::template::{DeliveryBody, render};
use super::verify::{Auth, verify};
use crate::channels::ChannelHealth;
use crate::channels::context::ChannelContext;
use crate::owner::OwnerApi;

/// A route ready to serve: its config, its secret, its rate bucket.
struct Route {
    config: WebhookRouteConfig,
    auth: Auth,
    secret: String,
    bucket: Mutex<Bucket>,
}

/// A token bucket: `rate_per_min` tokens a minute, as many at once.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Route {
    /// Takes a token, or says how many seconds until there is one.
    fn admit(&self) -> Result<(), u64> {
        let capacity = f64::from(self.config.rate_per_min);
        let per_sec = capacity / 60.0;
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        bucket.tokens = (bucket.tokens + (now - bucket.at).as_secs_f64() * per_sec).min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.tokens) / per_sec).ceil().max(1.0) as u64)
        }
    }
}

#[derive(Clone)]
struct AppState {
    routes: Arc<HashMap<String, Route>>,
    cx: ChannelContext,
    senders: Arc<SenderPolicy>,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "config key `webhook.routes[{index}]`: cannot read the secret of route {route}: {reason}"
    )]
    Secret {
        index: usize,
        route: String,
        reason: String,
    },
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

/// The server, checked and bound, ready to [`run`].
pub struct Bound {
    listener: tokio::net::TcpListener,
    address: SocketAddr,
    routes: HashMap<String, Route>,
    senders: SenderPolicy,
    owner: OwnerApi,
    metrics_public: bool,
    hosts: super::api::AllowedHosts,
    limits: ConnectionLimits,
    request_timeout: std::time::Duration,
    largest_body: usize,
    /// The owner's page, in the owner's zone, when `http.web`.
    // Read only where the page is built in (the `web` feature).
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    web: Option<crate::zone::Zone>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// The server the config asks for: each route's secret read, the address bound (and
/// written to `DATA_DIR/http.addr`). Nothing is served until [`run`].
pub async fn bind(
    http: &HttpConfig,
    // Read only where the page is built in (the `web` feature).
    #[cfg_attr(not(feature = "web"), allow(dead_code))] web: Option<crate::zone::Zone>,
    routes: &[WebhookRouteConfig],
    senders: SenderPolicy,
    owner: OwnerApi,
    data_dir: &Path,
) -> Result<Bound, HttpError> {
    let mut table = HashMap::new();
    for (index, config) in routes.iter().enumerate() {
        let secret = config.secret.read().map_err(|reason| HttpError::Secret {
            index,
            route: config.name.clone(),
            reason,
        })?;
        let route = Route {
            auth: Auth::parse(&config.auth).unwrap_or(Auth::Bearer),
            secret,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(config.rate_per_min),
                at: Instant::now(),
            }),
            config: config.clone(),
        };
        table.insert(config.name.clone(), route);
    }
    let largest_body = routes
        .iter()
        .map(|r| r.max_body_bytes)
        .chain([http.max_body_bytes])
        .max()
        .unwrap_or(http.max_body_bytes);
    let bind_error = |source| HttpError::Bind {
        address: http.listen.clone(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(&http.listen)
        .await
        .map_err(bind_error)?;
    let address: SocketAddr = listener.local_addr().map_err(bind_error)?;
    // For tools and tests that asked for port 0.
    let _ = std::fs::write(data_dir.join("http.addr"), address.to_string());
    Ok(Bound {
        listener,
        address,
        routes: table,
        senders,
        owner,
        metrics_public: http.metrics_public,
        hosts: super::api::AllowedHosts::new(address, http.hosts.clone()),
        limits: ConnectionLimits {
            max_connections: http.max_connections,
            header_timeout: http.header_timeout,
        },
        request_timeout: http.request_timeout,
        largest_body,
        web,
    })
}

/// Serves until the channel is stopped; requests in flight finish.
pub async fn run(bound: Bound, cx: ChannelContext) {
    let hosts = Arc::new(bound.hosts);
    #[cfg(feature = "web")]
    let web = bound.web.map(|zone| super::web::Web {
        owner: bound.owner.clone(),
        hosts: hosts.clone(),
        zone,
        shutdown: cx.shutdown().clone(),
    });
    bound.owner.web.set_served(false);
    let api = super::api::Api {
        owner: bound.owner,
        shutdown: cx.shutdown().clone(),
        hosts,
    };
    let state = AppState {
        routes: Arc::new(bound.routes),
        cx: cx.clone(),
        senders: Arc::new(bound.senders),
    };
    let app = Router::new()
        .route("/hooks/{name}", post(deliver))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(state)
        .merge(super::api::routes(api, bound.metrics_public));
    #[cfg(feature = "web")]
    let app = app.merge(web.map(super::web::routes).unwrap_or_default());
    let app = app.layer(DefaultBodyLimit::max(bound.largest_body)).layer(
        axum::middleware::from_fn_with_state(bound.request_timeout, within_deadline),
    );
    let address = bound.address;
    cx.set_health(ChannelHealth::ready(format!("listening on {address}")));
    info!(%address, "HTTP server listening");
    serve(bound.listener, app, bound.limits, cx.shutdown().clone()).await;
}

/// Limits on connections (`http.max_connections`, `http.header_timeout_secs`).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: std::time::Duration,
}

/// Serves `app` on `listener` until `shutdown`, with hyper's HTTP/1 directly (not
/// `axum::serve`) for two limits it does not set: at most `max_connections` at once (more
/// wait in the kernel's queue until one ends) and each request head read within
/// `header_timeout` (a client that trickles its headers — slowloris — is cut off and frees
/// its place). On shutdown no connection is accepted and in-flight requests finish.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let places = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let place = tokio::select! {
            () = shutdown.cancelled() => break,
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, mostly: wait instead of spinning.
                    warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _place = place;
            let _ = connection.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Bounds one request (reading its body included, `[http] request_timeout_secs`): a client
/// that trickles its body gets 408. The event stream is exempt: it is meant to stay open.
async fn within_deadline(
    State(deadline): State<std::time::Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.uri().path() == "/v1/stream" {
        return next.run(request).await;
    }
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::REQUEST_TIMEOUT.into_response(),
    }
}

async fn ready(State(state): State<AppState>) -> Response {
    let down: Vec<String> = state
        .cx
        .status()
        .channels_down()
        .into_iter()
        .map(|(name, state)| format!("{name}: {state}"))
        .collect();
    if down.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, down.join("\n") + "\n").into_response()
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

async fn deliver(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(route) = state.routes.get(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if body.len() > route.config.max_body_bytes {
        warn!(route = %name, bytes = body.len(), "webhook body over the route's limit");
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    }
    if let Err(retry_after) = route.admit() {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, retry_after.to_string())],
        )
            .into_response();
    }
    let lookup = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let now = chrono::Utc::now().timestamp();
    let delivery = match verify(
        route.auth,
        &route.secret,
        lookup,
        &body,
        now,
        route.config.tolerance_secs,
    ) {
        Ok(delivery) => delivery,
        Err(refusal) => {
            warn!(route = %name, reason = %refusal, "webhook delivery refused");
            return StatusCode::UNAUTHORIZED.into_response();
        }
    };
    // The sender policy: a route marked trusted is; otherwise its identity is looked up.
    let identity = format!("webhook:{name}");
    let trust = if route.config.trusted {
        Trust::Trusted
    } else {
        match state.senders.decide(&identity) {
            SenderDecision::Accept(trust) => trust,
            SenderDecision::Reject => {
                let event = delivery_event(route, &headers, &body, delivery, Trust::Untrusted);
                let reason =
                    format!("{identity} is not a known sender (senders.unknown = \"reject\")");
                return match state.cx.reject(event, reason.clone()).await {
                    Ok(recorded) => json(
                        StatusCode::FORBIDDEN,
                        serde_json::json!({"event_id": recorded.id, "rejected": reason}),
                    ),
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                };
            }
        }
    };
    let event = delivery_event(route, &headers, &body, delivery, trust);
    match state.cx.submit(event).await {
        Ok(submitted) => match submitted.duplicate_of {
            Some(original) => json(
                StatusCode::OK,
                serde_json::json!({"event_id": original, "duplicate": true}),
            ),
            None => json(
                StatusCode::ACCEPTED,
                serde_json::json!({"event_id": submitted.id}),
            ),
        },
        Err(e) => {
            // Not stored: the sender should deliver again later (a full disk, a storage
            // fault). The reason is in the body.
            warn!(route = %name, error = %e, "cannot store a webhook delivery");
            let mut response = json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": e.to_string()}),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
            response
        }
    }
}

/// Longest raw body kept in the text the brain reads (the full body is in the payload).
const TEXT_BODY: usize = 16 * 1024;

fn delivery_event(
    route: &Route,
    headers: &HeaderMap,
    body: &[u8],
    delivery: Option<String>,
    trust: Trust,
) -> Event {
    let body = DeliveryBody::decode(headers, body);
    let mut text = render(&route.config.text, headers, body.json.as_ref());
    text.push_str("\n\n");
    text.extend(body.text.chars().take(TEXT_BODY));
    let name = &route.config.name;
    let mut event = Event::new(
        Source::Webhook,
        format!("webhook:{name}"),
        Sender {
            identity: format!("webhook:{name}"),
            authenticated_by: match route.auth {
                Auth::Bearer => "bearer".into(),
                other => format!("{}-hmac-sha256", other.as_str()),
            },
        },
        trust,
        Payload::Webhook {
            route: name.clone(),
            text,
            body: body.text,
        },
    );
    // The route's urgency is its channel's default: a `webhook:*` rule overrides it.
    event.channel_urgency = Some(route.config.urgency);
    event.dedupe_key = delivery.map(|id| format!("webhook:{name}:{id}"));
    event
}

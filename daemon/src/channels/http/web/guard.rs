//! What stands between a browser and the owner's page, each a check of its own:
//!
//! - `Host` must name this server (the API's rule, [`super::super::api::AllowedHosts`]): a
//!   page on another name that resolves to this address (DNS rebinding) gets 421.
//! - Every page needs a live session cookie (`steward_session`, `HttpOnly`,
//!   `SameSite=Strict`), made by a one-time login link ([`crate::owner::web_sessions`]).
//! - Every state-changing request (a `POST`) needs the session *and* its CSRF token in the
//!   form field `csrf` *and* an `Origin` that is this very origin (with `Sec-Fetch-Site`, when
//!   the browser sends it, `same-origin`). Any one missing: 403, nothing done.
//! - Every answer carries a strict `Content-Security-Policy` (scripts and styles from this
//!   origin only, no inline script, no framing), `X-Frame-Options: DENY`,
//!   `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and
//!   `Cache-Control: no-store`.

use std::collections::HashMap;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::Web;
use crate::owner::web_sessions::WebSession;

/// The session cookie's name.
pub const COOKIE: &str = "steward_session";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Adds the security headers to every answer (see the module docs).
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Refuses a `Host` that is not this server (421), before anything else is looked at.
pub async fn named_host(State(web): State<Web>, request: Request, next: Next) -> Response {
    let host = host_of(request.headers());
    if web.hosts.admits(&host) {
        return next.run(request).await;
    }
    refused(
        StatusCode::MISDIRECTED_REQUEST,
        "This server is not called that. Add the name to http.hosts if it really is this server.",
    )
}

fn host_of(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A plain-text refusal; it changes nothing.
pub fn refused(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

/// The session the request's cookie names, if it is live: (its id, the session).
pub fn session(web: &Web, headers: &HeaderMap) -> Option<(String, WebSession)> {
    let id = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_owned())
        })?;
    match web.owner.web.check(&id, Utc::now()) {
        Ok(found) => found.map(|session| (id, session)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the web sessions");
            None
        }
    }
}

/// The fields of an `application/x-www-form-urlencoded` body.
pub fn form(body: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// Why a state-changing request was refused (403, nothing done).
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(&'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refused(StatusCode::FORBIDDEN, self.0)
    }
}

/// A state-changing request that passed: its session and its form.
#[derive(Debug)]
pub struct Checked {
    pub session_id: String,
    pub form: HashMap<String, String>,
}

/// Checks a state-changing request (see the module docs).
pub fn changing(web: &Web, headers: &HeaderMap, body: &[u8]) -> Result<Checked, Refusal> {
    let Some((session_id, session)) = session(web, headers) else {
        return Err(Refusal(
            "Not logged in: run `steward web login` and open the link it prints.",
        ));
    };
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let own = format!("http://{}", host_of(headers));
    if origin != Some(own.as_str()) {
        return Err(Refusal(
            "Refused: this request did not come from this page (its Origin is not this server).",
        ));
    }
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s != "same-origin") {
        return Err(Refusal("Refused: this request came from another site."));
    }
    let fields = form(body);
    let given = fields.get("csrf").map(String::as_str).unwrap_or_default();
    if !same(given.as_bytes(), session.csrf.as_bytes()) {
        return Err(Refusal(
            "Refused: the form's token is missing or not this session's. Reload the page and try again.",
        ));
    }
    Ok(Checked {
        session_id,
        form: fields,
    })
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `Set-Cookie` of a new session (30 days; see the module docs).
pub fn cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        crate::owner::web_sessions::IDLE.num_seconds()
    )
}

/// The `Set-Cookie` that ends a session in the browser.
pub fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(!same(b"", b"a"));
    }

    #[test]
    fn forms_are_read_with_their_escapes() {
        let fields = form(b"csrf=a1&reason=not+now%21&args=%7B%22x%22%3A1%7D");
        assert_eq!(fields["csrf"], "a1");
        assert_eq!(fields["reason"], "not now!");
        assert_eq!(fields["args"], "{\"x\":1}");
    }
}

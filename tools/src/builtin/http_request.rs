//! `http_request`: one HTTP request. GET and HEAD are read-only; every other method is a
//! non-idempotent action (confirmation by default, ledger-recorded) and carries an
//! `Idempotency-Key` header equal to its ledger key, so a server that honours the header
//! never acts twice either.
//!
//! Server-side request forgery guard: the host is resolved first, and loopback, private,
//! link-local, CGNAT, unique-local and unspecified addresses are refused unless the host is
//! in `tools.http.allow_hosts`; the connection then goes to exactly the address that was
//! checked (no second lookup to rebind). Redirects are followed by hand (GET/HEAD only, at
//! most 5), each hop checked the same way.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use steward_events::{ToolOutcome, ToolStatus};

use crate::context::ExecutionContext;
use crate::contract::{Applies, Concurrency, SideEffect, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};

const MAX_BODY_BYTES: usize = 1024 * 1024;
const MAX_REDIRECTS: usize = 5;

pub(super) fn contract() -> ToolContract {
    // Per call: see `effect_for`.
    ToolContract::write(
"http_request",
"Make an HTTP request. GET/HEAD read; other methods act and need confirmation.",
crate::args::schema::<HttpArgs>(),
)
.concurrency(Concurrency::FromArgs)
.group("group:web")
.guidance("Use GET to read. POST/PUT/PATCH/DELETE act on the world and wait for the owner's confirmation.")
.hint("http api post get webhook url request")
.budget(100 * 1024)
.in_lane(true)
// Whatever a server answers is its words, whatever the method; a request to a host the
// owner has not trusted can carry what the step read (in the URL, even for a GET).
.returns_untrusted(Applies::Always)
.sends_out(Applies::PerCall)
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
enum Method {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpArgs {
    method: Method,
    #[schemars(length(min = 1))]
    url: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    body: Option<String>,
    #[schemars(range(min = 1, max = 120))]
    timeout_secs: Option<u64>,
}

pub(crate) struct HttpRequest {
    pub hosts: HttpHosts,
}

/// `[tools.http]`: which hosts the HTTP tools may reach, and which may hear from a tainted
/// step without asking.
#[derive(Clone, Debug, Default)]
pub struct HttpHosts {
    /// Reachable although they resolve to loopback or private addresses.
    pub allow: Vec<String>,
    /// The owner's own services: a request to one is not "sending out".
    pub trusted: Vec<String>,
}

/// Whether `hosts` lists `host`, or `host:port`.
fn listed(hosts: &[String], host: &str, port: u16) -> bool {
    hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(host) || *h == format!("{host}:{port}"))
}

/// Whether `url` names a host (or host:port) of `hosts`; a URL that does not parse names
/// none.
fn names_one_of(url: &str, hosts: &[String]) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    listed(hosts, host.trim_matches(['[', ']']), port)
}

/// Whether a request to `url` goes to someone the owner has not trusted.
pub(crate) fn sends_out(url: &str, hosts: &HttpHosts) -> bool {
    !names_one_of(url, &hosts.trusted)
}

/// A GET or HEAD; anything that does not parse counts as acting.
fn is_read(args: &Value) -> bool {
    crate::args::parse::<HttpArgs>(args)
        .is_ok_and(|args| matches!(args.method, Method::Get | Method::Head))
}

/// Addresses a request from the daemon must not reach unless allowed by name.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || (a == 100 && (64..128).contains(&b))
                || a == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

impl HttpRequest {
    /// Resolves `url`'s host and returns the address to connect to, or why not.
    async fn checked_address(&self, url: &reqwest::Url) -> Result<(String, SocketAddr), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "only http and https URLs are allowed, not {}",
                url.scheme()
            ));
        }
        let host = url
            .host_str()
            .ok_or("the URL has no host")?
            .trim_matches(['[', ']'])
            .to_owned();
        let port = url.port_or_known_default().ok_or("the URL has no port")?;
        let allowed = listed(&self.hosts.allow, &host, port);
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect();
        let first = *addresses
            .first()
            .ok_or_else(|| format!("{host} has no address"))?;
        if !allowed && let Some(internal) = addresses.iter().find(|a| is_internal(a.ip())) {
            return Err(format!(
                "refusing {host}: it resolves to the internal address {} (add it to tools.http.allow_hosts to allow)",
                internal.ip()
            ));
        }
        Ok((host, first))
    }
}

impl ToolHandler for HttpRequest {
    fn effect_for(&self, args: &Value) -> Option<(SideEffect, bool)> {
        Some(if is_read(args) {
            (SideEffect::ReadOnly, true)
        } else {
            (SideEffect::Write, false)
        })
    }

    fn concurrency_safe_for(&self, args: &Value) -> bool {
        is_read(args)
    }

    fn sends_out_for(&self, args: &Value) -> bool {
        crate::args::parse::<HttpArgs>(args)
            .ok()
            .is_none_or(|args| sends_out(&args.url, &self.hosts))
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.request(args, ctx).await {
                Ok(outcome) => outcome,
                Err(reason) => ToolOutcome::error(reason),
            }
        })
    }
}

impl HttpRequest {
    async fn request(&self, args: &Value, ctx: &ExecutionContext) -> Result<ToolOutcome, String> {
        let args: HttpArgs = crate::args::parse(args).map_err(|refused| refused.content_text())?;
        let method = match args.method {
            Method::Get => reqwest::Method::GET,
            Method::Head => reqwest::Method::HEAD,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Patch => reqwest::Method::PATCH,
            Method::Delete => reqwest::Method::DELETE,
        };
        let reads = matches!(args.method, Method::Get | Method::Head);
        let mut url = reqwest::Url::parse(&args.url).map_err(|e| format!("invalid URL: {e}"))?;
        let timeout = Duration::from_secs(args.timeout_secs.unwrap_or(30));
        for _ in 0..=MAX_REDIRECTS {
            let (host, address) = self.checked_address(&url).await?;
            let client = crate::https::client_builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(timeout)
                .resolve(&host, address)
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            let mut request = client.request(method.clone(), url.clone());
            for (name, value) in &args.headers {
                request = request.header(name, value);
            }
            if let Some(key) = &ctx.idempotency_key
                && !reads
            {
                request = request.header("Idempotency-Key", key);
            }
            if let Some(body) = &args.body {
                request = request.body(body.clone());
            }
            let response = request
                .send()
                .await
                .map_err(|e| format!("request failed: {e}"))?;
            let status = response.status();
            let redirect = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .filter(|_| status.is_redirection() && reads);
            if let Some(next) = redirect {
                url = url.join(next).map_err(|e| format!("bad redirect: {e}"))?;
                continue;
            }
            let mut headers = Map::new();
            for name in ["content-type", "content-length", "location", "retry-after"] {
                if let Some(value) = response.headers().get(name).and_then(|v| v.to_str().ok()) {
                    headers.insert(name.into(), Value::String(value.into()));
                }
            }
            let bytes = response
                .bytes()
                .await
                .map_err(|e| format!("reading the response failed: {e}"))?;
            let body =
                String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_BODY_BYTES)]).into_owned();
            let content = json!({"status": status.as_u16(), "url": url.as_str(), "headers": headers, "body": body});
            return Ok(ToolOutcome {
                status: if status.is_client_error() || status.is_server_error() {
                    ToolStatus::Error
                } else {
                    ToolStatus::Ok
                },
                content,
                hint: (status.as_u16() == 429 || status.is_server_error())
                    .then(|| "the server is overloaded or failing: retry later (a Retry-After header, if any, says when)".to_owned()),
                untrusted: false,
            });
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_table() {
        let table = [
            ("127.0.0.1", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("100.64.0.1", true),
            ("0.0.0.0", true),
            ("::1", true),
            ("fd00::1", true),
            ("fe80::1", true),
            ("::ffff:127.0.0.1", true),
            ("93.184.216.34", false),
            ("2606:4700::1111", false),
            ("100.128.0.1", false),
        ];
        for (ip, internal) in table {
            assert_eq!(is_internal(ip.parse().unwrap()), internal, "{ip}");
        }
    }
}

//! `[email]`: the mailbox the assistant reads (IMAP) and the server it sends through (SMTP).
//!
//! Decisions where the issue is silent:
//! - `imap_tls` defaults to `implicit` (port 993), `smtp_tls` to `starttls` (port 587); the
//!   port defaults follow the TLS mode (`none`: 143 / 25).
//! - `none` (no TLS) is refused unless the host is loopback: a password must never cross a
//!   network in the clear.
//! - The email sender policy is its own (`email.owners`, `email.trusted`,
//!   `email.unknown_senders`), judged by the same engine as `[senders]`; the identity is the
//!   authenticated `From` address.
//! - `require_authentication` defaults to true and can only be turned off explicitly.
//! - `dns_servers` takes IP addresses only (a resolver named by host would need a resolver
//!   to be found); a bare IP means port 53.

use std::path::PathBuf;
use std::time::Duration;

use crate::spanned::Spanned;
use serde::Deserialize;

use crate::SecretSource;
use crate::error::ConfigError;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEmail {
    pub imap_host: Spanned<String>,
    pub imap_port: Option<Spanned<u64>>,
    pub imap_tls: Option<Spanned<String>>,
    pub smtp_host: Option<Spanned<String>>,
    pub smtp_port: Option<Spanned<u64>>,
    pub smtp_tls: Option<Spanned<String>>,
    pub username: Spanned<String>,
    pub password_env: Option<String>,
    pub password_file: Option<String>,
    pub address: Spanned<String>,
    pub mailbox: Option<String>,
    pub sent_mailbox: Option<String>,
    pub ca_file: Option<String>,
    pub poll_secs: Option<Spanned<u64>>,
    pub max_message_bytes: Option<Spanned<u64>>,
    pub attachments_dir: Option<String>,
    #[serde(default)]
    pub owners: Vec<String>,
    #[serde(default)]
    pub trusted: Vec<String>,
    pub unknown_senders: Option<Spanned<String>>,
    #[serde(default)]
    pub trusted_authserv_ids: Vec<String>,
    /// DNS servers for DKIM key lookups (`"127.0.0.1:5353"`, or an address for port 53);
    /// default the system's resolver.
    #[serde(default)]
    pub dns_servers: Vec<Spanned<String>>,
    pub require_authentication: Option<bool>,
    pub confirm_by_email: Option<bool>,
}

/// How a connection is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailTls {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Implicit,
    /// Plain, upgraded with STARTTLS before logging in.
    StartTls,
    /// No TLS: loopback only.
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailServer {
    pub host: String,
    pub port: u16,
    pub tls: MailTls,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailConfig {
    pub imap: MailServer,
    pub smtp: MailServer,
    pub username: String,
    pub password: SecretSource,
    /// The assistant's own address: the `From` of what it sends.
    pub address: String,
    pub mailbox: String,
    pub sent_mailbox: String,
    /// An extra trust anchor (PEM) besides the system's.
    pub ca_file: Option<PathBuf>,
    /// How often to look for new mail when the server has no IDLE.
    pub poll: Duration,
    pub max_message_bytes: u64,
    /// Where attachments are saved; default `DATA_DIR/attachments`.
    pub attachments_dir: Option<PathBuf>,
    pub senders: steward_events::SenderPolicy,
    /// `Authentication-Results` headers from these hosts are believed.
    pub trusted_authserv_ids: Vec<String>,
    /// Where DKIM keys are looked up; empty means the system's resolver.
    pub dns_servers: Vec<std::net::SocketAddr>,
    pub require_authentication: bool,
    /// Requests for confirmation raised by an email turn are mailed to the owner.
    pub confirm_by_email: bool,
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `IP:PORT`, `[IPv6]:PORT`, or a bare IP for port 53.
fn dns_server(text: &str) -> Option<std::net::SocketAddr> {
    let text = text.trim();
    text.parse().ok().or_else(|| {
        text.parse::<std::net::IpAddr>()
            .ok()
            .map(|ip| std::net::SocketAddr::new(ip, 53))
    })
}

/// One server's keys (`email.{which}_host`, `_port`, `_tls`) and its defaults.
struct ServerKeys<'a> {
    which: &'a str,
    host: &'a Spanned<String>,
    port: &'a Option<Spanned<u64>>,
    tls: &'a Option<Spanned<String>>,
    default_tls: MailTls,
    /// The default port for implicit TLS, STARTTLS and none.
    ports: [u16; 3],
}

/// An IMAP or SMTP server, checked: plaintext only to a loopback host.
fn mail_server(
    keys: ServerKeys<'_>,
    at: crate::spanned::LineOf<'_>,
    in_range: crate::spanned::InRange<'_>,
) -> Result<MailServer, ConfigError> {
    let ServerKeys {
        which,
        host,
        port,
        tls,
        default_tls,
        ports,
    } = keys;
    let tls_mode = match tls.as_ref().map(|t| t.get_ref().as_str()) {
        None => default_tls,
        Some("implicit") => MailTls::Implicit,
        Some("starttls") => MailTls::StartTls,
        Some("none") => MailTls::None,
        Some(other) => {
            return Err(ConfigError::invalid(
                format!("email.{which}_tls"),
                tls.as_ref().and_then(|t| at(t.span())),
                format!("{other:?}: expected \"implicit\", \"starttls\" or \"none\""),
            ));
        }
    };
    if host.get_ref().trim().is_empty() {
        return Err(ConfigError::invalid(
            format!("email.{which}_host"),
            at(host.span()),
            "must not be empty",
        ));
    }
    if tls_mode == MailTls::None && !is_loopback(host.get_ref()) {
        return Err(ConfigError::invalid(
            format!("email.{which}_tls"),
            tls.as_ref().and_then(|t| at(t.span())),
            format!(
                "\"none\" is allowed only for a loopback host, not {:?}: the password would cross the network in the clear",
                host.get_ref()
            ),
        ));
    }
    let port = match port {
        Some(p) => in_range(&format!("email.{which}_port"), p, 1, 65_535)? as u16,
        None => match tls_mode {
            MailTls::Implicit => ports[0],
            MailTls::StartTls => ports[1],
            MailTls::None => ports[2],
        },
    };
    Ok(MailServer {
        host: host.get_ref().clone(),
        port,
        tls: tls_mode,
    })
}

/// `email.dns_servers`, each IP:PORT or an IP (port 53).
fn dns_servers(
    servers: &[Spanned<String>],
    at: crate::spanned::LineOf<'_>,
) -> Result<Vec<std::net::SocketAddr>, ConfigError> {
    servers
        .iter()
        .enumerate()
        .map(|(index, server)| {
            dns_server(server.get_ref()).ok_or_else(|| {
                ConfigError::invalid(
                    format!("email.dns_servers[{index}]"),
                    at(server.span()),
                    format!(
                        "{:?} is not a DNS server address: expected IP:PORT (\"127.0.0.1:5353\") or an IP (port 53)",
                        server.get_ref()
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
}

pub(crate) fn resolve(
    raw: RawEmail,
    at: crate::spanned::LineOf<'_>,
    in_range: crate::spanned::InRange<'_>,
) -> Result<EmailConfig, ConfigError> {
    let imap = mail_server(
        ServerKeys {
            which: "imap",
            host: &raw.imap_host,
            port: &raw.imap_port,
            tls: &raw.imap_tls,
            default_tls: MailTls::Implicit,
            ports: [993, 143, 143],
        },
        at,
        in_range,
    )?;
    let smtp_host = raw
        .smtp_host
        .clone()
        .unwrap_or_else(|| raw.imap_host.clone());
    let smtp = mail_server(
        ServerKeys {
            which: "smtp",
            host: &smtp_host,
            port: &raw.smtp_port,
            tls: &raw.smtp_tls,
            default_tls: MailTls::StartTls,
            ports: [465, 587, 25],
        },
        at,
        in_range,
    )?;
    let password = match (raw.password_env, raw.password_file) {
        (Some(var), None) => SecretSource::Env(var),
        (None, Some(file)) => SecretSource::File(PathBuf::from(file)),
        _ => {
            return Err(ConfigError::invalid(
                "email.password_env",
                at(raw.username.span()),
                "set exactly one of password_env and password_file",
            ));
        }
    };
    let address = raw.address.get_ref().trim().to_owned();
    if !address.contains('@') || address.contains(char::is_whitespace) {
        return Err(ConfigError::invalid(
            "email.address",
            at(raw.address.span()),
            format!("{address:?} is not an email address"),
        ));
    }
    let unknown = match raw.unknown_senders.as_ref().map(|u| u.get_ref().as_str()) {
        None | Some("untrusted") => steward_events::Unknown::Untrusted,
        Some("reject") => steward_events::Unknown::Reject,
        Some(other) => {
            return Err(ConfigError::invalid(
                "email.unknown_senders",
                raw.unknown_senders.as_ref().and_then(|u| at(u.span())),
                format!("{other:?}: expected \"untrusted\" or \"reject\""),
            ));
        }
    };
    let dns_servers = dns_servers(&raw.dns_servers, at)?;
    Ok(EmailConfig {
        imap,
        smtp,
        username: raw.username.into_inner(),
        password,
        address,
        mailbox: raw.mailbox.unwrap_or_else(|| "INBOX".into()),
        sent_mailbox: raw.sent_mailbox.unwrap_or_else(|| "Sent".into()),
        ca_file: raw.ca_file.map(PathBuf::from),
        poll: Duration::from_secs(match &raw.poll_secs {
            Some(secs) => in_range("email.poll_secs", secs, 1, 86_400)?,
            None => 60,
        }),
        max_message_bytes: match &raw.max_message_bytes {
            Some(bytes) => in_range("email.max_message_bytes", bytes, 1024, 1 << 30)?,
            None => 10 * 1024 * 1024,
        },
        attachments_dir: raw.attachments_dir.map(PathBuf::from),
        senders: steward_events::SenderPolicy {
            owner: raw.owners,
            trusted: raw.trusted,
            unknown,
        },
        trusted_authserv_ids: raw.trusted_authserv_ids,
        dns_servers,
        require_authentication: raw.require_authentication.unwrap_or(true),
        confirm_by_email: raw.confirm_by_email.unwrap_or(true),
    })
}

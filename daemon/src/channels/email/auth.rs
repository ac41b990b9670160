//! Whether a message really comes from its `From` domain, before the sender policy looks at
//! the address. A `From` header costs nothing to forge, so it counts only when:
//!
//! 1. an `Authentication-Results` header whose authserv-id is in
//!    `email.trusted_authserv_ids` (the receiving MTA, which saw the SMTP session) reports
//!    `dmarc=pass` for the From domain, or `dkim=pass` / `spf=pass` for a domain aligned with
//!    it; or
//! 2. a DKIM signature verifies here (mail-auth, DNS for the key) and its `d=` domain is
//!    aligned with the From domain — the DKIM half of DMARC, which is what a mailbox reader
//!    can check (SPF needs the connecting IP, which only the receiving MTA knows: it comes
//!    in through 1).
//!
//! Alignment is relaxed: the same domain, or one a subdomain of the other (no public-suffix
//! list: `example.com` and `mail.example.com` align; `a.co.uk` and `b.co.uk` do not).
//! Headers from untrusted authserv-ids are ignored — anyone can write one.
//!
//! DNS: the system resolver, or the servers of `email.dns_servers` when set (a local DNS
//! server that publishes test keys, a resolver the owner prefers). A signature with a
//! body-length limit (`l=`) is not checked at all — anyone could append text after the
//! signed part — and the reason says so, as it says for a malformed signature.

use std::time::Duration;

use std::net::SocketAddr;

use mail_auth::hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use mail_auth::{AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters};
use tokio::sync::OnceCell;
use tracing::warn;

/// How long DKIM's DNS lookups may take for one message.
const DKIM_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `a` and `b` are aligned (relaxed, see the module docs).
pub fn aligned(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_end_matches('.'), b.trim_end_matches('.'));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    a == b || a.ends_with(&format!(".{b}")) || b.ends_with(&format!(".{a}"))
}

/// Removes RFC 5322 comments (`(…)`), which A-R headers use freely.
fn strip_comments(value: &str) -> String {
    let mut depth = 0usize;
    value
        .chars()
        .filter(|&c| match c {
            '(' => {
                depth += 1;
                false
            }
            ')' => {
                depth = depth.saturating_sub(1);
                false
            }
            _ => depth == 0,
        })
        .collect()
}

/// Reads one `Authentication-Results` value: `Some(how)` when it comes from a trusted
/// authserv-id and reports a pass aligned with `from_domain`.
pub fn passes_in_results(value: &str, trusted_ids: &[String], from_domain: &str) -> Option<String> {
    let value = strip_comments(value);
    let mut parts = value.split(';');
    let authserv_id = parts
        .next()?
        .split_whitespace()
        .next()?
        .to_ascii_lowercase();
    if !trusted_ids
        .iter()
        .any(|id| id.eq_ignore_ascii_case(&authserv_id))
    {
        return None;
    }
    for result in parts {
        let mut words = result.split_whitespace();
        let Some((method, outcome)) = words.next().and_then(|w| w.split_once('=')) else {
            continue;
        };
        if !outcome.eq_ignore_ascii_case("pass") {
            continue;
        }
        let method = method.to_ascii_lowercase();
        let domain_of = |property: &str| {
            words.clone().find_map(|w| {
                let (key, value) = w.split_once('=')?;
                key.eq_ignore_ascii_case(property).then(|| {
                    let value = value.trim_matches('"');
                    value.rsplit_once('@').map_or(value, |(_, d)| d).to_owned()
                })
            })
        };
        let domain = match method.as_str() {
            "dmarc" => domain_of("header.from"),
            "dkim" => domain_of("header.d").or_else(|| domain_of("header.i")),
            "spf" => domain_of("smtp.mailfrom").or_else(|| domain_of("smtp.helo")),
            _ => None,
        };
        if let Some(domain) = domain
            && aligned(&domain, from_domain)
        {
            return Some(format!("{method} ({authserv_id})"));
        }
    }
    None
}

/// Sender authentication for one mailbox: the trusted authserv-ids and a DNS-backed DKIM
/// verifier, created on first need (a machine without DNS still reads A-R headers).
#[derive(Debug)]
pub struct SenderAuth {
    trusted_ids: Vec<String>,
    /// Empty: the system's resolver.
    dns_servers: Vec<SocketAddr>,
    dkim: OnceCell<Option<Verifier>>,
}

struct Verifier(MessageAuthenticator);

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MessageAuthenticator")
    }
}

impl SenderAuth {
    pub fn new(trusted_ids: Vec<String>, dns_servers: Vec<SocketAddr>) -> Self {
        Self {
            trusted_ids,
            dns_servers,
            dkim: OnceCell::new(),
        }
    }

    /// The DKIM verifier over the configured DNS servers, or the system's.
    fn authenticator(&self) -> Result<MessageAuthenticator, String> {
        if self.dns_servers.is_empty() {
            return MessageAuthenticator::new_system_conf().map_err(|e| e.to_string());
        }
        let servers = self
            .dns_servers
            .iter()
            .map(|address| {
                let mut server = NameServerConfig::udp_and_tcp(address.ip());
                for connection in &mut server.connections {
                    connection.port = address.port();
                }
                server
            })
            .collect();
        MessageAuthenticator::new(
            ResolverConfig::from_name_servers(servers),
            ResolverOpts::default(),
        )
        .map_err(|e| e.to_string())
    }

    /// How `raw` was authenticated for `from_domain`, or why it was not.
    pub async fn check(&self, raw: &[u8], from_domain: &str) -> Result<String, String> {
        let Some(message) = AuthenticatedMessage::parse(raw) else {
            return Err("the header section could not be read for authentication".into());
        };
        for (name, value) in &message.headers {
            if name.eq_ignore_ascii_case(b"Authentication-Results")
                && let Some(how) = passes_in_results(
                    &String::from_utf8_lossy(value),
                    &self.trusted_ids,
                    from_domain,
                )
            {
                return Ok(how);
            }
        }
        if message.dkim_headers.is_empty() {
            return Err(match unchecked_signatures(&message) {
                Some(why) => format!(
                    "no DKIM signature could be checked ({why}) and no trusted Authentication-Results pass for {from_domain}"
                ),
                None => format!(
                    "no DKIM signature and no trusted Authentication-Results pass for {from_domain}"
                ),
            });
        }
        let verifier = self
            .dkim
            .get_or_init(|| async {
                self.authenticator()
                    .map(Verifier)
                    .inspect_err(
                        |e| warn!(error = %e, "no DNS resolver: DKIM signatures cannot be checked"),
                    )
                    .ok()
            })
            .await;
        let Some(Verifier(authenticator)) = verifier else {
            return Err("DKIM cannot be checked: no DNS resolver".into());
        };
        dkim_aligned(authenticator, Parameters::new(&message), from_domain).await
    }
}

/// Why the DKIM signatures that were set aside (a body-length limit, a malformed tag) were
/// not checked, or `None` when there were none.
fn unchecked_signatures(message: &AuthenticatedMessage<'_>) -> Option<String> {
    let reasons: Vec<String> = message
        .errors
        .iter()
        .filter_map(|error| match &error.header {
            mail_auth::Error::Dkim(mail_auth::dkim::DkimError::SignatureLength) => Some(
                "a signature with a body-length limit (l=) was discarded: text could be appended after the signed part"
                    .to_owned(),
            ),
            mail_auth::Error::Dkim(other) => Some(format!("a malformed signature: {other}")),
            _ => None,
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Verifies the DKIM signatures of a message (with whatever DNS caches `params` carry) and
/// reports an aligned pass.
async fn dkim_aligned<'x, TXT, MXX, IPV4, IPV6, PTR>(
    authenticator: &MessageAuthenticator,
    params: Parameters<'x, &'x AuthenticatedMessage<'x>, TXT, MXX, IPV4, IPV6, PTR>,
    from_domain: &str,
) -> Result<String, String>
where
    TXT: mail_auth::ResolverCache<Box<str>, mail_auth::Txt> + 'x,
    MXX: mail_auth::ResolverCache<Box<str>, mail_auth::RecordSet<mail_auth::MX>> + 'x,
    IPV4: mail_auth::ResolverCache<Box<str>, mail_auth::RecordSet<std::net::Ipv4Addr>> + 'x,
    IPV6: mail_auth::ResolverCache<Box<str>, mail_auth::RecordSet<std::net::Ipv6Addr>> + 'x,
    PTR: mail_auth::ResolverCache<std::net::IpAddr, mail_auth::RecordSet<Box<str>>> + 'x,
{
    let outputs = tokio::time::timeout(DKIM_TIMEOUT, authenticator.verify_dkim(params))
        .await
        .map_err(|_| format!("DKIM verification timed out after {DKIM_TIMEOUT:?}"))?;
    let mut seen = Vec::new();
    for output in &outputs {
        let domain = output.signature().map_or("", |s| s.d.as_str());
        if *output.result() == DkimResult::Pass && aligned(domain, from_domain) {
            return Ok(format!("dkim (d={domain})"));
        }
        seen.push(format!("d={domain}: {:?}", output.result()));
    }
    Err(format!(
        "no DKIM signature aligned with {from_domain} passed ({})",
        seen.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_relaxed_but_not_loose() {
        let table = [
            ("example.com", "example.com", true),
            ("Example.COM", "example.com.", true),
            ("mail.example.com", "example.com", true),
            ("example.com", "eu.example.com", true),
            ("example.com", "example.org", false),
            ("badexample.com", "example.com", false),
            ("", "example.com", false),
        ];
        for (a, b, expected) in table {
            assert_eq!(aligned(a, b), expected, "{a} vs {b}");
        }
    }

    #[test]
    fn only_trusted_authserv_ids_count_and_only_for_the_from_domain() {
        let trusted = vec!["mx.example.net".to_owned()];
        let table = [
            (
                "mx.example.net; dkim=pass header.d=example.com header.s=s1",
                Some("dkim (mx.example.net)"),
            ),
            (
                "mx.example.net 1; spf=pass smtp.mailfrom=bob@example.com",
                Some("spf (mx.example.net)"),
            ),
            (
                "MX.example.net; dmarc=pass (p=reject) header.from=example.com",
                Some("dmarc (mx.example.net)"),
            ),
            (
                "mx.example.net; dkim=pass header.i=@mail.example.com",
                Some("dkim (mx.example.net)"),
            ),
            (
                "mx.example.net; dkim=fail header.d=example.com; spf=softfail smtp.mailfrom=example.com",
                None,
            ),
            ("mx.example.net; dkim=pass header.d=attacker.org", None),
            ("evil.example.org; dkim=pass header.d=example.com", None),
            ("mx.example.net; none", None),
            (
                "(comment) mx.example.net; dmarc=pass header.from=example.com",
                Some("dmarc (mx.example.net)"),
            ),
            ("", None),
        ];
        for (value, expected) in table {
            assert_eq!(
                passes_in_results(value, &trusted, "example.com").as_deref(),
                expected,
                "{value}"
            );
        }
    }

    /// A TXT cache standing in for DNS: the test publishes its DKIM key here.
    #[derive(Default)]
    struct TxtCache(std::sync::Mutex<std::collections::HashMap<Box<str>, mail_auth::Txt>>);

    #[allow(clippy::disallowed_types)] // mail-auth's cache trait takes std's Instant
    impl mail_auth::ResolverCache<Box<str>, mail_auth::Txt> for TxtCache {
        fn get<Q>(&self, name: &Q) -> Option<mail_auth::Txt>
        where
            Box<str>: std::borrow::Borrow<Q>,
            Q: std::hash::Hash + Eq + ?Sized,
        {
            self.0.lock().ok()?.get(name).cloned()
        }

        fn remove<Q>(&self, name: &Q) -> Option<mail_auth::Txt>
        where
            Box<str>: std::borrow::Borrow<Q>,
            Q: std::hash::Hash + Eq + ?Sized,
        {
            self.0.lock().ok()?.remove(name)
        }

        fn insert(&self, key: Box<str>, value: mail_auth::Txt, _: std::time::Instant) {
            if let Ok(mut map) = self.0.lock() {
                map.insert(key, value);
            }
        }
    }

    fn base64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[tokio::test]
    #[allow(clippy::disallowed_types)] // mail-auth's cache trait takes std's Instant
    async fn an_aligned_dkim_signature_authenticates_and_a_tampered_or_foreign_one_does_not() {
        use mail_auth::common::crypto::Ed25519Key;
        use mail_auth::common::headers::HeaderWriter;
        use mail_auth::common::parse::TxtRecordParser;
        use mail_auth::common::verify::DomainKey;
        use mail_auth::dkim::DkimSigner;

        let pkcs8 = Ed25519Key::generate_pkcs8().unwrap();
        let key = Ed25519Key::from_pkcs8_der(&pkcs8).unwrap();
        let record = format!("v=DKIM1; k=ed25519; p={}", base64(&key.public_key()));
        let cache = TxtCache::default();
        mail_auth::ResolverCache::insert(
            &cache,
            "s1._domainkey.mail.example.com.".into(),
            mail_auth::Txt::from(DomainKey::parse(record.as_bytes()).unwrap()),
            std::time::Instant::now(),
        );
        let message = "From: Owner <owner@example.com>\r\nTo: steward@example.net\r\nSubject: plan\r\n\r\nThe plan stands.\r\n";
        let signature = DkimSigner::from_key(key)
            .domain("mail.example.com")
            .selector("s1")
            .headers(["From", "To", "Subject"])
            .sign(message.as_bytes())
            .unwrap();
        let signed = format!("{}{message}", signature.to_header());
        // The resolver is never asked: every key is in the cache.
        let authenticator = MessageAuthenticator::new_cloudflare().unwrap();
        let verify = |raw: String, from_domain: &'static str| {
            let authenticator = authenticator.clone();
            let cache = &cache;
            async move {
                let parsed = AuthenticatedMessage::parse(raw.as_bytes()).unwrap();
                dkim_aligned(
                    &authenticator,
                    Parameters::new(&parsed).with_txt_cache(cache),
                    from_domain,
                )
                .await
            }
        };
        assert_eq!(
            verify(signed.clone(), "example.com").await.as_deref(),
            Ok("dkim (d=mail.example.com)")
        );
        let foreign = verify(signed.clone(), "example.org").await;
        assert!(
            foreign.is_err(),
            "a valid signature of another domain: {foreign:?}"
        );
        let tampered = verify(signed.replace("stands", "changed"), "example.com").await;
        assert!(tampered.is_err(), "{tampered:?}");
    }

    #[tokio::test]
    async fn a_signature_with_a_body_length_limit_is_discarded_and_the_reason_says_so() {
        use mail_auth::common::crypto::Ed25519Key;
        use mail_auth::common::headers::HeaderWriter;
        use mail_auth::dkim::DkimSigner;

        let key = Ed25519Key::from_pkcs8_der(&Ed25519Key::generate_pkcs8().unwrap()).unwrap();
        let message = "From: owner@example.com\r\nSubject: plan\r\n\r\nThe plan stands.\r\n";
        let signature = DkimSigner::from_key(key)
            .domain("example.com")
            .selector("s1")
            .headers(["From", "Subject"])
            .body_length(true)
            .sign(message.as_bytes())
            .unwrap();
        let signed = format!("{}{message}appended by anyone\r\n", signature.to_header());
        assert!(signed.contains("l="), "{signed}");
        let auth = SenderAuth::new(Vec::new(), vec!["127.0.0.1:9".parse().unwrap()]);
        let reason = auth
            .check(signed.as_bytes(), "example.com")
            .await
            .unwrap_err();
        assert!(reason.contains("body-length limit (l=)"), "{reason}");
        assert!(!reason.contains("no DKIM signature and"), "{reason}");
    }

    #[tokio::test]
    async fn a_forged_from_without_a_trusted_result_is_not_authenticated() {
        let auth = SenderAuth::new(vec!["mx.example.net".into()], Vec::new());
        let forged = b"Authentication-Results: mx.attacker.org; dmarc=pass header.from=example.com\r\nFrom: owner@example.com\r\nSubject: wire money\r\n\r\nnow\r\n";
        let verdict = auth.check(forged, "example.com").await;
        assert!(verdict.is_err(), "{verdict:?}");
        let vouched = b"Authentication-Results: mx.example.net; dmarc=pass header.from=example.com\r\nFrom: owner@example.com\r\n\r\nhi\r\n";
        assert_eq!(
            auth.check(vouched, "example.com").await.as_deref(),
            Ok("dmarc (mx.example.net)")
        );
    }
}

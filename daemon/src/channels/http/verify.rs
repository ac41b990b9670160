//! Webhook authentication, as pure functions of (headers, body, secret, now): GitHub's
//! `X-Hub-Signature-256`, Stripe's `Stripe-Signature` (`t=…,v1=…` over `t.body`, several
//! `v1` for rotated secrets, a timestamp tolerance), the Standard Webhooks scheme
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`, `whsec_` secrets)
//! and bearer tokens. Every comparison of a secret-derived value is constant-time.
//!
//! Each scheme also names the delivery's id, which the inbox uses as its dedupe key so a
//! redelivery is processed once: GitHub's `X-GitHub-Delivery`, Stripe's event `id`, the
//! `webhook-id`, or a bearer sender's `Idempotency-Key`.

use crate::owner::token::constant_time_eq;
use sha2::{Digest, Sha256};
use steward_events::to_hex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    Github,
    Stripe,
    Standard,
    Bearer,
}

impl Auth {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "github" => Some(Auth::Github),
            "stripe" => Some(Auth::Stripe),
            "standard" => Some(Auth::Standard),
            "bearer" => Some(Auth::Bearer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Auth::Github => "github",
            Auth::Stripe => "stripe",
            Auth::Standard => "standard",
            Auth::Bearer => "bearer",
        }
    }
}

/// Why a delivery was refused (logged; the sender only sees 401).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("the {0} header is malformed")]
    Malformed(&'static str),
    #[error("the signature does not match")]
    Mismatch,
    #[error("the timestamp is {0} s away from now, beyond the tolerance")]
    Stale(i64),
    #[error("the secret is not usable: {0}")]
    BadSecret(&'static str),
}

/// Verifies one delivery; `Ok(Some(id))` carries the delivery id when the scheme has one.
pub fn verify(
    auth: Auth,
    secret: &str,
    header: impl Fn(&str) -> Option<String>,
    body: &[u8],
    now: i64,
    tolerance_secs: i64,
) -> Result<Option<String>, Refusal> {
    match auth {
        Auth::Github => {
            let signature =
                header("x-hub-signature-256").ok_or(Refusal::Missing("X-Hub-Signature-256"))?;
            let hex = signature
                .strip_prefix("sha256=")
                .ok_or(Refusal::Malformed("X-Hub-Signature-256"))?;
            let expected = to_hex(&hmac_sha256(secret.as_bytes(), body));
            if !constant_time_eq(expected.as_bytes(), hex.trim().as_bytes()) {
                return Err(Refusal::Mismatch);
            }
            Ok(header("x-github-delivery"))
        }
        Auth::Stripe => {
            let signature =
                header("stripe-signature").ok_or(Refusal::Missing("Stripe-Signature"))?;
            let mut timestamp = None;
            let mut candidates = Vec::new();
            for part in signature.split(',') {
                match part.trim().split_once('=') {
                    Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
                    Some(("v1", v)) => candidates.push(v.to_owned()),
                    _ => {}
                }
            }
            let timestamp = timestamp.ok_or(Refusal::Malformed("Stripe-Signature"))?;
            let mut signed = format!("{timestamp}.").into_bytes();
            signed.extend_from_slice(body);
            let expected = to_hex(&hmac_sha256(secret.as_bytes(), &signed));
            // Every candidate is compared, so timing does not tell which one matched.
            let matched = candidates.iter().fold(false, |any, c| {
                constant_time_eq(expected.as_bytes(), c.as_bytes()) | any
            });
            if !matched {
                return Err(Refusal::Mismatch);
            }
            check_age(timestamp, now, tolerance_secs)?;
            Ok(serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("id")?.as_str().map(str::to_owned)))
        }
        Auth::Standard => {
            let id = header("webhook-id").ok_or(Refusal::Missing("webhook-id"))?;
            let timestamp: i64 = header("webhook-timestamp")
                .ok_or(Refusal::Missing("webhook-timestamp"))?
                .trim()
                .parse()
                .map_err(|_| Refusal::Malformed("webhook-timestamp"))?;
            let signatures =
                header("webhook-signature").ok_or(Refusal::Missing("webhook-signature"))?;
            let key = base64_decode(secret.strip_prefix("whsec_").unwrap_or(secret))
                .ok_or(Refusal::BadSecret("a whsec_ secret is base64"))?;
            let mut signed = format!("{id}.{timestamp}.").into_bytes();
            signed.extend_from_slice(body);
            let expected = base64_encode(&hmac_sha256(&key, &signed));
            let matched = signatures
                .split_whitespace()
                .filter_map(|s| s.strip_prefix("v1,"))
                .fold(false, |any, s| {
                    constant_time_eq(expected.as_bytes(), s.as_bytes()) | any
                });
            if !matched {
                return Err(Refusal::Mismatch);
            }
            check_age(timestamp, now, tolerance_secs)?;
            Ok(Some(id))
        }
        Auth::Bearer => {
            let given = header("authorization").ok_or(Refusal::Missing("Authorization"))?;
            let token = given
                .strip_prefix("Bearer ")
                .ok_or(Refusal::Malformed("Authorization"))?;
            if !constant_time_eq(secret.as_bytes(), token.trim().as_bytes()) {
                return Err(Refusal::Mismatch);
            }
            Ok(header("idempotency-key"))
        }
    }
}

fn check_age(timestamp: i64, now: i64, tolerance_secs: i64) -> Result<(), Refusal> {
    let age = now - timestamp;
    if age.abs() > tolerance_secs {
        return Err(Refusal::Stale(age));
    }
    Ok(())
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    let digest;
    let key = if key.len() > BLOCK {
        digest = Sha256::digest(key);
        digest.as_slice()
    } else {
        key
    };
    // `key` is at most BLOCK bytes here: zip stops at the shorter side.
    for (slot, byte) in block.iter_mut().zip(key) {
        *slot = *byte;
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                // Masked to six bits: always inside the 64-entry alphabet.
                #[allow(clippy::indexing_slicing)]
                out.push(BASE64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut bits = 0u32;
    let mut count = 0;
    for c in text.bytes() {
        let value = BASE64.iter().position(|b| *b == c)? as u32;
        bits = bits << 6 | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn github_example_from_its_documentation() {
        // docs.github.com, "Validating webhook deliveries": secret, payload and signature.
        let ok = headers(&[
            (
                "X-Hub-Signature-256",
                "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
            ),
            ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ]);
        let secret = "It's a Secret to Everybody";
        assert_eq!(
            verify(Auth::Github, secret, &ok, b"Hello, World!", 0, 300),
            Ok(Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".into()))
        );
        assert_eq!(
            verify(Auth::Github, secret, &ok, b"Hello, World?", 0, 300),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            verify(Auth::Github, secret, headers(&[]), b"x", 0, 300),
            Err(Refusal::Missing("X-Hub-Signature-256"))
        );
    }

    #[test]
    fn standard_webhooks_example_from_the_specification() {
        // standardwebhooks.com: the specification's example secret, id, timestamp, payload.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let signed = headers(&[
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                "v1,wrong v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ]);
        assert_eq!(
            verify(Auth::Standard, secret, &signed, body, 1_614_265_330, 300),
            Ok(Some("msg_p5jXN8AQM9LWM0D4loKWxJek".into()))
        );
        assert_eq!(
            verify(
                Auth::Standard,
                secret,
                &signed,
                body,
                1_614_265_330 + 301,
                300
            ),
            Err(Refusal::Stale(301))
        );
    }

    #[test]
    fn stripe_signatures_rotate_and_expire() {
        // A known answer computed independently (Python's hmac) for the documented scheme:
        // HMAC-SHA256(secret, "t.body"), hex.
        let secret = "whsec_test_secret";
        let body = br#"{"id":"evt_1","type":"charge.succeeded"}"#;
        let good = "c0475716eb2200f1fe97fcf35a3c05d1fd4f8ba9a07a596730c8d18bb87c0672";
        let header = |v: &str| headers(&[("Stripe-Signature", &format!("t=1700000000,{v}"))]);
        assert_eq!(
            verify(
                Auth::Stripe,
                secret,
                header(&format!("v1={good}")),
                body,
                1_700_000_100,
                300
            ),
            Ok(Some("evt_1".into()))
        );
        // Secret rotation: an old signature first, the current one second.
        assert!(
            verify(
                Auth::Stripe,
                secret,
                header(&format!("v1=00ff,v1={good}")),
                body,
                1_700_000_000,
                300
            )
            .is_ok()
        );
        assert_eq!(
            verify(
                Auth::Stripe,
                secret,
                header(&format!("v1={good}")),
                body,
                1_700_000_301,
                300
            ),
            Err(Refusal::Stale(301))
        );
        assert_eq!(
            verify(
                Auth::Stripe,
                secret,
                header("v1=deadbeef"),
                body,
                1_700_000_000,
                300
            ),
            Err(Refusal::Mismatch)
        );
    }

    #[test]
    fn bearer_tokens_and_encodings() {
        let ok = headers(&[
            ("Authorization", "Bearer s3cret"),
            ("Idempotency-Key", "k1"),
        ]);
        assert_eq!(
            verify(Auth::Bearer, "s3cret", &ok, b"", 0, 0),
            Ok(Some("k1".into()))
        );
        let bad = headers(&[("Authorization", "Bearer s3cre7")]);
        assert_eq!(
            verify(Auth::Bearer, "s3cret", &bad, b"", 0, 0),
            Err(Refusal::Mismatch)
        );
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            assert_eq!(base64_decode(&base64_encode(bytes)).unwrap(), bytes);
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert!(base64_decode("not base64!").is_none());
    }
}

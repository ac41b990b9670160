//! Webhook signatures and text templates: any headers, secret and body are accepted or
//! refused with a reason, never a panic. Input: auth byte, then secret, signature header,
//! timestamp header, id header, template and body separated by 0xFF.
#![no_main]
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use steward_daemon::channels::http::verify::{Auth, verify};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let auth = match which % 4 {
        0 => Auth::Github,
        1 => Auth::Stripe,
        2 => Auth::Standard,
        _ => Auth::Bearer,
    };
    let mut parts = rest.split(|b| *b == 0xFF);
    let mut next = || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let (secret, signature, timestamp, id, template) = (next(), next(), next(), next(), next());
    let body = rest.rsplit(|b| *b == 0xFF).next().unwrap_or_default();
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("x-hub-signature-256", &signature),
        ("stripe-signature", &signature),
        ("webhook-signature", &signature),
        ("authorization", &signature),
        ("webhook-timestamp", &timestamp),
        ("webhook-id", &id),
        ("x-github-delivery", &id),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let _ = verify(auth, &secret, header, body, 1_700_000_000, 300);
    let json = serde_json::from_slice::<serde_json::Value>(body).ok();
    let _ = steward_daemon::channels::http::template::render(&template, &headers, json.as_ref());
});

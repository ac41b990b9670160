//! A route's text template rendered over any delivery body — JSON, a GitHub form carrying
//! JSON, a form without one, bytes that are neither — never panics, and a form's JSON
//! reads the same as the JSON itself.
#![no_main]
use axum::http::{HeaderMap, HeaderValue, header};
use libfuzzer_sys::fuzz_target;
use steward_daemon::channels::http::template::{DeliveryBody, render};

fuzz_target!(|data: &[u8]| {
    // The first line is the template, the rest the body; the first byte picks the type.
    let text = String::from_utf8_lossy(data);
    let (template, body) = text.split_once('\n').unwrap_or((&text, ""));
    let mut headers = HeaderMap::new();
    headers.insert("x-github-event", HeaderValue::from_static("push"));
    let form = data.first().is_some_and(|b| b % 2 == 0);
    if form {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
    }
    let decoded = DeliveryBody::decode(&headers, body.as_bytes());
    let rendered = render(template, &headers, decoded.json.as_ref());
    let _ = rendered.len();
    if let Some(json) = &decoded.json {
        // The same JSON sent as a form renders the same.
        let encoded: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &json.to_string())
            .finish();
        let mut form_headers = headers.clone();
        form_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let as_form = DeliveryBody::decode(&form_headers, encoded.as_bytes());
        assert_eq!(as_form.json.as_ref(), Some(json));
        assert_eq!(render(template, &headers, as_form.json.as_ref()), rendered);
    }
});

//! What a webhook delivery says: its body as JSON (when it is JSON, or a form that carries
//! JSON) and the route's `text` template rendered over the headers and that JSON. Pure, no
//! I/O; the signature has been checked over the raw bytes before any of this runs.
//!
//! Decisions:
//! - GitHub's default content type for a new hook is `form`: the body is
//!   `payload=<url-encoded JSON>` with `Content-Type: application/x-www-form-urlencoded`.
//!   Such a body is read as the JSON its `payload` field carries, so `{body.…}` templates
//!   and the event text see the same thing as for a JSON delivery. A form without a
//!   `payload` field, or whose `payload` is not JSON, stays the raw text it was.
//! - Template keys are `{header.NAME}` and `{body.a.b}` (a dotted path; a number walks into
//!   an array). An absent value renders empty; any other `{…}` stays as written.

use axum::http::{HeaderMap, header};
use serde_json::Value;

/// A delivery's body as the brain and the templates read it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryBody {
    /// The body's JSON: the body itself, or the `payload` field of a form.
    pub json: Option<Value>,
    /// The text kept in the event: the JSON carried by a form, else the raw body (lossy
    /// UTF-8).
    pub text: String,
}

impl DeliveryBody {
    pub fn decode(headers: &HeaderMap, raw: &[u8]) -> Self {
        if is_form(headers)
            && let Some(payload) = form_payload(raw)
            && let Ok(json) = serde_json::from_str::<Value>(&payload)
        {
            return Self {
                json: Some(json),
                text: payload,
            };
        }
        Self {
            json: serde_json::from_slice(raw).ok(),
            text: String::from_utf8_lossy(raw).into_owned(),
        }
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// The decoded `payload` field of a form body.
fn form_payload(raw: &[u8]) -> Option<String> {
    form_urlencoded::parse(raw)
        .find(|(name, _)| name == "payload")
        .map(|(_, value)| value.into_owned())
}

/// `{header.NAME}` and `{body.a.b}` replaced by their values (empty when absent).
pub fn render(template: &str, headers: &HeaderMap, body: Option<&Value>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some((before, after_open)) = rest.split_once('{') {
        out.push_str(before);
        let Some((key, after_close)) = after_open.split_once('}') else {
            out.push('{');
            out.push_str(after_open);
            return out;
        };
        if let Some(name) = key.strip_prefix("header.") {
            out.push_str(
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(""),
            );
        } else if let Some(path) = key.strip_prefix("body.") {
            let pointer = format!("/{}", path.replace('.', "/"));
            match body.and_then(|b| b.pointer(&pointer)) {
                Some(Value::String(s)) => out.push_str(s),
                Some(other) => out.push_str(&other.to_string()),
                None => {}
            }
        } else {
            out.push('{');
            out.push_str(key);
            out.push('}');
        }
        rest = after_close;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn templates_read_headers_and_body_fields() {
        let mut headers = HeaderMap::new();
        headers.insert("x-github-event", HeaderValue::from_static("push"));
        let body = json!({"repository": {"full_name": "me/steward"}, "size": 3, "commits": [{"id": "abc"}]});
        let table = [
            (
                "{header.x-github-event} to {body.repository.full_name}",
                "push to me/steward",
            ),
            ("{body.size} commits", "3 commits"),
            ("first {body.commits.0.id}", "first abc"),
            ("{body.missing}|{header.none}", "|"),
            ("literal {braces} stay", "literal {braces} stay"),
            ("unclosed {body", "unclosed {body"),
            ("ünïcode {body.size} ✓ {", "ünïcode 3 ✓ {"),
        ];
        for (template, expected) in table {
            assert_eq!(
                render(template, &headers, Some(&body)),
                expected,
                "{template}"
            );
        }
    }

    fn form_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        headers
    }

    #[test]
    fn a_github_form_delivery_reads_as_the_json_it_carries() {
        let raw = b"payload=%7B%22action%22%3A%22opened%22%2C%22repository%22%3A%7B%22full_name%22%3A%22me%2Fsteward%22%7D%2C%22title%22%3A%22a+b%22%7D";
        let body = DeliveryBody::decode(&form_headers(), raw);
        assert_eq!(
            body.json,
            Some(
                json!({"action": "opened", "repository": {"full_name": "me/steward"}, "title": "a b"})
            )
        );
        assert_eq!(
            body.text,
            r#"{"action":"opened","repository":{"full_name":"me/steward"},"title":"a b"}"#
        );
        assert_eq!(
            render(
                "{body.action} on {body.repository.full_name}",
                &HeaderMap::new(),
                body.json.as_ref()
            ),
            "opened on me/steward"
        );
    }

    #[test]
    fn other_bodies_stay_what_they_were() {
        let json_body = DeliveryBody::decode(&HeaderMap::new(), br#"{"a":1}"#);
        assert_eq!(json_body.json, Some(json!({"a": 1})));
        // A form without a payload field, or whose payload is not JSON, is kept raw.
        let plain_form = DeliveryBody::decode(&form_headers(), b"name=x&value=%7B");
        assert_eq!(
            (plain_form.json, plain_form.text.as_str()),
            (None, "name=x&value=%7B")
        );
        let not_json = DeliveryBody::decode(&form_headers(), b"payload=hello");
        assert_eq!(
            (not_json.json, not_json.text.as_str()),
            (None, "payload=hello")
        );
        // The same bytes without the form content type are not decoded as a form.
        let undeclared = DeliveryBody::decode(&HeaderMap::new(), b"payload=%7B%7D");
        assert_eq!(undeclared.json, None);
        let binary = DeliveryBody::decode(&form_headers(), &[0xff, 0xfe, b'=', 0x00]);
        assert_eq!(binary.json, None);
    }
}

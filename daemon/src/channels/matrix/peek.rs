//! Waiting for news without the SDK: the channel's idle long poll.
//!
//! An idle assistant's `/sync` comes back every 30 s with nothing in it. Handed to the SDK,
//! each of those empty answers still runs its whole sync processing — the answer
//! deserialised into its event types, a transaction on its SQLite state and crypto stores,
//! its key-backup and outgoing-request checks — and maps megabytes of the binary's code back
//! into memory every time (BENCHMARKS.md, twenty-second and twenty-fourth sessions). So after
//! a session's first sync the channel waits with a request of its own: the very `/sync` the
//! SDK would send (same filter, position, timeout and `use_state_after`), read only for
//! whether anything came. When something did, the SDK syncs from the same position without
//! waiting and gets what the server has — the answer the peek saw, or a newer one — and
//! everything else is as before. When nothing did, the SDK is not woken.
//!
//! Decided here:
//! - "Nothing came" is strict: apart from `next_batch` and the device's key counts, the
//!   answer lists no room and holds nothing but empty objects, empty arrays and nulls —
//!   whatever its sections are called, so a section this code does not know counts as news
//!   when it has anything in it (a `false` or a `0` too) — and the device's one-time-key
//!   counts are those of the previous peek (they are state, not a stream: a claimed key
//!   changes them without moving the position, and the SDK uploads new keys when it sees
//!   them fall). The first peek of a session has nothing to compare its counts with: it
//!   asks without waiting and hands over, so that the session's quiet begins right after
//!   its start rather than one long poll later.
//! - The position may move while nothing comes (streams the filter leaves out, such as
//!   presence, still count in it). The next peek then asks from the moved position, kept in
//!   memory only: the channel's saved position is written when the SDK has taken a sync, as
//!   before, and a restart asks again from there and finds the same nothing.
//! - A peek that fails — no answer, an error status, a body that is not a sync answer —
//!   hands over to the SDK's own sync with its full wait, which reports errors as it always
//!   did (a revoked token included); the peek itself never stops the channel, and a server
//!   whose answers it cannot read only costs one extra request per sync. The first failure
//!   after a success is logged as a warning, repeats at debug.
//! - A message costs one more request than before: the peek's answer is read, then the SDK
//!   asks again (on the same connection: the peek uses the SDK's HTTP client).

use std::time::Duration;

use matrix_sdk::Client;
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use serde_json::{Map, Value};
use tracing::{debug, warn};

/// The server's side of the long poll; the request may take this much longer.
const REQUEST_SLACK: Duration = Duration::from_secs(30);

/// What one long poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// Nothing came (the position may have moved over what the filter leaves out): the SDK
    /// need not run.
    Nothing,
    /// Something came: the SDK syncs from the same position without waiting.
    Arrived,
}

/// A `/sync` answer, read only for whether anything came.
#[derive(Debug)]
struct Answer {
    next_batch: String,
    keys: KeyCounts,
    /// Everything else in it is empty (see the module docs).
    empty: bool,
}

/// The device's one-time and fallback keys as the server counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyCounts {
    one_time: Option<Value>,
    unused_fallback: Option<Value>,
}

impl Answer {
    fn read(body: &[u8]) -> Result<Self, String> {
        let mut fields: Map<String, Value> =
            serde_json::from_slice(body).map_err(|e| format!("not a sync answer: {e}"))?;
        let Some(Value::String(next_batch)) = fields.remove("next_batch") else {
            return Err("not a sync answer: no next_batch".into());
        };
        let keys = KeyCounts {
            one_time: fields.remove("device_one_time_keys_count"),
            unused_fallback: fields.remove("device_unused_fallback_key_types"),
        };
        // A room listed is news in itself (a leave, an invite), whatever it holds.
        let no_rooms = fields.remove("rooms").is_none_or(|rooms| match rooms {
            Value::Object(sections) => sections.values().all(|rooms| match rooms {
                Value::Object(rooms) => rooms.is_empty(),
                other => is_empty(other),
            }),
            other => is_empty(&other),
        });
        Ok(Self {
            next_batch,
            keys,
            empty: no_rooms && fields.values().all(is_empty),
        })
    }

    /// Whether anything came, given the key counts the previous peek saw.
    fn news(&self, keys_before: Option<&KeyCounts>) -> News {
        if self.empty && keys_before == Some(&self.keys) {
            News::Nothing
        } else {
            News::Arrived
        }
    }
}

/// Null, or objects and arrays with nothing but such things in them.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().all(is_empty),
        Value::Object(fields) => fields.values().all(is_empty),
        Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
    }
}

/// The channel's long poll for one session.
#[derive(Debug)]
pub struct Peek {
    /// The filter as the SDK sends it: its JSON, in the query.
    filter: String,
    keys: Option<KeyCounts>,
    /// A saved position, and the later one up to which nothing came after it.
    quiet: Option<(String, String)>,
    failing: bool,
}

impl Peek {
    pub fn new(filter: &FilterDefinition) -> Self {
        Self {
            // A filter definition always serialises; were it not to, no filter would only
            // make the peek see more than the SDK, never less.
            filter: serde_json::to_string(filter).unwrap_or_else(|_| "{}".into()),
            keys: None,
            quiet: None,
            failing: false,
        }
    }

    /// Long-polls the homeserver from the channel's saved position `saved` (or the later one
    /// nothing came up to) for at most `timeout`; `None` when the peek failed and the SDK
    /// should sync as usual (see the module docs). The session's first peek does not wait.
    pub async fn wait(&mut self, client: &Client, saved: &str, timeout: Duration) -> Option<News> {
        let since = match &self.quiet {
            Some((from, to)) if from == saved => to.clone(),
            _ => saved.to_owned(),
        };
        let timeout = if self.keys.is_some() {
            timeout
        } else {
            Duration::ZERO
        };
        match self.ask(client, &since, timeout).await {
            Ok(answer) => {
                let news = answer.news(self.keys.as_ref());
                debug!(?news, next = %answer.next_batch, "a long poll without the SDK");
                if news == News::Nothing {
                    self.quiet = Some((saved.to_owned(), answer.next_batch));
                }
                self.keys = Some(answer.keys);
                self.failing = false;
                Some(news)
            }
            Err(e) => {
                if self.failing {
                    debug!(error = %e, "the long poll without the SDK failed again");
                } else {
                    warn!(error = %e, "the long poll without the SDK failed; the SDK syncs instead");
                }
                self.failing = true;
                None
            }
        }
    }

    async fn ask(&self, client: &Client, since: &str, timeout: Duration) -> Result<Answer, String> {
        let token = client
            .access_token()
            .ok_or("the session has no access token")?;
        let mut url = client
            .homeserver()
            .join("_matrix/client/v3/sync")
            .map_err(|e| format!("the homeserver's URL: {e}"))?;
        url.query_pairs_mut()
            .append_pair("filter", &self.filter)
            .append_pair("since", since)
            .append_pair("timeout", &timeout.as_millis().to_string())
            .append_pair("use_state_after", "true");
        let response = client
            .http_client()
            .get(url)
            .bearer_auth(token)
            .timeout(timeout + REQUEST_SLACK)
            .send()
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the homeserver answered {status}"));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("the answer broke off: {e}"))?;
        Answer::read(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &str = r#""device_one_time_keys_count":{"signed_curve25519":50},"device_unused_fallback_key_types":["signed_curve25519"]"#;

    fn answer(json: &str) -> Answer {
        Answer::read(json.as_bytes()).unwrap()
    }

    #[test]
    fn only_an_answer_with_nothing_in_it_lets_the_sdk_sleep() {
        let before = answer(&format!(r#"{{"next_batch":"s1",{KEYS}}}"#)).keys;
        let cases = [
            // Synapse's idle answer: empty sections, the same counts.
            (
                format!(
                    r#"{{"next_batch":"s1","account_data":{{"events":[]}},"to_device":{{"events":[]}},"device_lists":{{"changed":[],"left":[]}},"presence":{{"events":[]}},"rooms":{{"join":{{}},"invite":{{}},"leave":{{}},"knock":{{}}}},{KEYS}}}"#
                ),
                Some(&before),
                News::Nothing,
            ),
            (format!(r#"{{"next_batch":"s1",{KEYS}}}"#), Some(&before), News::Nothing),
            // The position moved over what the filter leaves out.
            (format!(r#"{{"next_batch":"s2",{KEYS}}}"#), Some(&before), News::Nothing),
            // A room has news.
            (
                format!(r#"{{"next_batch":"s2","rooms":{{"join":{{"!r:x":{{}}}}}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            (
                format!(r#"{{"next_batch":"s2","rooms":{{"leave":{{"!r:x":{{"timeline":{{"events":[],"limited":false}}}}}}}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            (
                format!(r#"{{"next_batch":"s2","rooms":{{"invite":{{"!r:x":{{"invite_state":{{"events":[{{"type":"m.room.member"}}]}}}}}}}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            (
                format!(r#"{{"next_batch":"s2","to_device":{{"events":[{{"type":"m.room_key"}}]}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            (
                format!(r#"{{"next_batch":"s2","device_lists":{{"changed":["@a:x"]}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            (
                format!(r#"{{"next_batch":"s2","account_data":{{"events":[{{"type":"m.direct"}}]}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            // A section this code does not know, with something in it.
            (
                format!(r#"{{"next_batch":"s1","org.example.new":{{"count":0}},{KEYS}}}"#),
                Some(&before),
                News::Arrived,
            ),
            // A one-time key was claimed: the counts fell without anything else.
            (
                r#"{"next_batch":"s1","device_one_time_keys_count":{"signed_curve25519":49},"device_unused_fallback_key_types":["signed_curve25519"]}"#.into(),
                Some(&before),
                News::Arrived,
            ),
            // The fallback key was used.
            (
                r#"{"next_batch":"s1","device_one_time_keys_count":{"signed_curve25519":50},"device_unused_fallback_key_types":[]}"#.into(),
                Some(&before),
                News::Arrived,
            ),
            // The session's first peek has no counts to compare with.
            (format!(r#"{{"next_batch":"s1",{KEYS}}}"#), None, News::Arrived),
        ];
        for (json, keys_before, expected) in cases {
            assert_eq!(answer(&json).news(keys_before), expected, "{json}");
        }
    }

    #[test]
    fn what_is_not_a_sync_answer_is_refused() {
        for json in [
            "{}",
            r#"{"errcode":"M_UNKNOWN_TOKEN"}"#,
            r#"{"next_batch":7}"#,
            "[]",
            "not json",
        ] {
            assert!(Answer::read(json.as_bytes()).is_err(), "{json}");
        }
    }

    #[test]
    fn the_filter_is_sent_as_the_sdk_sends_it() {
        let mut filter = FilterDefinition::default();
        filter.room.timeline.limit = Some(100u32.into());
        assert_eq!(
            Peek::new(&filter).filter,
            r#"{"room":{"timeline":{"limit":100}}}"#
        );
    }
}

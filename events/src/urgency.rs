//! Urgency: how an event interrupts the work in flight, decided once, at the actor, by
//! [`classify_urgency`] — a pure function of the event and the configured rules.
//!
//! Precedence, most specific first:
//! 1. `lane` events are always QUEUE: a lane's summary must come back into the main
//!    trajectory, and a PARALLEL lane result would spawn lanes without end.
//! 2. The owner's explicit request (`steward send --urgency …`) wins: the owner said so.
//!    A request from anyone else is ignored — strangers do not get to cancel the owner's work.
//! 3. The first `[[urgency.rules]]` entry whose every condition matches.
//! 4. The channel's configured urgency (`channel_urgency`: a cron job's, a watch's, a webhook
//!    route's `urgency`). It is a default, not a request: a rule such as
//!    `channel = "cron:*"` is more deliberate and wins.
//! 5. The source's default: timers run as PARALLEL (a scheduled report should not wait for, or
//!    interrupt, a conversation); everything else is QUEUE.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Event, Source, Trust};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Urgency {
    /// Abort the step in flight now.
    Cancel,
    /// Merge at the next step boundary, in arrival order.
    Queue,
    /// Independent work in a side lane.
    Parallel,
}

impl Urgency {
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::Cancel => "cancel",
            Urgency::Queue => "queue",
            Urgency::Parallel => "parallel",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Urgency::Cancel, Urgency::Queue, Urgency::Parallel]
            .into_iter()
            .find(|u| u.as_str() == text)
    }

    /// The urgency of an event from `source` when nothing more specific applies.
    pub fn default_for(source: Source) -> Self {
        match source {
            Source::Timer => Urgency::Parallel,
            Source::Watch
            | Source::Email
            | Source::Webhook
            | Source::User
            | Source::System
            | Source::Lane
            | Source::Chat => Urgency::Queue,
        }
    }
}

/// A condition on one payload field: the value at the dotted `path` of the payload's JSON
/// form (e.g. `text`, `type`) must equal `equals` (strings compare exactly).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldMatch {
    pub path: String,
    pub equals: Value,
}

/// One `[[urgency.rules]]` entry: every condition that is set must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct UrgencyRule {
    pub source: Option<Source>,
    /// Exact channel, or a pattern with `*` wildcards (`cron:*`, `webhook:*-alerts`).
    pub channel: Option<String>,
    pub trust: Option<Trust>,
    pub field: Option<FieldMatch>,
    pub urgency: Urgency,
}

impl UrgencyRule {
    fn matches(&self, event: &Event, payload: &Value) -> bool {
        self.source.is_none_or(|s| s == event.source)
            && self.trust.is_none_or(|t| t == event.trust)
            && self
                .channel
                .as_deref()
                .is_none_or(|pattern| wildcard_match(pattern, &event.channel))
            && self
                .field
                .as_ref()
                .is_none_or(|f| lookup(payload, &f.path) == Some(&f.equals))
    }
}

/// Decides the urgency of `event` (see the module docs for the precedence).
pub fn classify_urgency(event: &Event, rules: &[UrgencyRule]) -> Urgency {
    if event.source == Source::Lane {
        return Urgency::Queue;
    }
    if event.trust == Trust::Owner
        && let Some(requested) = event.requested_urgency
    {
        return requested;
    }
    if !rules.is_empty() {
        let payload = serde_json::to_value(&event.payload).unwrap_or(Value::Null);
        if let Some(rule) = rules.iter().find(|r| r.matches(event, &payload)) {
            return rule.urgency;
        }
    }
    event
        .channel_urgency
        .unwrap_or_else(|| Urgency::default_for(event.source))
}

fn lookup<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(value, |v, segment| v.as_object()?.get(segment))
}

/// `*` matches any run of characters (including none); everything else matches itself.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Payload, Sender};
    use serde_json::json;

    fn event(source: Source, channel: &str, trust: Trust, text: &str) -> Event {
        Event::new(
            source,
            channel,
            Sender {
                identity: "test".into(),
                authenticated_by: "test".into(),
            },
            trust,
            Payload::Message { text: text.into() },
        )
    }

    fn rule(urgency: Urgency) -> UrgencyRule {
        UrgencyRule {
            source: None,
            channel: None,
            trust: None,
            field: None,
            urgency,
        }
    }

    #[test]
    fn classification_table() {
        let stop_rule = UrgencyRule {
            field: Some(FieldMatch {
                path: "text".into(),
                equals: json!("stop"),
            }),
            trust: Some(Trust::Owner),
            ..rule(Urgency::Cancel)
        };
        let alerts_rule = UrgencyRule {
            source: Some(Source::Webhook),
            channel: Some("webhook:*-alerts".into()),
            ..rule(Urgency::Cancel)
        };
        let cron_queue = UrgencyRule {
            channel: Some("cron:*".into()),
            ..rule(Urgency::Queue)
        };
        let rules = vec![stop_rule, alerts_rule, cron_queue];
        let catch_all = [rule(Urgency::Parallel)];

        let mut owner_asks_parallel = event(Source::User, "user:socket", Trust::Owner, "x");
        owner_asks_parallel.requested_urgency = Some(Urgency::Parallel);
        let mut stranger_asks_cancel = event(Source::Email, "email:inbox", Trust::Untrusted, "x");
        stranger_asks_cancel.requested_urgency = Some(Urgency::Cancel);
        let mut lane_asks_parallel = event(Source::Lane, "lane:x", Trust::Owner, "x");
        lane_asks_parallel.requested_urgency = Some(Urgency::Parallel);
        let configured = |source: Source, channel: &str, urgency: Urgency| {
            let mut e = event(source, channel, Trust::Owner, "");
            e.channel_urgency = Some(urgency);
            e
        };
        let webhooks_parallel = [UrgencyRule {
            channel: Some("webhook:*".into()),
            ..rule(Urgency::Parallel)
        }];

        let table: Vec<(&str, Event, &[UrgencyRule], Urgency)> = vec![
            (
                "user default",
                event(Source::User, "user:socket", Trust::Owner, "hi"),
                &[],
                Urgency::Queue,
            ),
            (
                "timer default",
                event(Source::Timer, "cron:brief", Trust::Owner, ""),
                &[],
                Urgency::Parallel,
            ),
            (
                "webhook default",
                event(Source::Webhook, "webhook:gh", Trust::Untrusted, ""),
                &[],
                Urgency::Queue,
            ),
            (
                "owner stop",
                event(Source::User, "user:socket", Trust::Owner, "stop"),
                &rules,
                Urgency::Cancel,
            ),
            (
                "stranger stop is not owner",
                event(Source::Email, "email:inbox", Trust::Untrusted, "stop"),
                &rules,
                Urgency::Queue,
            ),
            (
                "pager alert",
                event(
                    Source::Webhook,
                    "webhook:pager-alerts",
                    Trust::Untrusted,
                    "",
                ),
                &rules,
                Urgency::Cancel,
            ),
            (
                "alerts pattern needs suffix",
                event(Source::Webhook, "webhook:alerts-x", Trust::Untrusted, ""),
                &rules,
                Urgency::Queue,
            ),
            (
                "cron rule overrides default",
                event(Source::Timer, "cron:brief", Trust::Owner, ""),
                &rules,
                Urgency::Queue,
            ),
            (
                "owner request wins over rules",
                owner_asks_parallel,
                &rules,
                Urgency::Parallel,
            ),
            (
                "stranger request ignored",
                stranger_asks_cancel,
                &[],
                Urgency::Queue,
            ),
            (
                "lane always queue",
                lane_asks_parallel,
                &catch_all,
                Urgency::Queue,
            ),
            (
                "a job's configured urgency without a rule",
                configured(Source::Timer, "cron:brief", Urgency::Queue),
                &[],
                Urgency::Queue,
            ),
            (
                "a cron:* rule wins over the job's configured urgency",
                configured(Source::Timer, "cron:brief", Urgency::Parallel),
                &rules,
                Urgency::Queue,
            ),
            (
                "a webhook:* rule wins over the route's configured urgency",
                configured(Source::Webhook, "webhook:gh", Urgency::Queue),
                &webhooks_parallel,
                Urgency::Parallel,
            ),
            (
                "a route's configured urgency when the rule is for others",
                configured(Source::Webhook, "webhook:gh", Urgency::Cancel),
                &rules,
                Urgency::Cancel,
            ),
            (
                "catch-all rule",
                event(Source::Watch, "watch:docs", Trust::Owner, ""),
                &catch_all,
                Urgency::Parallel,
            ),
        ];
        for (name, event, rules, expected) in table {
            assert_eq!(classify_urgency(&event, rules), expected, "{name}");
        }
    }

    #[test]
    fn field_paths_reach_nested_values_and_tags() {
        let e = event(Source::User, "user:socket", Trust::Owner, "hi");
        let by_type = UrgencyRule {
            field: Some(FieldMatch {
                path: "type".into(),
                equals: json!("message"),
            }),
            ..rule(Urgency::Cancel)
        };
        let missing = UrgencyRule {
            field: Some(FieldMatch {
                path: "text.deeper".into(),
                equals: json!("hi"),
            }),
            ..rule(Urgency::Cancel)
        };
        assert_eq!(classify_urgency(&e, &[by_type]), Urgency::Cancel);
        assert_eq!(classify_urgency(&e, &[missing]), Urgency::Queue);
    }

    #[test]
    fn wildcard_table() {
        let table = [
            ("cron:*", "cron:brief", true),
            ("cron:*", "cron:", true),
            ("cron:*", "webhook:cron:", false),
            ("*-alerts", "webhook:pager-alerts", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "acb", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*", "", true),
            ("a*a", "a", false),
        ];
        for (pattern, text, expected) in table {
            assert_eq!(
                wildcard_match(pattern, text),
                expected,
                "{pattern} vs {text}"
            );
        }
    }
}

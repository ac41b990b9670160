//! What the daemon tells the owner in its own words, and to whom an answer is owed: pure
//! functions, so the wording and the routing are table-tested.

use chrono::{DateTime, Utc};
use steward_events::{Event, Source};

/// The channel that already showed an answer, when every event it answers is the owner's
/// own interactive request (the asking session prints the reply itself): `socket` or
/// `http`. `None`: the answer is news to the owner (a job, a watch, a webhook, mail).
pub fn asked_through(answered: &[&Event]) -> Option<&'static str> {
    let mut doors = answered.iter().map(|event| match event.source {
        Source::User if event.channel == "user:http" => Some("http"),
        Source::User => Some("socket"),
        _ => None,
    });
    let first = doors.next()??;
    doors.all(|door| door == Some(first)).then_some(first)
}

/// The shortest prefix of `id` that no other id shares, at least six characters (what is
/// shown to people; a unique prefix is accepted wherever an id is).
pub fn short_id<'a>(id: &'a str, others: &[&str]) -> &'a str {
    const MIN: usize = 6;
    let shared = others
        .iter()
        .filter(|other| **other != id)
        .map(|other| {
            id.chars()
                .zip(other.chars())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .max()
        .unwrap_or(0);
    let length = (shared + 1).max(MIN).min(id.chars().count());
    let end = id.char_indices().nth(length).map_or(id.len(), |(at, _)| at);
    id.get(..end).unwrap_or(id)
}

/// The line that asks the owner to confirm an action.
pub fn confirmation_request(
    tool: &str,
    preview: &str,
    short: &str,
    expires_at: DateTime<Utc>,
) -> String {
    format!(
        "{tool} waits for your confirmation: {preview}\n/confirm {short} · /deny {short} [reason] (expires {})",
        expires_at.format("%Y-%m-%d %H:%M UTC")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use steward_events::{Payload, Sender, Trust};

    fn event(source: Source, channel: &str) -> Event {
        Event::new(
            source,
            channel,
            Sender {
                identity: "x".into(),
                authenticated_by: "test".into(),
            },
            Trust::Owner,
            Payload::Message { text: "t".into() },
        )
    }

    #[test]
    fn only_the_owners_own_requests_are_answered_where_they_were_asked() {
        let socket = event(Source::User, "user:socket");
        let http = event(Source::User, "user:http");
        let cron = event(Source::Timer, "cron:stretch");
        let table: [(Vec<&Event>, Option<&str>); 6] = [
            (vec![&socket], Some("socket")),
            (vec![&http], Some("http")),
            (vec![&socket, &socket], Some("socket")),
            (vec![&cron], None),
            (vec![&socket, &cron], None),
            (vec![&socket, &http], None),
        ];
        for (answered, expected) in table {
            assert_eq!(asked_through(&answered), expected, "{answered:?}");
        }
        assert_eq!(asked_through(&[]), None);
    }

    #[test]
    fn short_ids_are_unique_prefixes_of_at_least_six() {
        let table = [
            ("01KBABCDEF", vec!["01KBXYZ"], "01KBAB"),
            ("01KBABCDEF", vec!["01KBABCDXX"], "01KBABCDE"),
            ("01KBABCDEF", vec![], "01KBAB"),
            ("01KBABCDEF", vec!["01KBABCDEF"], "01KBAB"),
            ("abc", vec!["abd"], "abc"),
        ];
        for (id, others, expected) in table {
            assert_eq!(short_id(id, &others), expected, "{id} among {others:?}");
        }
    }
}

//! How an owner answers a request for confirmation in a chat, besides `/confirm ID`: a
//! reaction (Matrix) or a reply to the request saying yes or no (every chat). Pure,
//! table-tested; each chat channel finds the request the answer points at.

use steward_protocol::PendingRow;

/// A reaction's answer to a request for confirmation: yes, no, or none.
pub fn answer_of(key: &str) -> Option<bool> {
    match key.trim_end_matches('\u{fe0f}') {
        "✅" | "✔" | "👍" => Some(true),
        "❌" | "✖" | "👎" => Some(false),
        _ => None,
    }
}

/// A reply's answer to a request for confirmation: `yes`/`confirm`/✅ or `no`/`deny`/❌
/// (then the rest is the reason), or `None` for any other text.
pub fn reply_answer(text: &str) -> Option<(bool, Option<String>)> {
    let mut words = text.split_whitespace();
    let first = words.next()?.to_lowercase();
    let rest = words.collect::<Vec<_>>().join(" ");
    let reason = (!rest.is_empty()).then_some(rest);
    match first.trim_end_matches(['.', '!', ',', ':', ';']) {
        "yes" | "y" | "ok" | "confirm" | "/confirm" => Some((true, None)),
        "no" | "n" | "deny" | "/deny" => Some((false, reason)),
        other => answer_of(other).map(|yes| (yes, if yes { None } else { reason })),
    }
}

/// What an answered request for confirmation says in a chat.
pub fn answered_text(row: &PendingRow) -> String {
    match row.state.as_str() {
        "denied" => format!("Denied: `{}` will not run.", row.tool),
        "expired" => format!("Expired: `{}` did not run.", row.tool),
        state => {
            let result = row
                .result
                .as_ref()
                .map(|r| r.content_text())
                .unwrap_or_default();
            format!("Confirmed: `{}` ran ({state}). {result}", row.tool)
                .trim_end()
                .to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_to_a_request_are_read_from_reactions_and_replies() {
        let reactions = [
            ("✅", Some(true)),
            ("✔️", Some(true)),
            ("👍", Some(true)),
            ("❌", Some(false)),
            ("👎", Some(false)),
            ("🎉", None),
        ];
        for (key, expected) in reactions {
            assert_eq!(answer_of(key), expected, "{key}");
        }
        let replies = [
            ("yes", Some((true, None))),
            ("Confirm.", Some((true, None))),
            ("/confirm", Some((true, None))),
            ("✅", Some((true, None))),
            ("no not now", Some((false, Some("not now".to_owned())))),
            ("No, not today", Some((false, Some("not today".to_owned())))),
            ("yes: go ahead", Some((true, None))),
            ("❌ too risky", Some((false, Some("too risky".to_owned())))),
            ("yesterday was fine", None),
            ("", None),
        ];
        for (text, expected) in replies {
            assert_eq!(reply_answer(text), expected, "{text}");
        }
    }
}

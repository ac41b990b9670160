//! What makes an owner's message acceptable, for every front door (the control socket,
//! `POST /v1/messages`): one rule, one wording, so `steward send ""` and an HTTP client
//! posting `""` are refused alike. A refused message is still recorded, as a `rejected`
//! event with the reason, and the sender is told.

/// The largest message text taken from the owner.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Why `text` cannot be taken as a message, or `None` when it can.
pub fn refusal(text: &str) -> Option<String> {
    if text.trim().is_empty() {
        Some("empty message".to_owned())
    } else if text.len() > MAX_MESSAGE_BYTES {
        Some(format!(
            "message of {} bytes is over the limit of {MAX_MESSAGE_BYTES}",
            text.len()
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_blank_and_oversized_messages_are_refused() {
        let huge = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let table: [(&str, Option<&str>); 5] = [
            ("hello", None),
            ("", Some("empty message")),
            (" \n\t ", Some("empty message")),
            (&huge, Some("is over the limit")),
            ("  padded  ", None),
        ];
        for (text, expected) in table {
            let got = refusal(text);
            match expected {
                None => assert_eq!(got, None, "{text:?}"),
                Some(part) => assert!(got.as_deref().is_some_and(|r| r.contains(part)), "{got:?}"),
            }
        }
    }
}

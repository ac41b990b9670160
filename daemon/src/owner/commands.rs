//! The owner's commands, answered by the daemon itself before any model sees the message —
//! with or without a model configured, and costing no model call. A pure parser; the owner
//! API runs what it returns.

/// A command line the daemon answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Command<'a> {
    Help,
    Status,
    Pending,
    Outbox,
    Confirm(&'a str),
    Deny(&'a str, Option<String>),
}

/// What `/help` says.
pub const HELP: &str = "Commands (answered by the daemon, with or without a model):\n  /help                 this text\n  /status               what the daemon is doing\n  /pending              actions waiting for your confirmation\n  /confirm ID           run a waiting action (a unique start of its id is enough)\n  /deny ID [reason]     refuse it\n  /outbox               the latest messages for you\n  /tool NAME {json}     run a tool, e.g. /tool echo {\"text\":\"hi\"}\nAnything else goes to the assistant.";

/// The command `text` is, if it is one.
pub fn parse(text: &str) -> Option<Command<'_>> {
    let mut words = text.split_whitespace();
    let command = match (words.next()?, words.next()) {
        ("/help", None) => Command::Help,
        ("/status", None) => Command::Status,
        ("/pending", None) => Command::Pending,
        ("/outbox", None) => Command::Outbox,
        ("/confirm", Some(id)) if words.next().is_none() => Command::Confirm(id),
        ("/deny", Some(id)) => {
            let reason = words.collect::<Vec<_>>().join(" ");
            Command::Deny(id, (!reason.is_empty()).then_some(reason))
        }
        _ => return None,
    };
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_recognised_and_everything_else_is_a_message() {
        let table = [
            ("/help", Some(Command::Help)),
            ("  /status  ", Some(Command::Status)),
            ("/pending", Some(Command::Pending)),
            ("/outbox", Some(Command::Outbox)),
            ("/confirm 01KBAB", Some(Command::Confirm("01KBAB"))),
            ("/deny 01KBAB", Some(Command::Deny("01KBAB", None))),
            (
                "/deny 01KBAB not  today",
                Some(Command::Deny("01KBAB", Some("not today".into()))),
            ),
            ("/confirm", None),
            ("/confirm a b", None),
            ("/help me", None),
            ("/tool echo {}", None),
            ("hello", None),
            ("", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse(text), expected, "{text:?}");
        }
    }
}

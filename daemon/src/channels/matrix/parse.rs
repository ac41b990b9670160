//! What a Matrix timeline event says, read from its JSON (already decrypted by the SDK):
//! a message (its text, thread, reply and mentions), an edit, a reaction, a redaction, or
//! something the assistant does not take. Pure, so every shape is table-tested.
//!
//! Decided here:
//! - The text is the HTML `formatted_body` reduced to text when there is one (it is what
//!   the sender's client showed), else `body`; a reply's quoted fallback (`<mx-reply>`, or
//!   the leading `> ` lines of `body`) is removed — the event says what it replies to.
//! - Media messages (`m.image`, `m.file`, …) become their caption or file name in brackets;
//!   downloads are a later tool.
//! - An edit (`m.replace`) is never a new message, whatever its text.

use serde_json::Value;

/// A message the assistant may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub sender: String,
    pub text: String,
    pub thread_root: Option<String>,
    pub in_reply_to: Option<String>,
    /// User ids in `m.mentions`.
    pub mentions: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    Message(Message),
    Edit {
        id: String,
        sender: String,
        of: String,
    },
    Reaction {
        id: String,
        sender: String,
        to: String,
        key: String,
    },
    Redaction {
        id: String,
        sender: String,
        of: String,
    },
    /// State, receipts, calls, an event without an id: nothing to take.
    Other,
}

fn text_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Reads one timeline event.
pub fn parse(event: &Value) -> Incoming {
    let (Some(id), Some(sender)) = (text_at(event, "event_id"), text_at(event, "sender")) else {
        return Incoming::Other;
    };
    let (id, sender) = (id.to_owned(), sender.to_owned());
    let content = event.get("content").unwrap_or(&Value::Null);
    let relation = content.get("m.relates_to").unwrap_or(&Value::Null);
    let related = text_at(relation, "event_id").map(str::to_owned);
    match text_at(event, "type") {
        Some("m.room.message") => {
            if text_at(relation, "rel_type") == Some("m.replace") {
                return match related {
                    Some(of) => Incoming::Edit { id, sender, of },
                    None => Incoming::Other,
                };
            }
            let thread_root = (text_at(relation, "rel_type") == Some("m.thread"))
                .then(|| related.clone())
                .flatten();
            let in_reply_to = relation
                .get("m.in_reply_to")
                .and_then(|r| text_at(r, "event_id"))
                .map(str::to_owned);
            let mentions = content
                .get("m.mentions")
                .and_then(|m| m.get("user_ids"))
                .and_then(Value::as_array)
                .map(|ids| {
                    ids.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let Some(text) = message_text(content, in_reply_to.is_some()) else {
                return Incoming::Other;
            };
            Incoming::Message(Message {
                id,
                sender,
                text,
                thread_root,
                in_reply_to,
                mentions,
            })
        }
        Some("m.reaction") if text_at(relation, "rel_type") == Some("m.annotation") => {
            match (related, text_at(relation, "key")) {
                (Some(to), Some(key)) => Incoming::Reaction {
                    id,
                    sender,
                    to,
                    key: key.to_owned(),
                },
                _ => Incoming::Other,
            }
        }
        Some("m.room.redaction") => {
            // Room versions up to 10 put `redacts` beside the content, 11 inside it.
            match text_at(content, "redacts").or_else(|| text_at(event, "redacts")) {
                Some(of) => Incoming::Redaction {
                    id,
                    sender,
                    of: of.to_owned(),
                },
                None => Incoming::Other,
            }
        }
        _ => Incoming::Other,
    }
}

/// The text of a message's content, `None` when it has none.
fn message_text(content: &Value, is_reply: bool) -> Option<String> {
    let body = text_at(content, "body")?;
    let html = (text_at(content, "format") == Some("org.matrix.custom.html"))
        .then(|| text_at(content, "formatted_body"))
        .flatten();
    let text = match html {
        Some(html) => html_to_text(html),
        None if is_reply => without_quoted_fallback(body),
        None => body.to_owned(),
    };
    let text = text.trim().to_owned();
    Some(match text_at(content, "msgtype") {
        Some("m.text" | "m.notice") | None => text,
        Some("m.emote") => format!("* {text}"),
        Some(other) => {
            let kind = other.strip_prefix("m.").unwrap_or(other);
            format!("[{kind}: {text}]")
        }
    })
}

/// `body` without the leading `> ` lines (and the blank line after them) of a reply.
fn without_quoted_fallback(body: &str) -> String {
    let mut lines = body.lines().peekable();
    let mut quoted = false;
    while lines.peek().is_some_and(|line| line.starts_with('>')) {
        lines.next();
        quoted = true;
    }
    if quoted && lines.peek().is_some_and(|line| line.trim().is_empty()) {
        lines.next();
    }
    lines.collect::<Vec<_>>().join("\n")
}

/// HTML as the text a person reads: block ends are line breaks, list items start with
/// `- `, a reply's quoted fallback is left out, other tags go, entities are decoded.
pub fn html_to_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut rest = html;
    let mut in_reply = 0usize;
    while let Some(open) = rest.find('<') {
        let (before, tag_on) = rest.split_at(open);
        if in_reply == 0 {
            text.push_str(&decode_entities(before));
        }
        let Some(close) = tag_on.find('>') else {
            rest = "";
            break;
        };
        let (tag, after) = tag_on.split_at(close + 1);
        let name: String = tag
            .trim_start_matches('<')
            .trim_end_matches('>')
            .trim_end_matches('/')
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        match name.as_str() {
            "mx-reply" => in_reply += 1,
            "/mx-reply" => in_reply = in_reply.saturating_sub(1),
            _ if in_reply > 0 => {}
            "br" | "/p" | "/div" | "/h1" | "/h2" | "/h3" | "/h4" | "/h5" | "/h6" | "/li"
            | "/pre" | "/blockquote" | "/tr" => text.push('\n'),
            "li" => text.push_str("- "),
            _ => {}
        }
        rest = after;
    }
    if in_reply == 0 {
        text.push_str(&decode_entities(rest));
    }
    text
}

fn decode_entities(text: &str) -> String {
    let mut decoded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        let (before, entity_on) = rest.split_at(amp);
        decoded.push_str(before);
        let entity = entity_on
            .find(';')
            .filter(|end| *end <= 10)
            .and_then(|end| entity_on.get(1..end).map(|name| (name, end)));
        let Some((name, end)) = entity else {
            decoded.push('&');
            rest = entity_on.get(1..).unwrap_or_default();
            continue;
        };
        let character = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => name
                .strip_prefix("#x")
                .or_else(|| name.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|n| n.parse().ok()))
                .and_then(char::from_u32),
        };
        match character {
            Some(c) => {
                decoded.push(c);
                rest = entity_on.get(end + 1..).unwrap_or_default();
            }
            None => {
                decoded.push('&');
                rest = entity_on.get(1..).unwrap_or_default();
            }
        }
    }
    decoded.push_str(rest);
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, content: Value) -> Value {
        json!({"type": kind, "event_id": "$e", "sender": "@o:localhost", "content": content})
    }

    fn message(text: &str) -> Message {
        Message {
            id: "$e".into(),
            sender: "@o:localhost".into(),
            text: text.into(),
            thread_root: None,
            in_reply_to: None,
            mentions: vec![],
        }
    }

    #[test]
    fn timeline_events_are_read_as_messages_edits_reactions_or_redactions() {
        let table = [
            (
                "plain text",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "hello"}),
                ),
                Incoming::Message(message("hello")),
            ),
            (
                "html preferred",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "**hi** there", "format": "org.matrix.custom.html", "formatted_body": "<p><strong>hi</strong> there &amp; <em>you</em></p>"}),
                ),
                Incoming::Message(message("hi there & you")),
            ),
            (
                "reply with fallbacks",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "> <@s:localhost> question\n\nyes", "m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}),
                ),
                Incoming::Message(Message {
                    in_reply_to: Some("$q".into()),
                    ..message("yes")
                }),
            ),
            (
                "html reply fallback",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "x", "format": "org.matrix.custom.html", "formatted_body": "<mx-reply><blockquote>old <b>words</b></blockquote></mx-reply>new", "m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}),
                ),
                Incoming::Message(Message {
                    in_reply_to: Some("$q".into()),
                    ..message("new")
                }),
            ),
            (
                "in a thread, mentioning",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "steward: go", "m.mentions": {"user_ids": ["@steward:localhost"]}, "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true, "m.in_reply_to": {"event_id": "$last"}}}),
                ),
                Incoming::Message(Message {
                    thread_root: Some("$root".into()),
                    in_reply_to: Some("$last".into()),
                    mentions: vec!["@steward:localhost".into()],
                    ..message("steward: go")
                }),
            ),
            (
                "emote",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.emote", "body": "waves"}),
                ),
                Incoming::Message(message("* waves")),
            ),
            (
                "image",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.image", "body": "cat.png", "url": "mxc://x/y"}),
                ),
                Incoming::Message(message("[image: cat.png]")),
            ),
            (
                "edit",
                event(
                    "m.room.message",
                    json!({"msgtype": "m.text", "body": "* fixed", "m.new_content": {"body": "fixed"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$old"}}),
                ),
                Incoming::Edit {
                    id: "$e".into(),
                    sender: "@o:localhost".into(),
                    of: "$old".into(),
                },
            ),
            (
                "reaction",
                event(
                    "m.reaction",
                    json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": "$ask", "key": "✅"}}),
                ),
                Incoming::Reaction {
                    id: "$e".into(),
                    sender: "@o:localhost".into(),
                    to: "$ask".into(),
                    key: "✅".into(),
                },
            ),
            (
                "redaction v11",
                event("m.room.redaction", json!({"redacts": "$gone"})),
                Incoming::Redaction {
                    id: "$e".into(),
                    sender: "@o:localhost".into(),
                    of: "$gone".into(),
                },
            ),
            (
                "redaction before v11",
                json!({"type": "m.room.redaction", "event_id": "$e", "sender": "@o:localhost", "redacts": "$gone", "content": {}}),
                Incoming::Redaction {
                    id: "$e".into(),
                    sender: "@o:localhost".into(),
                    of: "$gone".into(),
                },
            ),
            (
                "no body",
                event("m.room.message", json!({"msgtype": "m.text"})),
                Incoming::Other,
            ),
            (
                "state",
                event("m.room.member", json!({"membership": "join"})),
                Incoming::Other,
            ),
            (
                "no id",
                json!({"type": "m.room.message", "content": {"body": "x"}}),
                Incoming::Other,
            ),
            ("not an object", json!("text"), Incoming::Other),
        ];
        for (name, raw, expected) in table {
            assert_eq!(parse(&raw), expected, "{name}");
        }
    }

    #[test]
    fn html_is_reduced_to_what_a_person_reads() {
        let table = [
            ("<ul><li>one</li><li>two</li></ul>", "- one\n- two\n"),
            ("a<br/>b<br>c", "a\nb\nc"),
            (
                "&lt;tag&gt; &#65;&#x42; &unknown; & alone",
                "<tag> AB &unknown; & alone",
            ),
            ("<a href=\"https://x\">link</a>", "link"),
            ("unclosed <b", "unclosed "),
            (
                "<mx-reply><mx-reply>nested</mx-reply>still</mx-reply>after",
                "after",
            ),
            ("ünï <i>cödé</i> &amp", "ünï cödé &amp"),
        ];
        for (html, text) in table {
            assert_eq!(html_to_text(html), text, "{html}");
        }
    }
}

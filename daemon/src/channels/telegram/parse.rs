//! What a Bot API `Update` says (pure, table-tested): a message (new or edited), a button
//! press, or something the channel does not take. Only the fields the channel uses are
//! read; unknown ones are ignored, as the Bot API adds fields over time.

use serde::Deserialize;
use serde_json::Value;

/// One update, reduced to what the channel acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    Message(Message),
    /// An edit of a message sent earlier: recorded, never run again.
    Edited(Message),
    Callback(Callback),
    /// Any other kind of update (or one that does not parse): skipped, offset advanced.
    Other,
}

/// A message, as the channel takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub message_id: i64,
    pub chat_id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    pub chat_type: String,
    /// The sender's user id (`None` for a channel post or an anonymous admin).
    pub from: Option<i64>,
    pub from_username: Option<String>,
    pub from_is_bot: bool,
    /// Unix seconds.
    pub date: i64,
    /// The text, or a media message's caption.
    pub text: String,
    pub reply_to: Option<i64>,
    /// Who wrote the message replied to.
    pub reply_to_from: Option<i64>,
    /// `@username`s mentioned (without the `@`), and users mentioned without a username.
    pub mentions: Vec<String>,
    pub mentioned_ids: Vec<i64>,
    pub attachments: Vec<Attachment>,
}

/// A file sent with a message: recorded by its id (downloading is a tool's job).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// `photo`, `document`, `voice`, `audio`, `video`, `video_note` or `sticker`.
    pub kind: &'static str,
    pub file_id: String,
    pub file_size: Option<u64>,
    pub file_name: Option<String>,
}

/// A press of an inline button.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callback {
    pub id: String,
    pub from: i64,
    pub data: String,
    /// The message the button was on: (chat, message id).
    pub message: Option<(i64, i64)>,
}

#[derive(Deserialize)]
struct RawUpdate {
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    edited_message: Option<RawMessage>,
    #[serde(default)]
    callback_query: Option<RawCallback>,
}

#[derive(Deserialize)]
struct RawUser {
    id: i64,
    #[serde(default)]
    is_bot: bool,
    #[serde(default)]
    username: Option<String>,
}

#[derive(Deserialize)]
struct RawChat {
    id: i64,
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct RawEntity {
    #[serde(rename = "type")]
    kind: String,
    offset: usize,
    length: usize,
    #[serde(default)]
    user: Option<RawUser>,
}

#[derive(Deserialize)]
struct RawFile {
    file_id: String,
    #[serde(default)]
    file_size: Option<u64>,
    #[serde(default)]
    file_name: Option<String>,
}

#[derive(Deserialize)]
struct RawReplied {
    message_id: i64,
    #[serde(default)]
    from: Option<RawUser>,
}

#[derive(Deserialize)]
struct RawMessage {
    message_id: i64,
    chat: RawChat,
    #[serde(default)]
    from: Option<RawUser>,
    #[serde(default)]
    date: i64,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    entities: Vec<RawEntity>,
    #[serde(default)]
    caption_entities: Vec<RawEntity>,
    #[serde(default)]
    reply_to_message: Option<RawReplied>,
    #[serde(default)]
    photo: Vec<RawFile>,
    #[serde(default)]
    document: Option<RawFile>,
    #[serde(default)]
    voice: Option<RawFile>,
    #[serde(default)]
    audio: Option<RawFile>,
    #[serde(default)]
    video: Option<RawFile>,
    #[serde(default)]
    video_note: Option<RawFile>,
    #[serde(default)]
    sticker: Option<RawFile>,
}

#[derive(Deserialize)]
struct RawCallback {
    id: String,
    from: RawUser,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    message: Option<RawCallbackMessage>,
}

#[derive(Deserialize)]
struct RawCallbackMessage {
    message_id: i64,
    chat: RawChat,
}

/// The `update_id` of an update, which every update has (`None`: not an update at all).
pub fn update_id(update: &Value) -> Option<i64> {
    update.get("update_id").and_then(Value::as_i64)
}

/// Reads one update (see the module docs).
pub fn parse(update: &Value) -> Incoming {
    let Ok(raw) = RawUpdate::deserialize(update) else {
        return Incoming::Other;
    };
    if let Some(message) = raw.message {
        return Incoming::Message(message.into());
    }
    if let Some(message) = raw.edited_message {
        return Incoming::Edited(message.into());
    }
    if let Some(callback) = raw.callback_query {
        return Incoming::Callback(Callback {
            id: callback.id,
            from: callback.from.id,
            data: callback.data.unwrap_or_default(),
            message: callback.message.map(|m| (m.chat.id, m.message_id)),
        });
    }
    Incoming::Other
}

/// The part of `text` an entity covers: offsets are in UTF-16 code units.
fn entity_text(text: &str, offset: usize, length: usize) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = offset.saturating_add(length).min(units.len());
    let start = offset.min(end);
    String::from_utf16_lossy(units.get(start..end).unwrap_or_default())
}

impl From<RawMessage> for Message {
    fn from(raw: RawMessage) -> Self {
        let (text, entities) = match (raw.text, raw.caption) {
            (Some(text), _) => (text, raw.entities),
            (None, Some(caption)) => (caption, raw.caption_entities),
            (None, None) => (String::new(), Vec::new()),
        };
        let mut mentions = Vec::new();
        let mut mentioned_ids = Vec::new();
        for entity in &entities {
            match entity.kind.as_str() {
                "mention" => {
                    let name = entity_text(&text, entity.offset, entity.length);
                    mentions.push(name.trim_start_matches('@').to_lowercase());
                }
                "text_mention" => mentioned_ids.extend(entity.user.as_ref().map(|u| u.id)),
                _ => {}
            }
        }
        let file = |kind: &'static str, file: RawFile| Attachment {
            kind,
            file_id: file.file_id,
            file_size: file.file_size,
            file_name: file.file_name,
        };
        // A photo comes in several sizes, smallest first: the largest is the photo.
        let mut attachments: Vec<Attachment> = raw
            .photo
            .into_iter()
            .last()
            .map(|p| file("photo", p))
            .into_iter()
            .collect();
        for (kind, found) in [
            ("document", raw.document),
            ("voice", raw.voice),
            ("audio", raw.audio),
            ("video", raw.video),
            ("video_note", raw.video_note),
            ("sticker", raw.sticker),
        ] {
            attachments.extend(found.map(|f| file(kind, f)));
        }
        Self {
            message_id: raw.message_id,
            chat_id: raw.chat.id,
            chat_type: raw.chat.kind,
            from: raw.from.as_ref().map(|u| u.id),
            from_username: raw.from.as_ref().and_then(|u| u.username.clone()),
            from_is_bot: raw.from.as_ref().is_some_and(|u| u.is_bot),
            date: raw.date,
            text,
            reply_to: raw.reply_to_message.as_ref().map(|r| r.message_id),
            reply_to_from: raw.reply_to_message.and_then(|r| r.from).map(|u| u.id),
            mentions,
            mentioned_ids,
            attachments,
        }
    }
}

impl Message {
    /// The event's text: the message's words, then one line per file it carried.
    pub fn event_text(&self) -> String {
        let mut text = self.text.clone();
        for file in &self.attachments {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[{} {}", file.kind, file.file_id));
            if let Some(name) = &file.file_name {
                text.push_str(&format!(" {name:?}"));
            }
            if let Some(size) = file.file_size {
                text.push_str(&format!(", {size} bytes"));
            }
            text.push(']');
        }
        text
    }

    /// Whether it speaks to the bot: mentions it, or replies to one of its messages.
    pub fn addresses(&self, bot_id: i64, bot_username: Option<&str>) -> bool {
        let named = bot_username.is_some_and(|name| {
            let name = name.to_lowercase();
            self.mentions.contains(&name) || self.text.to_lowercase().contains(&format!("@{name}"))
        });
        named || self.mentioned_ids.contains(&bot_id) || self.reply_to_from == Some(bot_id)
    }

    /// A direct chat with the bot (a group or a channel is not).
    pub fn is_private(&self) -> bool {
        self.chat_type == "private"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(fields: Value) -> Value {
        let mut base = json!({
            "message_id": 7,
            "date": 1_700_000_000,
            "chat": {"id": 42, "type": "private", "first_name": "Ann"},
            "from": {"id": 42, "is_bot": false, "first_name": "Ann", "username": "ann"},
        });
        for (key, value) in fields.as_object().expect("an object") {
            base[key] = value.clone();
        }
        json!({"update_id": 100, "message": base})
    }

    #[test]
    fn messages_captions_files_and_mentions_are_read() {
        let Incoming::Message(plain) = parse(&message(json!({"text": "hello"}))) else {
            panic!("a message")
        };
        assert_eq!(
            (plain.chat_id, plain.from, plain.text.as_str()),
            (42, Some(42), "hello")
        );
        assert!(plain.is_private() && plain.attachments.is_empty());

        let photo = parse(&message(json!({
            "caption": "our cat",
            "photo": [
                {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1000},
                {"file_id": "big", "file_unique_id": "b", "width": 900, "height": 900, "file_size": 90000},
            ],
        })));
        let Incoming::Message(photo) = photo else {
            panic!("a message")
        };
        assert_eq!(photo.text, "our cat");
        assert_eq!(
            photo.event_text(),
            "our cat\n[photo big, 90000 bytes]",
            "the largest size"
        );
        let Incoming::Message(voice) = parse(&message(json!({
            "voice": {"file_id": "v1", "file_unique_id": "v", "duration": 3, "file_size": 5120},
            "document": {"file_id": "d1", "file_unique_id": "d", "file_name": "a.pdf"},
        }))) else {
            panic!("a message")
        };
        assert_eq!(
            voice.event_text(),
            "[document d1 \"a.pdf\"]\n[voice v1, 5120 bytes]"
        );

        // Offsets count UTF-16 units: the emoji before the mention takes two.
        let Incoming::Message(group) = parse(&message(json!({
            "chat": {"id": -100, "type": "supergroup", "title": "Home"},
            "text": "😀 @StewardBot hi",
            "entities": [{"type": "mention", "offset": 3, "length": 11}],
        }))) else {
            panic!("a message")
        };
        assert_eq!(group.mentions, ["stewardbot"]);
        assert!(!group.is_private());
        assert!(group.addresses(555, Some("StewardBot")));
        assert!(!group.addresses(555, Some("otherbot")));
        let Incoming::Message(reply) = parse(&message(json!({
            "text": "yes",
            "reply_to_message": {"message_id": 3, "date": 1, "chat": {"id": 42, "type": "private"}, "from": {"id": 555, "is_bot": true, "first_name": "S"}},
        }))) else {
            panic!("a message")
        };
        assert_eq!((reply.reply_to, reply.reply_to_from), (Some(3), Some(555)));
        assert!(reply.addresses(555, None));
    }

    #[test]
    fn edits_callbacks_and_other_updates_are_told_apart() {
        let edited = json!({"update_id": 5, "edited_message": {
            "message_id": 7, "date": 1, "edit_date": 2, "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": "hello!"}});
        assert!(matches!(parse(&edited), Incoming::Edited(m) if m.text == "hello!"));
        let pressed = json!({"update_id": 6, "callback_query": {
            "id": "cb1", "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat_instance": "x", "data": "confirm:01ABC",
            "message": {"message_id": 9, "date": 1, "chat": {"id": 42, "type": "private"}}}});
        assert_eq!(
            parse(&pressed),
            Incoming::Callback(Callback {
                id: "cb1".into(),
                from: 42,
                data: "confirm:01ABC".into(),
                message: Some((42, 9)),
            })
        );
        let poll = json!({"update_id": 8, "poll": {"id": "p"}});
        assert_eq!(parse(&poll), Incoming::Other);
        assert_eq!(update_id(&poll), Some(8));
        let broken = json!({"update_id": 9, "message": {"text": "no chat"}});
        assert_eq!(parse(&broken), Incoming::Other);
        assert_eq!(update_id(&json!({"message": {}})), None);
    }
}

//! From raw RFC 5322 bytes to what an email event carries. Pure: no I/O.
//!
//! What counts as unprocessable (the event is recorded `dead` with the reason, the watermark
//! moves on): an empty message, bytes that do not parse as a message, a header section over
//! `MAX_HEADER_BYTES`, no `From` address. Everything else is accepted as the parser best
//! understands it: wrong or unknown charsets are decoded with replacement characters, an
//! HTML-only body is converted to text, a message with headers and an empty body is an
//! event with an empty body. Nested multiparts are walked by the parser; every attachment
//! (at any depth) is listed.

use mail_parser::{MessageParser, MimeHeaders};
use sha2::{Digest, Sha256};

/// A header section larger than this is refused (no legitimate mail needs it; it is where
/// parsers get slow and logs get flooded).
const MAX_HEADER_BYTES: usize = 256 * 1024;
/// The body text kept in the event; the rest is cut with a note.
const MAX_BODY_TEXT: usize = 64 * 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedMail {
    /// The Message-ID without angle brackets; a content hash when the message has none.
    pub message_id: String,
    pub has_message_id: bool,
    /// The `From` address, lower-cased.
    pub from: String,
    pub from_name: Option<String>,
    pub to: Vec<String>,
    pub subject: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    pub date: Option<String>,
    pub body: String,
    pub attachments: Vec<Attachment>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attachment {
    /// A file name safe to create: no path separators, no leading dot.
    pub name: String,
    pub content_type: String,
    pub contents: Vec<u8>,
}

impl ParsedMail {
    /// The inbox dedupe key: the Message-ID, or the hash of the raw bytes without one.
    pub fn dedupe_key(&self) -> String {
        format!("email:{}", self.message_id)
    }

    /// The thread: the root of References, else In-Reply-To, else the message itself.
    pub fn thread(&self) -> String {
        self.references
            .first()
            .or(self.in_reply_to.as_ref())
            .unwrap_or(&self.message_id)
            .clone()
    }

    /// The References a reply to this message carries: ours plus this message's id.
    pub fn reply_references(&self) -> Vec<String> {
        let mut refs = self.references.clone();
        if refs.is_empty()
            && let Some(parent) = &self.in_reply_to
        {
            refs.push(parent.clone());
        }
        if self.has_message_id {
            refs.push(self.message_id.clone());
        }
        refs
    }

    pub fn from_domain(&self) -> &str {
        self.from.rsplit_once('@').map_or("", |(_, d)| d)
    }
}

/// The hash-based id of a message without a Message-ID.
pub fn content_id(raw: &[u8]) -> String {
    let digest = Sha256::digest(raw);
    format!(
        "sha256-{}",
        steward_events::to_hex(digest.get(..16).unwrap_or_default())
    )
}

/// The length of the header section (up to and including the blank line).
fn header_len(raw: &[u8]) -> usize {
    raw.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| p + 2))
        .unwrap_or(raw.len())
}

fn clean_id(id: &str) -> String {
    id.trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_owned()
}

/// Makes an attachment name safe to create in a directory.
fn safe_name(name: &str, index: usize) -> String {
    let cleaned: String = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.');
    let cleaned: String = cleaned.chars().take(120).collect();
    if cleaned.is_empty() {
        format!("attachment-{index}")
    } else {
        cleaned
    }
}

/// Parses `raw`, or says why it cannot be processed.
pub fn parse(raw: &[u8]) -> Result<ParsedMail, String> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Err("empty message (0 bytes of content)".into());
    }
    let headers = header_len(raw);
    if headers > MAX_HEADER_BYTES {
        return Err(format!(
            "header section of {headers} bytes exceeds the limit of {MAX_HEADER_BYTES}"
        ));
    }
    let message = MessageParser::default()
        .parse(raw)
        .ok_or("not a parseable RFC 5322 message")?;
    let sender = message.from().and_then(|a| a.first());
    let from = sender
        .and_then(|a| a.address())
        .map(|a| a.trim().to_ascii_lowercase())
        .filter(|a| a.contains('@'))
        .ok_or("no From address")?;
    let from_name = sender.and_then(|a| a.name()).map(str::to_owned);
    let to = message
        .to()
        .map(|list| {
            list.iter()
                .filter_map(|a| a.address())
                .map(str::to_ascii_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let (message_id, has_message_id) = match message.message_id().map(clean_id) {
        Some(id) if !id.is_empty() => (id, true),
        _ => (content_id(raw), false),
    };
    let id_list = |value: &mail_parser::HeaderValue<'_>| -> Vec<String> {
        match value {
            mail_parser::HeaderValue::Text(id) => vec![clean_id(id)],
            mail_parser::HeaderValue::TextList(ids) => ids.iter().map(|id| clean_id(id)).collect(),
            _ => Vec::new(),
        }
    };
    let mut body = message
        .body_text(0)
        .map(|text| text.into_owned())
        .unwrap_or_default();
    if body.len() > MAX_BODY_TEXT {
        let mut cut = MAX_BODY_TEXT;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = body.len();
        body.truncate(cut);
        body.push_str(&format!(
            "\n[… body cut: {total} bytes of text, {cut} kept]"
        ));
    }
    let attachments = message
        .attachments()
        .enumerate()
        .map(|(i, part)| Attachment {
            name: safe_name(part.attachment_name().unwrap_or(""), i + 1),
            content_type: part
                .content_type()
                .map(|ct| match ct.subtype() {
                    Some(sub) => format!("{}/{sub}", ct.ctype()),
                    None => ct.ctype().to_owned(),
                })
                .unwrap_or_else(|| "application/octet-stream".into()),
            contents: part.contents().to_vec(),
        })
        .collect();
    Ok(ParsedMail {
        message_id,
        has_message_id,
        from,
        from_name,
        to,
        subject: message.subject().unwrap_or("").to_owned(),
        in_reply_to: id_list(message.in_reply_to()).into_iter().next(),
        references: id_list(message.references()),
        date: message.date().map(|d| d.to_rfc3339()),
        body,
        attachments,
    })
}

/// The first non-empty line of the body that is not quoted, trimmed: where a reply by mail
/// puts its command (`CONFIRM <token>`).
pub fn first_line(body: &str) -> &str {
    body.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('>'))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail(headers: &str, body: &str) -> Vec<u8> {
        format!("{headers}\r\n\r\n{body}").into_bytes()
    }

    #[test]
    fn threads_follow_references_then_in_reply_to_then_the_message() {
        let root = parse(&mail(
            "From: A <a@example.com>\r\nTo: b@example.com\r\nSubject: hi\r\nMessage-ID: <root@x>",
            "hello",
        ))
        .unwrap();
        assert_eq!(root.thread(), "root@x");
        assert_eq!(root.reply_references(), vec!["root@x"]);
        assert_eq!(root.from, "a@example.com");
        assert_eq!(root.from_name.as_deref(), Some("A"));
        let reply = parse(&mail(
            "From: b@example.com\r\nSubject: Re: hi\r\nMessage-ID: <2@x>\r\nIn-Reply-To: <root@x>\r\nReferences: <root@x>",
            "> hello\r\nyes",
        ))
        .unwrap();
        assert_eq!(reply.thread(), "root@x");
        assert_eq!(reply.reply_references(), vec!["root@x", "2@x"]);
        let deep = parse(&mail(
            "From: a@example.com\r\nMessage-ID: <3@x>\r\nIn-Reply-To: <2@x>\r\nReferences: <root@x> <2@x>",
            "ok",
        ))
        .unwrap();
        assert_eq!(deep.thread(), "root@x");
        assert_eq!(deep.references, vec!["root@x", "2@x"]);
    }

    #[test]
    fn unprocessable_messages_say_why() {
        let table: &[(Vec<u8>, &str)] = &[
            (Vec::new(), "empty message"),
            (b"\r\n\r\n".to_vec(), "empty message"),
            (mail("Subject: no sender", "x"), "no From address"),
            (
                mail(
                    &format!("From: a@example.com\r\nX-Big: {}", "a".repeat(300 * 1024)),
                    "x",
                ),
                "header section",
            ),
        ];
        for (raw, reason) in table {
            let error = parse(raw).expect_err("should be refused");
            assert!(error.contains(reason), "{error}");
        }
    }

    #[test]
    fn bodies_prefer_text_and_convert_html_and_survive_bad_charsets() {
        let html = parse(&mail(
            "From: a@example.com\r\nContent-Type: text/html; charset=utf-8",
            "<html><body><p>Hello <b>there</b></p></body></html>",
        ))
        .unwrap();
        assert!(html.body.contains("Hello"), "{}", html.body);
        assert!(!html.body.contains("<b>"), "{}", html.body);
        let bad_charset = parse(&mail(
            "From: a@example.com\r\nContent-Type: text/plain; charset=x-no-such-charset",
            "caf\u{e9}",
        ))
        .unwrap();
        assert!(bad_charset.body.starts_with("caf"));
        let empty_body = parse(&mail("From: a@example.com\r\nSubject: empty", "")).unwrap();
        assert_eq!(empty_body.body, "");
        assert!(!empty_body.has_message_id);
        assert!(empty_body.message_id.starts_with("sha256-"));
    }

    #[test]
    fn nested_attachments_are_listed_with_safe_names() {
        let raw = "From: a@example.com\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=outer\r\n\r\n--outer\r\nContent-Type: multipart/alternative; boundary=inner\r\n\r\n--inner\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--inner\r\nContent-Type: text/html\r\n\r\n<p>see attached</p>\r\n--inner--\r\n--outer\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"../../etc/passwd\"\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--outer\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment\r\n\r\nxyz\r\n--outer--\r\n";
        let parsed = parse(raw.as_bytes()).unwrap();
        assert_eq!(parsed.body.trim(), "see attached");
        let names: Vec<&str> = parsed.attachments.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["passwd", "attachment-2"]);
        assert_eq!(parsed.attachments[0].contents, b"hello");
        assert_eq!(parsed.attachments[0].content_type, "application/pdf");
    }

    #[test]
    fn the_command_line_skips_quotes_and_blank_lines() {
        assert_eq!(first_line("\r\n  CONFIRM abc \r\n> quoted"), "CONFIRM abc");
        assert_eq!(first_line("> DENY x\n\nok"), "ok");
        assert_eq!(first_line(""), "");
    }
}

//! The `email_*` tools (group `email`): search and read the mailbox (read-only; what they
//! return is someone else's words, so results are marked untrusted and taint the step), and
//! send or reply (not idempotent: two-phase confirmation by default). A sent message's
//! Message-ID derives from the call's ledger key, so the same call is the same message:
//! after a crash, reconciliation looks for it in Sent (see `super::reconcile`).

use futures_util::TryStreamExt;
use serde_json::{Value, json};
use steward_events::ToolOutcome;
use steward_tools::{ExecutionContext, ToolContract, ToolFuture, ToolHandler, ToolRegistryBuilder};

use super::account::bounded;
use super::outbound::{Outgoing, Parent};
use super::parse;
use super::{EmailHandle, EmailParts};

/// Listing results, at most.
const MAX_LIST: usize = 100;

/// What every email tool shares (reading is idempotent, sending is not: the defaults).
fn email_tool(contract: ToolContract) -> ToolContract {
    contract
        .group("group:email")
        .hint("email mail inbox message send reply imap smtp")
        .budget(64 * 1024)
}

/// Adds the four tools; they use whatever account `parts` holds when they run (a reload
/// may replace it).
pub fn register(builder: ToolRegistryBuilder, parts: &EmailHandle) -> ToolRegistryBuilder {
    let addresses =
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50});
    let search = email_tool(ToolContract::read_only(
        "email_search",
        "Search the mailbox; newest first. Returns uid, from, subject, date and message_id of each match.",
        json!({
            "type": "object",
            "properties": {
                "from": {"type": "string"},
                "subject": {"type": "string"},
                "text": {"type": "string", "description": "Words anywhere in the message"},
                "since": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$", "description": "YYYY-MM-DD"},
                "mailbox": {"type": "string", "description": "Default: the configured mailbox"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST}
            },
            "additionalProperties": false
        }),
    ));
    let read = email_tool(ToolContract::read_only(
        "email_read",
        "Read one message by uid (from email_search): headers, text body, attachment names.",
        json!({
            "type": "object",
            "properties": {"uid": {"type": "integer", "minimum": 1}, "mailbox": {"type": "string"}},
            "required": ["uid"],
            "additionalProperties": false
        }),
    ));
    let send = email_tool(ToolContract::write(
        "email_send",
        "Send a new email (plain text) from the assistant's address. Asks the owner first.",
        json!({
            "type": "object",
            "properties": {
                "to": addresses,
                "cc": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
                "subject": {"type": "string", "maxLength": 998},
                "body": {"type": "string"}
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": false
        }),
    ));
    let reply = email_tool(ToolContract::write(
        "email_reply",
        "Reply in the thread of a message in the mailbox (to its sender; `all` adds the other recipients). Asks the owner first.",
        json!({
            "type": "object",
            "properties": {
                "message_id": {"type": "string", "description": "The Message-ID of the message to answer"},
                "body": {"type": "string"},
                "all": {"type": "boolean"},
                "mailbox": {"type": "string"}
            },
            "required": ["message_id", "body"],
            "additionalProperties": false
        }),
    ));
    let tool = |op| EmailTool {
        op,
        parts: parts.clone(),
    };
    builder
        .register(search, tool(Op::Search))
        .register(read, tool(Op::Read))
        .register(send, tool(Op::Send))
        .register(reply, tool(Op::Reply))
}

#[derive(Clone, Copy)]
enum Op {
    Search,
    Read,
    Send,
    Reply,
}

struct EmailTool {
    op: Op,
    parts: EmailHandle,
}

/// A string for an IMAP SEARCH key: quoted, without what could end the quote or the line.
fn quoted(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter(|c| !matches!(c, '"' | '\\' | '\r' | '\n'))
        .collect();
    format!("\"{cleaned}\"")
}

/// `YYYY-MM-DD` as IMAP's `1-Feb-2026`.
fn imap_date(date: &str) -> Option<String> {
    let date = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    Some(date.format("%-d-%b-%Y").to_string())
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl EmailTool {
    fn mailbox<'a>(parts: &'a EmailParts, args: &'a Value) -> &'a str {
        args["mailbox"]
            .as_str()
            .unwrap_or(&parts.account.config.mailbox)
    }

    async fn search(parts: &EmailParts, args: &Value) -> anyhow::Result<Value> {
        let mut criteria = Vec::new();
        if let Some(from) = args["from"].as_str() {
            criteria.push(format!("FROM {}", quoted(from)));
        }
        if let Some(subject) = args["subject"].as_str() {
            criteria.push(format!("SUBJECT {}", quoted(subject)));
        }
        if let Some(text) = args["text"].as_str() {
            criteria.push(format!("TEXT {}", quoted(text)));
        }
        if let Some(since) = args["since"].as_str() {
            let date = imap_date(since)
                .ok_or_else(|| anyhow::anyhow!("since: {since:?} is not a date"))?;
            criteria.push(format!("SINCE {date}"));
        }
        if criteria.is_empty() {
            criteria.push("ALL".into());
        }
        let limit = args["limit"].as_u64().unwrap_or(20) as usize;
        let mut session = parts.account.imap().await?;
        bounded("EXAMINE", session.examine(Self::mailbox(parts, args))).await?;
        let mut uids: Vec<u32> = bounded("UID SEARCH", session.uid_search(criteria.join(" ")))
            .await?
            .into_iter()
            .collect();
        uids.sort_unstable_by(|a, b| b.cmp(a));
        let total = uids.len();
        uids.truncate(limit.min(MAX_LIST));
        let mut found = Vec::new();
        if !uids.is_empty() {
            let set: Vec<String> = uids.iter().map(u32::to_string).collect();
            let stream = bounded(
                "UID FETCH",
                session.uid_fetch(
                    set.join(","),
                    "(UID BODY.PEEK[HEADER.FIELDS (FROM SUBJECT DATE MESSAGE-ID)])",
                ),
            )
            .await?;
            let fetches: Vec<_> = bounded("UID FETCH", stream.try_collect()).await?;
            for fetch in &fetches {
                let header = fetch.header().or_else(|| fetch.body()).unwrap_or_default();
                let parsed = mail_parser::MessageParser::default().parse(header);
                let field = |f: fn(&mail_parser::Message<'_>) -> Option<String>| {
                    parsed.as_ref().and_then(f)
                };
                found.push(json!({
                    "uid": fetch.uid,
                    "from": field(|m| m.from()?.first()?.address().map(str::to_owned)),
                    "subject": field(|m| m.subject().map(str::to_owned)),
                    "date": field(|m| m.date().map(|d| d.to_rfc3339())),
                    "message_id": field(|m| m.message_id().map(str::to_owned)),
                }));
            }
            found.sort_by(|a, b| b["uid"].as_u64().cmp(&a["uid"].as_u64()));
        }
        let _ = session.logout().await;
        Ok(json!({"untrusted": true, "total": total, "messages": found}))
    }

    async fn fetch_one(
        parts: &EmailParts,
        mailbox: &str,
        criteria: &str,
    ) -> anyhow::Result<Option<(u32, Vec<u8>)>> {
        let mut session = parts.account.imap().await?;
        bounded("EXAMINE", session.examine(mailbox)).await?;
        let uids = bounded("UID SEARCH", session.uid_search(criteria)).await?;
        let Some(uid) = uids.into_iter().max() else {
            return Ok(None);
        };
        let stream = bounded(
            "UID FETCH",
            session.uid_fetch(uid.to_string(), "(UID RFC822.SIZE BODY.PEEK[])"),
        )
        .await?;
        let fetches: Vec<_> = bounded("UID FETCH", stream.try_collect()).await?;
        let _ = session.logout().await;
        Ok(fetches
            .iter()
            .find_map(|f| Some((f.uid?, f.body()?.to_vec()))))
    }

    async fn read(parts: &EmailParts, args: &Value) -> anyhow::Result<Value> {
        let uid = args["uid"].as_u64().unwrap_or(0);
        let Some((uid, raw)) =
            Self::fetch_one(parts, Self::mailbox(parts, args), &format!("UID {uid}")).await?
        else {
            anyhow::bail!(
                "no message with uid {uid} in {}",
                Self::mailbox(parts, args)
            );
        };
        if raw.len() as u64 > parts.account.config.max_message_bytes {
            anyhow::bail!(
                "message {uid} has {} bytes, over email.max_message_bytes",
                raw.len()
            );
        }
        let mail = parse::parse(&raw).map_err(|e| anyhow::anyhow!("message {uid}: {e}"))?;
        Ok(json!({
            "untrusted": true,
            "uid": uid,
            "message_id": mail.message_id,
            "from": mail.from,
            "to": mail.to,
            "subject": mail.subject,
            "date": mail.date,
            "body": mail.body,
            "attachments": mail.attachments.iter().map(|a| json!({"name": a.name, "content_type": a.content_type, "bytes": a.contents.len()})).collect::<Vec<_>>(),
        }))
    }

    fn message_id(parts: &EmailParts, ctx: &ExecutionContext) -> String {
        let unique = ctx
            .idempotency_key
            .clone()
            .unwrap_or_else(|| ulid::Ulid::generate().to_string());
        parts.mailer.message_id_for(&unique)
    }

    async fn send(
        parts: &EmailParts,
        args: &Value,
        ctx: &ExecutionContext,
    ) -> anyhow::Result<Value> {
        let mail = Outgoing {
            message_id: Self::message_id(parts, ctx),
            to: strings(&args["to"]),
            cc: strings(&args["cc"]),
            subject: args["subject"].as_str().unwrap_or_default().to_owned(),
            body: args["body"].as_str().unwrap_or_default().to_owned(),
            ..Default::default()
        };
        parts.mailer.send(&mail).await?;
        Ok(json!({"sent": true, "message_id": mail.message_id, "to": mail.to}))
    }

    async fn reply(
        parts: &EmailParts,
        args: &Value,
        ctx: &ExecutionContext,
    ) -> anyhow::Result<Value> {
        let wanted = args["message_id"].as_str().unwrap_or_default();
        let wanted = wanted.trim().trim_start_matches('<').trim_end_matches('>');
        let criteria = format!("HEADER Message-ID {}", quoted(&format!("<{wanted}>")));
        let Some((_, raw)) = Self::fetch_one(parts, Self::mailbox(parts, args), &criteria).await?
        else {
            anyhow::bail!(
                "no message with Message-ID <{wanted}> in {}",
                Self::mailbox(parts, args)
            );
        };
        let original = parse::parse(&raw).map_err(|e| anyhow::anyhow!("the original: {e}"))?;
        let own = parts.mailer.address().to_ascii_lowercase();
        let cc = if args["all"].as_bool().unwrap_or(false) {
            original
                .to
                .iter()
                .filter(|a| **a != own && **a != original.from)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let references = original.reply_references();
        let mail = Outgoing {
            cc,
            ..Outgoing::reply(
                Parent::of_mail(&original, &references),
                Self::message_id(parts, ctx),
                original.from.clone(),
                args["body"].as_str().unwrap_or_default().to_owned(),
            )
        };
        parts.mailer.send(&mail).await?;
        Ok(
            json!({"sent": true, "message_id": mail.message_id, "to": mail.to, "in_reply_to": wanted}),
        )
    }
}

impl ToolHandler for EmailTool {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parts = self.parts.get();
            let result = match self.op {
                Op::Search => Self::search(&parts, args).await,
                Op::Read => Self::read(&parts, args).await,
                Op::Send => Self::send(&parts, args, ctx).await,
                Op::Reply => Self::reply(&parts, args, ctx).await,
            };
            match result {
                Ok(content) => ToolOutcome::ok(content),
                Err(e) => ToolOutcome::error(format!("{e:#}")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_strings_cannot_break_out_of_their_quotes() {
        assert_eq!(quoted("a\"b\\c\r\nd"), "\"abcd\"");
        assert_eq!(imap_date("2026-02-01").as_deref(), Some("1-Feb-2026"));
        assert_eq!(imap_date("yesterday"), None);
    }
}

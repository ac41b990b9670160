//! The `email_*` tools (group `email`): search and read the mailbox (read-only; what they
//! return is someone else's words, so their contract marks the results untrusted, which taints the step), and
//! send or reply (not idempotent: two-phase confirmation by default). A sent message's
//! Message-ID derives from the call's ledger key, so the same call is the same message:
//! after a crash, reconciliation looks for it in Sent (see `super::reconcile`).

use futures_util::TryStreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;
use steward_tools::{
    Applies, ExecutionContext, ToolContract, ToolFuture, ToolHandler, ToolRegistryBuilder,
};

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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    from: Option<String>,
    subject: Option<String>,
    /// Words anywhere in the message
    text: Option<String>,
    /// YYYY-MM-DD
    #[schemars(pattern(r"^\d{4}-\d{2}-\d{2}$"))]
    since: Option<String>,
    /// Default: the configured mailbox
    mailbox: Option<String>,
    #[schemars(range(min = 1, max = MAX_LIST))]
    limit: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    #[schemars(range(min = 1))]
    uid: u32,
    mailbox: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    #[schemars(length(min = 1, max = 50))]
    to: Vec<String>,
    #[serde(default)]
    #[schemars(length(max = 50))]
    cc: Vec<String>,
    #[schemars(length(max = 998))]
    subject: String,
    body: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplyArgs {
    /// The Message-ID of the message to answer
    message_id: String,
    body: String,
    #[serde(default)]
    all: bool,
    mailbox: Option<String>,
}

/// Adds the four tools; they use whatever account `parts` holds when they run (a reload
/// may replace it).
pub fn register(builder: ToolRegistryBuilder, parts: &EmailHandle) -> ToolRegistryBuilder {
    let search = email_tool(ToolContract::read_only(
        "email_search",
        "Search the mailbox; newest first. Returns uid, from, subject, date and message_id of each match.",
        steward_tools::args::schema::<SearchArgs>(),
    )
    .returns_untrusted(Applies::Always));
    let read = email_tool(
        ToolContract::read_only(
            "email_read",
            "Read one message by uid (from email_search): headers, text body, attachment names.",
            steward_tools::args::schema::<ReadArgs>(),
        )
        .returns_untrusted(Applies::Always),
    );
    let send = email_tool(
        ToolContract::write(
            "email_send",
            "Send a new email (plain text) from the assistant's address. Asks the owner first.",
            steward_tools::args::schema::<SendArgs>(),
        )
        .sends_out(Applies::Always),
    );
    let reply = email_tool(ToolContract::write(
        "email_reply",
        "Reply in the thread of a message in the mailbox (to its sender; `all` adds the other recipients). Asks the owner first.",
        steward_tools::args::schema::<ReplyArgs>(),
    )
    .sends_out(Applies::Always));
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

impl EmailTool {
    /// The mailbox a call names, or the configured one.
    fn mailbox<'a>(parts: &'a EmailParts, named: &'a Option<String>) -> &'a str {
        named.as_deref().unwrap_or(&parts.account.config.mailbox)
    }

    async fn search(parts: &EmailParts, args: SearchArgs) -> anyhow::Result<Value> {
        let mut criteria = Vec::new();
        if let Some(from) = &args.from {
            criteria.push(format!("FROM {}", quoted(from)));
        }
        if let Some(subject) = &args.subject {
            criteria.push(format!("SUBJECT {}", quoted(subject)));
        }
        if let Some(text) = &args.text {
            criteria.push(format!("TEXT {}", quoted(text)));
        }
        if let Some(since) = &args.since {
            let date = imap_date(since)
                .ok_or_else(|| anyhow::anyhow!("since: {since:?} is not a date"))?;
            criteria.push(format!("SINCE {date}"));
        }
        if criteria.is_empty() {
            criteria.push("ALL".into());
        }
        let limit = args.limit.unwrap_or(20) as usize;
        let mut session = parts.account.imap().await?;
        bounded(
            "EXAMINE",
            session.examine(Self::mailbox(parts, &args.mailbox)),
        )
        .await?;
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
        Ok(json!({"total": total, "messages": found}))
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

    async fn read(parts: &EmailParts, args: ReadArgs) -> anyhow::Result<Value> {
        let mailbox = Self::mailbox(parts, &args.mailbox);
        let uid = args.uid;
        let Some((uid, raw)) = Self::fetch_one(parts, mailbox, &format!("UID {uid}")).await? else {
            anyhow::bail!("no message with uid {uid} in {mailbox}");
        };
        if raw.len() as u64 > parts.account.config.max_message_bytes {
            anyhow::bail!(
                "message {uid} has {} bytes, over email.max_message_bytes",
                raw.len()
            );
        }
        let mail = parse::parse(&raw).map_err(|e| anyhow::anyhow!("message {uid}: {e}"))?;
        Ok(json!({
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
        args: SendArgs,
        ctx: &ExecutionContext,
    ) -> anyhow::Result<Value> {
        let mail = Outgoing {
            message_id: Self::message_id(parts, ctx),
            to: args.to,
            cc: args.cc,
            subject: args.subject,
            body: args.body,
            ..Default::default()
        };
        parts.mailer.send(&mail).await?;
        Ok(json!({"sent": true, "message_id": mail.message_id, "to": mail.to}))
    }

    async fn reply(
        parts: &EmailParts,
        args: ReplyArgs,
        ctx: &ExecutionContext,
    ) -> anyhow::Result<Value> {
        let mailbox = Self::mailbox(parts, &args.mailbox);
        let wanted = args
            .message_id
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>');
        let criteria = format!("HEADER Message-ID {}", quoted(&format!("<{wanted}>")));
        let Some((_, raw)) = Self::fetch_one(parts, mailbox, &criteria).await? else {
            anyhow::bail!("no message with Message-ID <{wanted}> in {mailbox}");
        };
        let original = parse::parse(&raw).map_err(|e| anyhow::anyhow!("the original: {e}"))?;
        let own = parts.mailer.address().to_ascii_lowercase();
        let cc = if args.all {
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
                args.body.clone(),
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
            use steward_tools::args::parse;
            let result = match self.op {
                Op::Search => match parse(args) {
                    Ok(args) => Self::search(&parts, args).await,
                    Err(refused) => return refused,
                },
                Op::Read => match parse(args) {
                    Ok(args) => Self::read(&parts, args).await,
                    Err(refused) => return refused,
                },
                Op::Send => match parse(args) {
                    Ok(args) => Self::send(&parts, args, ctx).await,
                    Err(refused) => return refused,
                },
                Op::Reply => match parse(args) {
                    Ok(args) => Self::reply(&parts, args, ctx).await,
                    Err(refused) => return refused,
                },
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

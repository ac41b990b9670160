//! Sending: one message is built once (lettre), submitted over SMTP, then the very same
//! bytes are filed in the Sent mailbox (IMAP APPEND). The Message-ID is chosen by the
//! caller before anything leaves the machine — for tool calls it derives from the ledger
//! key — so a crash at any point can be settled afterwards by looking for that Message-ID
//! in Sent ([`Mailer::find_sent`]).
//!
//! Order and what a crash leaves: SMTP accepted → (crash: not in Sent; the action stays
//! `unknown`, never resent) → appended to Sent → (crash: found in Sent; settled
//! `completed`) → recorded.

use std::time::Duration;

use anyhow::{Context, anyhow};
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use steward_config::MailTls;
use tracing::{info, warn};

use super::account::{Account, bounded};

const SMTP_TIMEOUT: Duration = Duration::from_secs(60);

/// One message to send.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outgoing {
    /// Without angle brackets.
    pub message_id: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub subject: String,
    pub body: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
}

/// The mail a reply answers: what threading needs of it.
#[derive(Clone, Copy, Debug)]
pub struct Parent<'a> {
    pub subject: &'a str,
    /// `None` when the parent had no Message-ID (a reply then carries no In-Reply-To).
    pub message_id: Option<&'a str>,
    /// The References a reply carries: the parent's chain and the parent itself.
    pub references: &'a [String],
}

impl<'a> Parent<'a> {
    /// A parsed mail as a parent.
    pub fn of_mail(mail: &'a super::parse::ParsedMail, references: &'a [String]) -> Self {
        Self {
            subject: &mail.subject,
            message_id: mail.has_message_id.then_some(mail.message_id.as_str()),
            references,
        }
    }

    /// An email event's payload as a parent (its Message-ID is a `sha256-` hash when the
    /// mail had none).
    pub fn of_event(email: &'a steward_events::EmailMessage) -> Self {
        Self {
            subject: &email.subject,
            message_id: (!email.message_id.starts_with("sha256-"))
                .then_some(email.message_id.as_str()),
            references: &email.reply_references,
        }
    }
}

impl Outgoing {
    /// A reply to `parent`, in its thread: one `Re:`, In-Reply-To, the whole References.
    pub fn reply(parent: Parent<'_>, message_id: String, to: String, body: String) -> Self {
        Self {
            message_id,
            to: vec![to],
            cc: Vec::new(),
            subject: reply_subject(parent.subject),
            body,
            in_reply_to: parent.message_id.map(str::to_owned),
            references: parent.references.to_vec(),
        }
    }
}

#[derive(Clone)]
pub struct Mailer {
    account: Account,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer")
            .field("smtp", &self.account.config.smtp)
            .finish_non_exhaustive()
    }
}

/// "Re: " once, however many replies deep: prefixes already there (`Re: Re: RE:`) become
/// one. Any subject is fine: the prefix test looks at characters, not bytes (`Grüße`,
/// `Привет` and `🎉` start with multi-byte characters), and control characters (a folded
/// or hostile subject) become spaces.
fn reply_subject(subject: &str) -> String {
    let cleaned: String = subject
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut rest = cleaned.trim();
    while let Some(prefix) = rest.get(..3)
        && prefix.eq_ignore_ascii_case("re:")
    {
        rest = rest.get(3..).unwrap_or("").trim_start();
    }
    format!("Re: {rest}")
}

/// Whether `id` can stand in `In-Reply-To` / `References` as `<id>`: RFC 5322's
/// `dot-atom-text` characters, `@` and a domain literal's brackets. Anything else (spaces,
/// angle brackets, parentheses that read as comments, non-ASCII) would break the list it
/// is in, so such an id is left out rather than sent mangled.
pub fn is_header_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.@[]".contains(&b))
}

/// The `References` value of a reply: the whole chain, oldest first, each id once
/// (RFC 5322 §3.6.4). lettre's `references()` replaces the header on each call, so the
/// chain is one value; lettre folds it at the spaces.
fn references_value(references: &[String]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<String> = references
        .iter()
        .filter(|id| is_header_id(id) && seen.insert(id.as_str()))
        .map(|id| format!("<{id}>"))
        .collect();
    (!ids.is_empty()).then(|| ids.join(" "))
}

/// Builds `mail` as sent from `from`: headers, threading and a plain-text body. Pure (no
/// I/O), so any reply or request for confirmation can be composed in tests and fuzzing.
pub fn compose(from: &str, mail: &Outgoing) -> anyhow::Result<Message> {
    let mut builder = Message::builder()
        .message_id(Some(format!("<{}>", mail.message_id)))
        .from(from.parse().context("email.address")?)
        .subject(mail.subject.clone());
    for to in &mail.to {
        builder = builder.to(to.parse().with_context(|| format!("recipient {to:?}"))?);
    }
    for cc in &mail.cc {
        builder = builder.cc(cc.parse().with_context(|| format!("recipient {cc:?}"))?);
    }
    if let Some(parent) = mail.in_reply_to.as_deref().filter(|id| is_header_id(id)) {
        builder = builder.in_reply_to(format!("<{parent}>"));
    }
    if let Some(references) = references_value(&mail.references) {
        builder = builder.references(references);
    }
    builder
        .header(ContentType::TEXT_PLAIN)
        .body(mail.body.clone())
        .context("cannot build the message")
}

impl Mailer {
    pub fn new(account: Account) -> anyhow::Result<Self> {
        let smtp = &account.config.smtp;
        let parameters = || -> anyhow::Result<TlsParameters> {
            let mut builder = TlsParameters::builder(smtp.host.clone());
            if !account.extra_roots_pem.is_empty() {
                builder = builder.add_root_certificate(
                    Certificate::from_pem(&account.extra_roots_pem)
                        .context("email.ca_file for SMTP")?,
                );
            }
            builder.build_rustls().context("SMTP TLS setup")
        };
        let tls = match smtp.tls {
            MailTls::Implicit => Tls::Wrapper(parameters()?),
            MailTls::StartTls => Tls::Required(parameters()?),
            MailTls::None => Tls::None,
        };
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.host.clone())
            .port(smtp.port)
            .tls(tls)
            .credentials(Credentials::new(
                account.config.username.clone(),
                account.password().to_owned(),
            ))
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(Self { account, transport })
    }

    /// Connects, secures and logs in to the SMTP server, then quits (`steward doctor`).
    pub async fn check(&self) -> anyhow::Result<()> {
        match self.transport.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(anyhow!("SMTP connection did not answer NOOP")),
            Err(e) => Err(anyhow!(
                "SMTP {}:{}: {e}",
                self.account.config.smtp.host,
                self.account.config.smtp.port
            )),
        }
    }

    /// The address mail is sent from.
    pub fn address(&self) -> &str {
        &self.account.config.address
    }

    /// A Message-ID in the assistant's domain for `unique` (a ledger key, an event id).
    pub fn message_id_for(&self, unique: &str) -> String {
        let domain = self
            .address()
            .rsplit_once('@')
            .map_or("steward.invalid", |(_, d)| d);
        format!("{unique}.steward@{domain}")
    }

    /// Submits `mail` over SMTP and files it in Sent. Err before SMTP accepted means it was
    /// not sent; a failure to file it after is logged, not an error (it was sent).
    pub async fn send(&self, mail: &Outgoing) -> anyhow::Result<()> {
        let message = compose(self.address(), mail)?;
        let bytes = message.formatted();
        self.transport
            .send_raw(message.envelope(), &bytes)
            .await
            .map_err(|e| {
                anyhow!(
                    "SMTP {}:{} refused or failed: {e}",
                    self.account.config.smtp.host,
                    self.account.config.smtp.port
                )
            })?;
        info!(message_id = %mail.message_id, to = ?mail.to, "email sent");
        crate::faults::point("email.smtp_accepted");
        if let Err(e) = self.file_in_sent(&bytes).await {
            warn!(message_id = %mail.message_id, error = %format!("{e:#}"), "sent, but could not file a copy in the Sent mailbox");
        }
        crate::faults::point("email.filed_in_sent");
        Ok(())
    }

    async fn file_in_sent(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let mut session = self.account.imap().await?;
        let sent = &self.account.config.sent_mailbox;
        bounded(
            "APPEND",
            session.append(sent, Some("(\\Seen)"), None, bytes),
        )
        .await?;
        let _ = session.logout().await;
        Ok(())
    }

    /// Whether a message with this Message-ID is in the Sent mailbox.
    pub async fn find_sent(&self, message_id: &str) -> anyhow::Result<bool> {
        let mut session = self.account.imap().await?;
        bounded(
            "EXAMINE",
            session.examine(&self.account.config.sent_mailbox),
        )
        .await?;
        let found = bounded(
            "UID SEARCH",
            session.uid_search(format!(
                "HEADER Message-ID \"<{}>\"",
                message_id.replace('"', "")
            )),
        )
        .await?;
        let _ = session.logout().await;
        Ok(!found.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_subjects_get_one_re() {
        assert_eq!(reply_subject("Lunch"), "Re: Lunch");
        assert_eq!(reply_subject("Re: Lunch"), "Re: Lunch");
        assert_eq!(reply_subject("RE: Lunch"), "Re: Lunch");
        assert_eq!(reply_subject("Re: Re: RE:Lunch"), "Re: Lunch");
        assert_eq!(reply_subject(""), "Re: ");
        assert_eq!(reply_subject("Grüße aus Köln"), "Re: Grüße aus Köln");
        assert_eq!(reply_subject("Привет"), "Re: Привет");
        assert_eq!(reply_subject("🎉 Party"), "Re: 🎉 Party");
        assert_eq!(reply_subject("ü"), "Re: ü");
        assert_eq!(reply_subject("Re: Привет"), "Re: Привет");
        assert_eq!(reply_subject("line\r\nBcc: x@y"), "Re: line  Bcc: x@y");
    }

    fn outgoing(references: &[&str]) -> Outgoing {
        Outgoing {
            message_id: "answer.1.steward@example.net".into(),
            to: vec!["owner@example.com".into()],
            subject: reply_subject("Grüße"),
            body: "Done.\n".into(),
            in_reply_to: references.last().map(|r| (*r).to_owned()),
            references: references.iter().map(|r| (*r).to_owned()).collect(),
            ..Default::default()
        }
    }

    /// Reads the composed bytes back as a mail client would.
    fn threading_of(message: &Message) -> (Option<String>, Vec<String>) {
        let bytes = message.formatted();
        let parsed = mail_parser::MessageParser::default()
            .parse(&bytes)
            .expect("a composed message parses");
        let ids = |value: &mail_parser::HeaderValue<'_>| -> Vec<String> {
            match value {
                mail_parser::HeaderValue::Text(id) => vec![id.to_string()],
                mail_parser::HeaderValue::TextList(ids) => {
                    ids.iter().map(|id| id.to_string()).collect()
                }
                _ => Vec::new(),
            }
        };
        (
            ids(parsed.in_reply_to()).into_iter().next(),
            ids(parsed.references()),
        )
    }

    #[test]
    fn a_reply_carries_the_whole_references_chain() {
        let chain: Vec<String> = (0..40)
            .map(|i| format!("m{i}.long-thread@example.com"))
            .collect();
        let refs: Vec<&str> = chain.iter().map(String::as_str).collect();
        let message = compose("steward@example.net", &outgoing(&refs)).unwrap();
        let (parent, references) = threading_of(&message);
        assert_eq!(parent.as_deref(), Some("m39.long-thread@example.com"));
        assert_eq!(references, chain);
        let formatted = String::from_utf8(message.formatted()).unwrap();
        assert!(
            formatted.lines().all(|line| line.len() <= 998),
            "no header line over RFC 5322's limit"
        );

        let (_, two) =
            threading_of(&compose("s@example.net", &outgoing(&["root@x", "parent@x"])).unwrap());
        assert_eq!(two, ["root@x", "parent@x"]);
    }

    #[test]
    fn ids_that_would_break_the_header_are_left_out() {
        let message = compose(
            "s@example.net",
            &outgoing(&[
                "root@x",
                "with space@x",
                "<angle>@x",
                "root@x",
                "ünï@x",
                "",
                "parent@x",
            ]),
        )
        .unwrap();
        let (parent, references) = threading_of(&message);
        assert_eq!(parent.as_deref(), Some("parent@x"));
        assert_eq!(references, ["root@x", "parent@x"]);
    }
}

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

/// "Re: " once, however many replies deep.
pub fn reply_subject(subject: &str) -> String {
    let trimmed = subject.trim();
    if trimmed.len() >= 3 && trimmed[..3].eq_ignore_ascii_case("re:") {
        trimmed.to_owned()
    } else {
        format!("Re: {trimmed}")
    }
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

    fn build(&self, mail: &Outgoing) -> anyhow::Result<Message> {
        let mut builder = Message::builder()
            .message_id(Some(format!("<{}>", mail.message_id)))
            .from(self.address().parse().context("email.address")?)
            .subject(mail.subject.clone());
        for to in &mail.to {
            builder = builder.to(to.parse().with_context(|| format!("recipient {to:?}"))?);
        }
        for cc in &mail.cc {
            builder = builder.cc(cc.parse().with_context(|| format!("recipient {cc:?}"))?);
        }
        if let Some(parent) = &mail.in_reply_to {
            builder = builder.in_reply_to(format!("<{parent}>"));
        }
        for reference in &mail.references {
            builder = builder.references(format!("<{reference}>"));
        }
        builder
            .header(ContentType::TEXT_PLAIN)
            .body(mail.body.clone())
            .context("cannot build the message")
    }

    /// Submits `mail` over SMTP and files it in Sent. Err before SMTP accepted means it was
    /// not sent; a failure to file it after is logged, not an error (it was sent).
    pub async fn send(&self, mail: &Outgoing) -> anyhow::Result<()> {
        let message = self.build(mail)?;
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
        assert_eq!(reply_subject("RE: Lunch"), "RE: Lunch");
        assert_eq!(reply_subject(""), "Re: ");
    }
}

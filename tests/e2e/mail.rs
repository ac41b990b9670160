//! The real mail stack for the email tests (Dovecot + OpenSMTPD on 127.0.0.1, started once
//! per machine by `tests/mail/stack.sh`), and a mail client for the tests' side: deliver by
//! SMTP, read any mailbox by IMAP. Every test uses its own addresses, so tests never share
//! a mailbox and run in parallel.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use lettre::address::Envelope;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

pub const PASSWORD: &str = "secret";
pub const PASSWORD_ENV: &str = "STEWARD_TEST_MAIL_PASSWORD";
/// The authserv-id the tests' "MTA" stamps on authenticated mail.
pub const AUTHSERV: &str = "mx.example.test";

pub fn stack_dir() -> String {
    std::env::var("STEWARD_MAIL_STACK_DIR").unwrap_or_else(|_| "/tmp/steward-mail-stack".into())
}

/// Starts the stack unless it runs already.
pub fn stack() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mail/stack.sh");
        let output = std::process::Command::new("bash")
            .args([script, "start"])
            .output()
            .expect("run tests/mail/stack.sh");
        assert!(
            output.status.success(),
            "the mail stack did not start (install dovecot-imapd dovecot-lmtpd dovecot-submissiond opensmtpd): {}",
            String::from_utf8_lossy(&output.stderr)
        );
    });
}

/// A fresh address for this test.
pub fn address(role: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{role}-{}-{}@example.test",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The `[email]` section for an assistant at `assistant` owned by `owner`: IMAP over
/// implicit TLS and SMTP submission with STARTTLS, trusting the stack's certificate.
pub fn config(assistant: &str, owner: &str, extra: &str) -> String {
    format!(
        "[email]\nimap_host = \"127.0.0.1\"\nimap_port = 10993\nimap_tls = \"implicit\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = 10587\nsmtp_tls = \"starttls\"\nusername = \"{assistant}\"\npassword_env = \"{PASSWORD_ENV}\"\naddress = \"{assistant}\"\nca_file = \"{}/cert.pem\"\nowners = [\"{owner}\"]\ntrusted_authserv_ids = [\"{AUTHSERV}\"]\n{extra}\n",
        stack_dir()
    )
}

/// A plain-text message; `authenticated` adds the stack MTA's pass for the From domain.
pub fn message(
    from: &str,
    to: &str,
    subject: &str,
    body: &str,
    extra_headers: &str,
    authenticated: bool,
) -> String {
    let domain = from.rsplit_once('@').map_or("", |(_, d)| d);
    let results = if authenticated {
        format!(
            "Authentication-Results: {AUTHSERV}; dkim=pass header.d={domain}; spf=pass smtp.mailfrom={from}\r\n"
        )
    } else {
        String::new()
    };
    let id = format!("<{}@test.example.test>", ulid::Ulid::generate());
    format!(
        "{results}From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: {id}\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\n{extra_headers}\r\n{body}\r\n"
    )
}

pub fn message_id_of(raw: &str) -> String {
    raw.lines()
        .find_map(|l| l.strip_prefix("Message-ID: "))
        .unwrap()
        .trim()
        .trim_matches(['<', '>'])
        .to_owned()
}

/// Delivers raw bytes by SMTP (OpenSMTPD → LMTP → Dovecot).
pub async fn deliver(from: &str, to: &str, raw: &[u8]) {
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1")
        .port(10025)
        .timeout(Some(Duration::from_secs(60)))
        .build();
    let envelope = Envelope::new(Some(from.parse().unwrap()), vec![to.parse().unwrap()]).unwrap();
    transport
        .send_raw(&envelope, raw)
        .await
        .expect("SMTP delivery");
}

pub type Session = async_imap::Session<tokio::net::TcpStream>;

pub async fn imap(user: &str) -> Session {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", 10143))
        .await
        .unwrap();
    let mut client = async_imap::Client::new(tcp);
    client.read_response().await.unwrap();
    client
        .login(user, PASSWORD)
        .await
        .map_err(|(e, _)| e)
        .unwrap()
}

/// Every message in `mailbox` of `user`, oldest first.
pub async fn messages(user: &str, mailbox: &str) -> Vec<String> {
    let mut session = imap(user).await;
    let Ok(selected) = session.examine(mailbox).await else {
        return Vec::new();
    };
    if selected.exists == 0 {
        return Vec::new();
    }
    let fetches: Vec<_> = session
        .uid_fetch("1:*", "(UID BODY.PEEK[])")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let _ = session.logout().await;
    fetches
        .iter()
        .filter_map(|f| f.body().map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}

/// Waits (60 s at most) until `mailbox` of `user` has messages for which `done` holds.
pub async fn wait_for_messages(
    user: &str,
    mailbox: &str,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = messages(user, mailbox).await;
        if done(&found) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} in {user}/{mailbox}: {found:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A header's value in a raw message (unfolded), case-insensitively.
pub fn header(raw: &str, name: &str) -> Option<String> {
    let mut value: Option<String> = None;
    for line in raw.lines() {
        if line.is_empty() {
            break;
        }
        if let Some(current) = value.as_mut() {
            if line.starts_with([' ', '\t']) {
                current.push(' ');
                current.push_str(line.trim());
                continue;
            }
            return value;
        }
        if let Some((key, rest)) = line.split_once(':')
            && key.eq_ignore_ascii_case(name)
        {
            value = Some(rest.trim().to_owned());
        }
    }
    value
}

/// The decoded text body of a raw message (quoted-printable and base64 undone).
pub fn body(raw: &str) -> String {
    mail_parser::MessageParser::default()
        .parse(raw.as_bytes())
        .and_then(|m| m.body_text(0).map(|b| b.into_owned()))
        .unwrap_or_default()
}

//! Email benchmark (figures for the email issue, not assertions), against the real mail
//! stack (`tests/mail/stack.sh`: Dovecot + OpenSMTPD on 127.0.0.1):
//! - arrival → event: a mail accepted by SMTP, until the daemon has it as a durable event
//!   (p50/p99 over 100 mails sent one at a time; Dovecot's IDLE notification adds ~0.5 s);
//! - a burst: 1,000 mails delivered into the mailbox at once, until every one is an event;
//! - RSS of the daemon with its IMAP connection idle.
//!
//! The sender is not an owner, so no answers are mailed back: this measures intake.
//! Run: `cargo bench -p steward-daemon --bench email` (add `-- quick` for 20 / 200 mails).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::Path;
use std::time::Duration;

use lettre::address::Envelope;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use steward_protocol::client::Client;
use steward_protocol::{Request, Response, StatusReport};
use tokio::time::Instant;

mod support;
use support::{ms, percentile, spawn_daemon, status_mb};

async fn status(socket: &Path) -> StatusReport {
    match Client::call(socket, &Request::Status)
        .await
        .unwrap()
        .into_iter()
        .next()
    {
        Some(Response::Status { status }) => status,
        other => panic!("{other:?}"),
    }
}

async fn wait_until(socket: &Path, done: impl Fn(&StatusReport) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if done(&status(socket).await) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn message(from: &str, to: &str, n: usize) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: {to}\r\nSubject: bench {n}\r\nMessage-ID: <bench-{n}-{}@bench.test>\r\n\r\nMail number {n}.\r\n",
        ulid::Ulid::generate()
    )
    .into_bytes()
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (single, burst) = if quick { (20, 200) } else { (100, 1000) };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mail/stack.sh");
    assert!(
        std::process::Command::new("bash")
            .args([script, "start"])
            .status()
            .unwrap()
            .success()
    );
    let stack = std::env::var("STEWARD_MAIL_STACK_DIR")
        .unwrap_or_else(|_| "/tmp/steward-mail-stack".into());
    let stamp = ulid::Ulid::generate().to_string().to_lowercase();
    let assistant = format!("bench-{stamp}@example.test");
    let sender = format!("someone-{stamp}@example.test");
    let config = format!(
        "[email]\nimap_host = \"127.0.0.1\"\nimap_port = 10993\nimap_tls = \"implicit\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = 10587\nusername = \"{assistant}\"\npassword_env = \"BENCH_MAIL_PASSWORD\"\naddress = \"{assistant}\"\nca_file = \"{stack}/cert.pem\"\nrequire_authentication = false\n\n[inbox]\ncapacity = 100000\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = spawn_daemon(dir.path(), &config, &[("BENCH_MAIL_PASSWORD", "secret")]);
    let socket = dir.path().join("steward.sock");
    let idle = |s: &StatusReport| {
        s.channels
            .iter()
            .any(|c| c.name == "email" && c.state == "idle")
    };
    wait_until(&socket, idle).await;

    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1")
        .port(10025)
        .build();
    let envelope = Envelope::new(
        Some(sender.parse().unwrap()),
        vec![assistant.parse().unwrap()],
    )
    .unwrap();

    let mut latencies = Vec::new();
    for n in 0..single {
        wait_until(&socket, idle).await;
        let before = status(&socket).await.events_total;
        transport
            .send_raw(&envelope, &message(&sender, &assistant, n))
            .await
            .unwrap();
        let accepted = Instant::now();
        wait_until(&socket, |s| s.events_total > before).await;
        latencies.push(accepted.elapsed());
    }
    latencies.sort();
    println!(
        "arrival -> event over {single} mails: p50 {} p99 {} (max {})",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "RSS with the IMAP connection idle: {:.1} MB",
        status_mb(child.id(), "VmRSS:")
    );

    // The burst is put straight into the mailbox (IMAP APPEND on one connection, as an MDA
    // would deliver it): OpenSMTPD here accepts only a few mails a second, which would
    // measure the MTA, not the daemon.
    let before = status(&socket).await.events_total;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", 10143))
        .await
        .unwrap();
    let mut client = async_imap::Client::new(tcp);
    client.read_response().await.unwrap();
    let mut session = client
        .login(&assistant, "secret")
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let started = Instant::now();
    for n in 0..burst {
        session
            .append(
                "INBOX",
                None,
                None,
                message(&sender, &assistant, 10_000 + n),
            )
            .await
            .unwrap();
    }
    let delivered = started.elapsed();
    wait_until(&socket, |s| s.events_total >= before + burst as u64).await;
    let all = started.elapsed();
    println!(
        "{burst} mails at once: delivered into the mailbox in {:.2} s; all events after {:.2} s ({:.0} mails/s end to end; {:.2} s after the last was delivered)",
        delivered.as_secs_f64(),
        all.as_secs_f64(),
        burst as f64 / all.as_secs_f64(),
        (all - delivered).as_secs_f64()
    );
    println!("peak RSS: {:.1} MB", status_mb(child.id(), "VmHWM:"));
    child.kill().unwrap();
    child.wait().unwrap();

    // A backlog: the mail waits while the daemon is down; from start until all are events.
    for n in 0..burst {
        session
            .append(
                "INBOX",
                None,
                None,
                message(&sender, &assistant, 20_000 + n),
            )
            .await
            .unwrap();
    }
    let (mut child, ready) =
        spawn_daemon(dir.path(), &config, &[("BENCH_MAIL_PASSWORD", "secret")]);
    let started = Instant::now();
    wait_until(&socket, |s| s.events_total >= before + 2 * burst as u64).await;
    println!(
        "a backlog of {burst} mails at start: all events {:.2} s after READY ({:.0} mails/s; start-up {:.0} ms)",
        started.elapsed().as_secs_f64(),
        burst as f64 / started.elapsed().as_secs_f64(),
        ready.as_secs_f64() * 1000.0
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

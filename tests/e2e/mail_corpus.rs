//! Real mail shapes, composed by Python's `email` package and sent with `smtplib` through the
//! real SMTP server (OpenSMTPD → Dovecot): multipart/alternative, quoted-printable,
//! ISO-8859-1 and Shift_JIS bodies and subjects, HTML only, an encoded display name, an
//! RFC 2231 attachment name, emoji and Cyrillic subjects, a reply deep in a thread. Each
//! becomes exactly one event with the decoded text, and each answer goes back threaded
//! with the whole References chain.

use std::process::Command;

use serde_json::{Value, json};

use crate::mail;
use crate::scripted_model::{ScriptedModel, sse};
use crate::support::TestDaemon;

/// Writes every shape to DIR/N.eml and prints a manifest: for each, the Message-ID, the
/// subject as written, a phrase of the decoded body and the References it carries.
const COMPOSE: &str = r#"
import json, sys
from email.message import EmailMessage
from email.headerregistry import Address
from email.utils import make_msgid, formatdate
from email import charset as _charset

out_dir, owner, assistant, authserv = sys.argv[1:5]
shapes = []

def base(subject, display=None):
    m = EmailMessage()
    m["Authentication-Results"] = "%s; dkim=pass header.d=%s" % (authserv, owner.split("@")[1])
    user, domain = owner.split("@")
    m["From"] = Address(display or "", user, domain) if display else owner
    m["To"] = assistant
    m["Subject"] = subject
    m["Date"] = formatdate()
    m["Message-ID"] = make_msgid(domain="corpus.example.test")
    return m

def add(name, m, needle, references=()):
    raw = m.as_bytes()
    path = "%s/%d.eml" % (out_dir, len(shapes))
    open(path, "wb").write(raw)
    shapes.append({"name": name, "path": path, "message_id": m["Message-ID"].strip("<>"),
                   "subject": str(m["Subject"]), "needle": needle, "references": list(references)})

m = base("Lunch options")
m.set_content("Plain part: pasta or soup?")
m.add_alternative("<p>HTML part: <b>pasta</b> or soup?</p>", subtype="html")
add("multipart/alternative", m, "Plain part: pasta or soup?")

m = base("Grüße aus Köln")
m.set_content("Liebe Grüße aus Köln! " + "Eine lange Zeile, die umbrochen wird. " * 4, cte="quoted-printable")
add("quoted-printable utf-8", m, "Liebe Grüße aus Köln!")

m = base("Café à Paris")
m.set_content("Rendez-vous au café, à très bientôt.", charset="iso-8859-1", cte="quoted-printable")
del m["Subject"]
m["Subject"] = "=?iso-8859-1?q?Caf=E9_=E0_Paris?="
add("iso-8859-1", m, "Rendez-vous au café, à très bientôt.")

m = base("会議の予定")
m.set_content("明日の会議は十時からです。", charset="shift_jis")
add("shift_jis", m, "明日の会議は十時からです。")

m = base("Newsletter")
m.set_content("<html><body><h1>Weekly</h1><p>Only <i>HTML</i> here, no text part.</p></body></html>", subtype="html")
add("html only", m, "Only HTML here")

m = base("From a named sender", display="Jörg Müller-Lüdenscheidt")
m.set_content("Sent by a sender whose name is encoded.")
add("encoded display name", m, "Sent by a sender whose name is encoded.")

m = base("The report attached")
m.set_content("The report is attached.")
m.add_attachment(b"quarterly numbers\n", maintype="text", subtype="plain", filename=("utf-8", "", "Übersicht März.txt"))
add("rfc 2231 attachment name", m, "The report is attached.")

m = base("🎉 Party on Friday")
m.set_content("Bring snacks 🍕.")
add("emoji subject", m, "Bring snacks 🍕.")

m = base("Привет из Москвы")
m.set_content("Как дела? Встречаемся в пятницу.")
add("cyrillic subject", m, "Как дела? Встречаемся в пятницу.")

chain = ["thread-%d@corpus.example.test" % i for i in range(25)]
m = base("Re: Re: Re: The long thread")
m["In-Reply-To"] = "<%s>" % chain[-1]
m["References"] = " ".join("<%s>" % r for r in chain)
m.set_content("Deep in the thread: the 26th message.")
add("long references chain", m, "Deep in the thread: the 26th message.", chain)

print(json.dumps(shapes))
"#;

const SEND: &str = r#"
import smtplib, sys
path, sender, recipient = sys.argv[1:4]
with smtplib.SMTP("127.0.0.1", 10025, timeout=60) as smtp:
    smtp.sendmail(sender, [recipient], open(path, "rb").read())
"#;

fn python(args: &[&str]) -> Vec<u8> {
    let output = Command::new("python3").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn says(text: &str) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let object = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {object}\n\n")
    };
    sse(&[
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat())
}

/// The decoded Subject, In-Reply-To and References of a raw message.
fn threading(raw: &str) -> (String, Option<String>, Vec<String>) {
    let parsed = mail_parser::MessageParser::default()
        .parse(raw.as_bytes())
        .unwrap();
    let ids = |value: &mail_parser::HeaderValue<'_>| -> Vec<String> {
        match value {
            mail_parser::HeaderValue::Text(id) => vec![id.to_string()],
            mail_parser::HeaderValue::TextList(ids) => ids.iter().map(|i| i.to_string()).collect(),
            _ => Vec::new(),
        }
    };
    (
        parsed.subject().unwrap_or("").to_owned(),
        ids(parsed.in_reply_to()).into_iter().next(),
        ids(parsed.references()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_mail_shape_becomes_one_event_and_gets_a_threaded_answer() {
    let dir = tempfile::tempdir().unwrap();
    let compose = dir.path().join("compose.py");
    let send = dir.path().join("send.py");
    std::fs::write(&compose, COMPOSE).unwrap();
    std::fs::write(&send, SEND).unwrap();
    let (assistant, owner) = (mail::address("steward"), mail::address("owner"));
    let shapes: Vec<Value> = serde_json::from_slice(&python(&[
        compose.to_str().unwrap(),
        dir.path().to_str().unwrap(),
        &owner,
        &assistant,
        mail::AUTHSERV,
    ]))
    .unwrap();
    assert_eq!(shapes.len(), 10);

    let answers: Vec<String> = (0..shapes.len())
        .map(|i| says(&format!("Answer number {i}.")))
        .collect();
    let model = ScriptedModel::start(answers, 64);
    mail::stack();
    let daemon = TestDaemon::start_with_env(
        &format!(
            "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"scripted\"\ntimeout_secs = 10\n{}",
            model.port,
            mail::config(&assistant, &owner, "")
        ),
        &[(mail::PASSWORD_ENV, mail::PASSWORD)],
    );

    // One at a time, each answer awaited: each mail is its own step and its own answer.
    for (i, shape) in shapes.iter().enumerate() {
        let name = shape["name"].as_str().unwrap();
        python(&[
            send.to_str().unwrap(),
            shape["path"].as_str().unwrap(),
            &owner,
            &assistant,
        ]);
        let replies =
            mail::wait_for_messages(&owner, "INBOX", &format!("the answer to {name}"), |m| {
                m.len() > i
            })
            .await;
        let reply = replies
            .iter()
            .find(|r| mail::body(r).contains(&format!("Answer number {i}.")))
            .unwrap_or_else(|| panic!("{name}: no answer {i} in {replies:#?}"));
        let message_id = shape["message_id"].as_str().unwrap();
        let (subject, parent, references) = threading(reply);
        let mut chain: Vec<String> = shape["references"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect();
        chain.push(message_id.to_owned());
        assert_eq!(parent.as_deref(), Some(message_id), "{name}: {reply}");
        assert_eq!(references, chain, "{name}: the whole chain");
        assert!(subject.starts_with("Re: "), "{name}: {subject}");
        assert_eq!(
            subject.matches("Re:").count(),
            1,
            "{name}: one Re: ({subject})"
        );
    }

    let events: Vec<_> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e.channel.starts_with("email:"))
        .collect();
    assert_eq!(
        events.len(),
        shapes.len(),
        "exactly one event each: {events:#?}"
    );
    for shape in &shapes {
        let needle = shape["needle"].as_str().unwrap();
        let matching: Vec<_> = events.iter().filter(|e| e.text.contains(needle)).collect();
        assert_eq!(
            matching.len(),
            1,
            "{}: {needle:?} decoded in one event: {events:#?}",
            shape["name"]
        );
        assert_eq!(matching[0].trust, steward_events::Trust::Owner);
        assert_eq!(matching[0].state, "merged", "{:#?}", matching[0]);
    }
    let subjects: String = events.iter().map(|e| e.text.clone()).collect();
    for decoded in [
        "Grüße aus Köln",
        "Café à Paris",
        "会議の予定",
        "🎉 Party",
        "Привет из Москвы",
    ] {
        assert!(subjects.contains(decoded), "{decoded} in {subjects}");
    }
    let attachments = std::fs::read_dir(daemon.path().join("attachments"))
        .map(|d| {
            d.flatten()
                .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert!(
        attachments.iter().any(|n| n.contains("Übersicht März.txt")),
        "the RFC 2231 name decoded: {attachments:?}"
    );
}

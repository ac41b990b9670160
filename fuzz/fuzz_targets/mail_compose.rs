//! Replies and requests for confirmation composed from any mail: never a panic, and what
//! is composed parses back with its thread intact (the parent as In-Reply-To, every id of
//! the chain that can stand in a header in References, one `Re:`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use steward_daemon::channels::email::outbound::{Outgoing, Parent, compose, is_header_id};
use steward_daemon::channels::email::{parse, replies};
use steward_tools::confirm::{PendingAction, PendingState};

fn ids(value: &mail_parser::HeaderValue<'_>) -> Vec<String> {
    match value {
        mail_parser::HeaderValue::Text(id) => vec![id.to_string()],
        mail_parser::HeaderValue::TextList(ids) => ids.iter().map(|id| id.to_string()).collect(),
        _ => Vec::new(),
    }
}

fn check(mail: &Outgoing) {
    // A recipient that is not an address is refused, which is fine; a panic is not.
    let Ok(message) = compose("steward@example.net", mail) else {
        return;
    };
    let bytes = message.formatted();
    let parsed = mail_parser::MessageParser::default()
        .parse(&bytes)
        .expect("a composed message parses");
    let parent = mail.in_reply_to.as_deref().filter(|id| is_header_id(id));
    assert_eq!(
        ids(parsed.in_reply_to()).first().map(String::as_str),
        parent,
        "In-Reply-To"
    );
    let mut wanted: Vec<&str> = Vec::new();
    for id in &mail.references {
        if is_header_id(id) && !wanted.contains(&id.as_str()) {
            wanted.push(id);
        }
    }
    assert_eq!(ids(parsed.references()), wanted, "References");
    let subject = parsed.subject().unwrap_or("");
    assert!(subject.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("re:")), "{subject:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(mail) = parse::parse(data) else {
        return;
    };
    let references = mail.reply_references();
    check(&Outgoing::reply(
        Parent::of_mail(&mail, &references),
        "answer.1.steward@example.net".into(),
        mail.from.clone(),
        format!("{}\n", mail.body),
    ));
    let now = chrono::Utc::now();
    let action = PendingAction {
        id: "p1".into(),
        key: "k".into(),
        token: "0123456789abcdef".into(),
        tool: "email_send".into(),
        args: serde_json::json!({"subject": mail.subject}),
        args_hash: "h".into(),
        preview: parse::first_line(&mail.body).to_owned(),
        reason: mail.subject.clone(),
        origin_event: None,
        trajectory: steward_events::TrajectoryId::main(),
        requested_at: now,
        expires_at: now,
        state: PendingState::Pending,
        state_reason: None,
        result: None,
    };
    check(&replies::confirmation_request(
        &action,
        Parent::of_mail(&mail, &references),
        "confirm.p1.steward@example.net".into(),
        mail.from.clone(),
    ));
});

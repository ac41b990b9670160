//! The Telegram channel through the real daemon against a scripted Bot API server
//! ([`crate::bot_api`]): answers as replies, once; `kill -9` in a burst; sends whose answer
//! was lost (or that a crash interrupted) never sent twice; a reminder and a button-press
//! confirmation; pairing; a token change; 429, 409 and the typing action.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_protocol::EventRow;

use crate::bot_api::{Bot, BotApiServer};
use crate::model::{config, one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, stdout, wait_until};

const TOKEN_ENV: &str = "STEWARD_TEST_TELEGRAM_TOKEN";
const OWNER: i64 = 4242;
const BOT: i64 = 7001;

fn telegram_config(server: &BotApiServer, owners: &[i64], extra: &str) -> String {
    let owners: Vec<String> = owners.iter().map(i64::to_string).collect();
    format!(
        "\n[telegram]\ntoken_env = \"{TOKEN_ENV}\"\napi_url = \"{}\"\nowners = [{}]\n{extra}",
        server.url,
        owners.join(", ")
    )
}

fn start(config: &str, bot: &Bot) -> TestDaemon {
    TestDaemon::start_with_env(config, &[(TOKEN_ENV, &bot.token)])
}

async fn wait_ready(daemon: &TestDaemon) {
    daemon.wait_channel_ready("telegram", 30).await;
}

async fn telegram_events(daemon: &TestDaemon) -> Vec<EventRow> {
    daemon.channel_events("telegram:").await
}

/// The Bot API server, a model with `scripts`, and a daemon whose owner is [`OWNER`].
async fn owner_and_daemon(
    scripts: Vec<String>,
    extra: &str,
) -> (BotApiServer, Bot, TestDaemon, ScriptedModel) {
    let bot = Bot::new(BOT, "steward_bot");
    let server = BotApiServer::start(std::slice::from_ref(&bot)).await;
    let model = ScriptedModel::start(scripts, 4096);
    let daemon = start(
        &(config(model.port) + telegram_config(&server, &[OWNER], extra).as_str()),
        &bot,
    );
    wait_ready(&daemon).await;
    (server, bot, daemon, model)
}

fn texts(sent: &[Value]) -> Vec<String> {
    sent.iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_message_becomes_an_event_and_is_answered_as_a_reply_once() {
    let (server, bot, daemon, _model) =
        owner_and_daemon(vec![text_answer("**Hello** there, a < b & c.")], "").await;
    server.message_from(bot.id, OWNER, 5, "hello");
    wait_until(30, "the answer arrives", || async {
        !server.sent_to(OWNER).is_empty()
    })
    .await;
    let events = telegram_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event.channel, format!("telegram:{OWNER}"));
    assert_eq!(event.sender, OWNER.to_string());
    assert_eq!(event.trust, steward_events::Trust::Owner);
    assert_eq!(event.text, "hello");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = server.sent_to(OWNER);
    assert_eq!(sent.len(), 1, "answered once: {sent:#?}");
    assert_eq!(sent[0]["parse_mode"], "HTML");
    assert_eq!(
        sent[0]["text"], "<b>Hello</b> there, a &lt; b &amp; c.",
        "Markdown as escaped HTML"
    );
    assert_eq!(sent[0]["reply_parameters"]["message_id"], 5, "a reply");
    assert!(
        server
            .calls("sendChatAction")
            .iter()
            .any(|c| c.body == json!({"chat_id": OWNER, "action": "typing"})),
        "typing while the step worked"
    );
    assert_eq!(server.unconfirmed(bot.id), 0, "the offset moved past it");
    let offsets: Vec<Option<i64>> = server
        .calls("getUpdates")
        .iter()
        .map(|c| c.body["offset"].as_i64())
        .collect();
    assert!(offsets.contains(&Some(2)), "{offsets:?}");
    let status = stdout(&daemon.cli(&["status"]));
    assert!(status.contains("@steward_bot"), "{status}");
    let doctor = std::process::Command::new(crate::support::BIN)
        .args(crate::support::common_args(daemon.path()))
        .arg("doctor")
        .env(TOKEN_ENV, &bot.token)
        .output()
        .unwrap();
    let doctor = stdout(&doctor);
    assert!(
        doctor.contains("bot @steward_bot (id 7001)"),
        "doctor asks getMe: {doctor}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_of_50_updates_takes_each_once_and_sends_nothing_twice() {
    let answers: Vec<String> = (0..200)
        .map(|n| text_answer(&format!("answer number {n}")))
        .collect();
    let (server, bot, mut daemon, _model) = owner_and_daemon(answers, "").await;
    for wave in 0..5 {
        for i in 0..10 {
            let n = wave * 10 + i;
            server.message_from(bot.id, OWNER, 100 + n, &format!("message {n}"));
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        if wave == 2 {
            daemon.kill9();
            let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
            daemon = TestDaemon::start_in_with_env(dir, &[(TOKEN_ENV, &bot.token)]);
        }
    }
    wait_ready(&daemon).await;
    wait_until(60, "every update is an event", || async {
        telegram_events(&daemon).await.len() >= 50
    })
    .await;
    wait_until(30, "every update is confirmed", || async {
        server.unconfirmed(bot.id) == 0
    })
    .await;
    let events = telegram_events(&daemon).await;
    let mut seen: Vec<String> = events.iter().map(|e| e.text.clone()).collect();
    seen.sort();
    let mut expected: Vec<String> = (0..50).map(|n| format!("message {n}")).collect();
    expected.sort();
    assert_eq!(seen, expected, "each update exactly one event");
    daemon
        .wait_for_events("every event merged", |rows| {
            rows.iter()
                .filter(|e| e.channel.starts_with("telegram:"))
                .all(|e| e.state == "merged")
        })
        .await;
    // The steps end and answer; no answer goes out twice, whatever the crash cut short.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let sent = texts(&server.sent_to(OWNER));
    assert!(!sent.is_empty());
    let mut unique = sent.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        sent.len(),
        "an answer was sent twice: {sent:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_answer_was_lost_or_that_a_crash_cut_short_is_unknown_and_never_resent() {
    let (server, bot, mut daemon, _model) =
        owner_and_daemon(vec![text_answer("Reply A."), text_answer("Reply B.")], "").await;
    server.lose_send_answers(1);
    server.message_from(bot.id, OWNER, 1, "first");
    wait_until(
        30,
        "the owner is told the send may not have arrived",
        || async {
            stdout(&daemon.cli(&["outbox", "--json"])).contains("may not have reached Telegram")
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        texts(&server.sent_to(OWNER)),
        ["Reply A."],
        "carried out once, its answer lost, not sent again"
    );

    // The daemon dies while the send is out: after the restart it is unknown, not resent.
    server.hold_sends(true);
    server.message_from(bot.id, OWNER, 2, "second");
    wait_until(30, "the second answer is being sent", || async {
        texts(&server.sent_to(OWNER)).contains(&"Reply B.".to_owned())
    })
    .await;
    daemon.kill9();
    server.hold_sends(false);
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in_with_env(dir, &[(TOKEN_ENV, &bot.token)]);
    wait_ready(&daemon).await;
    wait_until(30, "the interrupted send is reported", || async {
        stdout(&daemon.cli(&["outbox", "--json"]))
            .contains("the daemon stopped while part 1 was being sent")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        texts(&server.sent_to(OWNER)),
        ["Reply A.", "Reply B."],
        "nothing sent twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_reaches_the_owners_private_chat() {
    let (server, bot, _daemon, _model) = owner_and_daemon(
        vec![
            one_call(
                "call_cron",
                "cron_create",
                json!({"name": "stretch", "schedule": "at +2s", "text": "Remind the owner to stretch."}),
            ),
            text_answer("I will remind you in two seconds."),
            text_answer("Reminder: time to stretch!"),
        ],
        "",
    )
    .await;
    server.message_from(bot.id, OWNER, 9, "in two seconds remind me to stretch");
    wait_until(60, "the reminder arrives", || async {
        texts(&server.sent_to(OWNER)).contains(&"Reminder: time to stretch!".to_owned())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = server.sent_to(OWNER);
    let reminders: Vec<&Value> = sent
        .iter()
        .filter(|m| m["text"] == "Reminder: time to stretch!")
        .collect();
    assert_eq!(reminders.len(), 1, "{sent:#?}");
    assert!(
        reminders[0].get("reply_parameters").is_none(),
        "an owner message, not a reply"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_confirmed_by_the_owners_button_once_and_a_strangers_press_is_refused() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let post = one_call(
        "call_post",
        "http_request",
        json!({"method": "POST", "url": format!("http://127.0.0.1:{}/water", recorder.port), "body": "on"}),
    );
    let (server, bot, daemon, _model) = owner_and_daemon(
        vec![
            post,
            text_answer("Asked you first."),
            text_answer("Watered."),
        ],
        "\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
    )
    .await;
    server.message_from(bot.id, OWNER, 3, "water the plants");
    wait_until(60, "the request with its buttons arrives", || async {
        server
            .sent_to(OWNER)
            .iter()
            .any(|m| m.get("reply_markup").is_some())
    })
    .await;
    let sent = server.calls("sendMessage");
    let request = sent
        .iter()
        .find(|c| c.body.get("reply_markup").is_some())
        .unwrap();
    let buttons = &request.body["reply_markup"]["inline_keyboard"][0];
    let confirm = buttons[0]["callback_data"].as_str().unwrap().to_owned();
    assert!(confirm.starts_with("confirm:"), "{buttons}");
    assert!(
        buttons[1]["callback_data"]
            .as_str()
            .unwrap()
            .starts_with("deny:")
    );
    // The server numbers its messages 1002, 1003, …: find the request's.
    let index = server
        .calls("sendMessage")
        .iter()
        .position(|c| c.body.get("reply_markup").is_some())
        .unwrap();
    let request_id = 1002 + i64::try_from(index).unwrap();
    assert!(recorder.seen().is_empty(), "nothing ran before the answer");

    server.press(bot.id, 9999, request_id, &confirm);
    wait_until(30, "the stranger is refused with an alert", || async {
        server
            .calls("answerCallbackQuery")
            .iter()
            .any(|c| c.body["show_alert"] == true)
    })
    .await;
    assert!(
        recorder.seen().is_empty(),
        "a stranger's press runs nothing"
    );

    server.press(bot.id, OWNER, request_id, &confirm);
    wait_until(30, "the action runs", || async {
        !recorder.seen().is_empty()
    })
    .await;
    wait_until(30, "the request shows its outcome", || async {
        server.calls("editMessageText").iter().any(|c| {
            c.body["message_id"] == request_id
                && c.body["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("Confirmed")
        })
    })
    .await;
    server.press(bot.id, OWNER, request_id, &confirm);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(recorder.seen().len(), 1, "ran once");
    let refused = telegram_events(&daemon)
        .await
        .into_iter()
        .filter(|e| e.state == "rejected")
        .count();
    assert_eq!(refused, 1, "the stranger's press is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_with_a_wrong_or_used_code_changes_nothing_and_a_fresh_one_makes_an_owner() {
    let bot = Bot::new(BOT, "steward_bot");
    let server = BotApiServer::start(std::slice::from_ref(&bot)).await;
    let daemon = start(&telegram_config(&server, &[], ""), &bot);
    wait_ready(&daemon).await;
    let owners = || stdout(&daemon.cli(&["telegram", "owners", "--json"]));
    let (stranger, other) = (777, 888);

    server.message_from(bot.id, stranger, 1, "hello, who are you?");
    server.message_from(bot.id, stranger, 2, "/start WRONG234");
    wait_until(30, "both are refused", || async {
        telegram_events(&daemon)
            .await
            .iter()
            .filter(|e| e.state == "rejected")
            .count()
            == 2
    })
    .await;
    assert_eq!(owners(), "", "nobody paired");
    let told = texts(&server.sent_to(stranger));
    assert_eq!(
        told.len(),
        1,
        "only the pairing attempt is answered: {told:?}"
    );
    assert!(told[0].contains("not valid or has expired"), "{told:?}");

    let pair: Value =
        serde_json::from_str(stdout(&daemon.cli(&["telegram", "pair", "--json"])).trim()).unwrap();
    let code = pair["code"].as_str().unwrap().to_owned();
    assert_eq!(code.len(), 8);
    server.message_from(bot.id, stranger, 3, &format!("/start {code}"));
    wait_until(30, "the stranger is paired", || async {
        owners().contains("\"user_id\":777")
    })
    .await;
    assert!(
        texts(&server.sent_to(stranger))
            .iter()
            .any(|t| t.starts_with("Paired"))
    );
    server.message_from(bot.id, other, 1, &format!("/start {code}"));
    server.message_from(bot.id, stranger, 4, "now I am the owner");
    wait_until(30, "both are taken", || async {
        telegram_events(&daemon).await.len() == 5
    })
    .await;
    let events = telegram_events(&daemon).await;
    let used = events.iter().find(|e| e.sender == "888").unwrap();
    assert_eq!(used.state, "rejected", "a code works once: {used:?}");
    let owned = events
        .iter()
        .find(|e| e.text == "now I am the owner")
        .unwrap();
    assert_eq!(owned.trust, steward_events::Trust::Owner);
    let rows: Vec<Value> = owners()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["source"], "paired");
    assert_eq!(rows[0]["username"], "user777");

    let unpaired = daemon.cli(&["telegram", "unpair", "777"]);
    assert!(unpaired.status.success());
    assert_eq!(owners(), "");
    assert!(!daemon.cli(&["telegram", "unpair", "777"]).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_token_starts_the_offset_over_and_the_new_bots_first_update_is_taken() {
    let (old, new) = (
        Bot::new(BOT, "steward_bot"),
        Bot::new(8002, "steward_two_bot"),
    );
    let server = BotApiServer::start(&[old.clone(), new.clone()]).await;
    let config = telegram_config(&server, &[OWNER], "");
    let mut daemon = start(&config, &old);
    wait_ready(&daemon).await;
    for n in 0..3 {
        server.message_from(old.id, OWNER, n, &format!("to the old bot {n}"));
    }
    wait_until(30, "the old bot's updates are taken", || async {
        telegram_events(&daemon).await.len() == 3 && server.unconfirmed(old.id) == 0
    })
    .await;
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in_with_env(dir, &[(TOKEN_ENV, &new.token)]);
    wait_ready(&daemon).await;
    // Update id 1 of the new bot: an offset kept from the old one (4) would skip it.
    server.message_from(new.id, OWNER, 1, "to the new bot");
    wait_until(30, "the new bot's first update is taken", || async {
        telegram_events(&daemon)
            .await
            .iter()
            .any(|e| e.text == "to the new bot")
    })
    .await;
    let state = daemon.channel_state("telegram").await.unwrap();
    assert!(
        state.contains("offset reset: the bot changed from 7001 to 8002"),
        "{state}"
    );
}

/// A token the Bot API refuses keeps the channel down, saying why; once the owner puts the
/// right one in the token file, the next attempt (the channel's same HTTP client, the token
/// read anew) connects, and the owner's message is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_keeps_the_channel_down_until_its_file_holds_the_right_one() {
    let bot = Bot::new(BOT, "steward_bot");
    let server = BotApiServer::start(std::slice::from_ref(&bot)).await;
    let model = ScriptedModel::start(vec![text_answer("Connected.")], 4096);
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("telegram-token");
    std::fs::write(&token_file, "7001:not-this-bots-token").unwrap();
    let config = format!(
        "{}\n[telegram]\ntoken_file = \"{}\"\napi_url = \"{}\"\nowners = [{OWNER}]\n",
        config(model.port),
        token_file.display(),
        server.url
    );
    let daemon = TestDaemon::start_with_env(&config, &[]);
    wait_until(30, "the channel says the token is refused", || async {
        daemon
            .channel_state("telegram")
            .await
            .is_some_and(|state| state.contains("telegram.token_file is not a bot's token"))
    })
    .await;
    std::fs::write(&token_file, &bot.token).unwrap();
    daemon.wait_channel_ready("telegram", 90).await;
    server.message_from(BOT, OWNER, 1, "Are you there now?");
    wait_until(30, "the answer is sent", || async {
        texts(&server.sent_to(OWNER)).contains(&"Connected.".to_owned())
    })
    .await;
    let events = telegram_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_and_a_409_is_shown_not_hammered_and_the_token_is_never_logged() {
    let bot = Bot::new(BOT, "steward_bot");
    let server = BotApiServer::start(std::slice::from_ref(&bot)).await;
    let model = ScriptedModel::start(vec![text_answer("Patiently.")], 4096);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("daemon.log");
    let daemon = TestDaemon::start_with_log(
        &(config(model.port) + telegram_config(&server, &[OWNER], "").as_str()),
        &[(TOKEN_ENV, &bot.token), ("RUST_LOG", "debug")],
        &log,
    );
    wait_ready(&daemon).await;
    server.rate_limit_sends(2);
    let asked = Instant::now();
    server.message_from(bot.id, OWNER, 1, "hello");
    // Every try is recorded as it arrives: two refused with 429, then the one sent.
    wait_until(30, "the answer arrives", || async {
        server.sent_to(OWNER).len() >= 3
    })
    .await;
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "two retry_after of 1 s were waited"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        texts(&server.sent_to(OWNER)),
        ["Patiently.", "Patiently.", "Patiently."],
        "two refused, one sent, none after"
    );

    server.set_conflict(true);
    daemon
        .wait_for_status("the conflict is shown", |status| {
            status
                .channels
                .iter()
                .any(|c| c.name == "telegram" && c.state.contains("Conflict"))
        })
        .await;
    let polls = server.calls("getUpdates").len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        server.calls("getUpdates").len() <= polls + 1,
        "not retried blindly"
    );
    server.set_conflict(false);
    server.message_from(bot.id, OWNER, 2, "after the conflict");
    wait_until(30, "polling resumes", || async {
        telegram_events(&daemon)
            .await
            .iter()
            .any(|e| e.text == "after the conflict")
    })
    .await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("409"), "the conflict was logged");
    assert!(
        !logged.contains(&bot.token) && !logged.contains("AAH-test-token"),
        "the token is in no log line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typing_action_is_renewed_while_a_step_works_and_stops_when_it_is_cancelled() {
    // The model holds its answer for 30 s: the step works until it is cancelled.
    let slow = text_answer("too late").replacen("data: ", "<<PAUSE>>data: ", 1);
    let (server, bot, daemon, _model) =
        owner_and_daemon(vec![slow, text_answer("Stopped.")], "").await;
    server.message_from(bot.id, OWNER, 1, "take your time");
    let typing = || server.calls("sendChatAction").len();
    wait_until(30, "typing is shown", || async { typing() >= 1 }).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(typing() >= 2, "renewed every 4 s while the step works");
    let cancel = daemon.cli(&["send", "--urgency", "cancel", "stop"]);
    assert!(cancel.status.success());
    daemon
        .wait_for_trajectory("the step is cancelled", |items| {
            items
                .iter()
                .any(|i| matches!(i.kind, steward_events::ItemKind::StepCancelled { .. }))
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_cancel = typing();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(typing(), after_cancel, "no typing after the step ended");
}

/// A message in group `chat` from `user`, mentioning the bot when `mention`.
fn group_message(server: &BotApiServer, chat: i64, user: i64, id: i64, text: &str, mention: bool) {
    let mut message = json!({
        "message_id": id,
        "from": {"id": user, "is_bot": false, "first_name": format!("User{user}")},
        "chat": {"id": chat, "type": "supergroup", "title": "Home"},
        "date": chrono::Utc::now().timestamp(),
        "text": text,
    });
    if mention {
        let at = text.find("@steward_bot").unwrap();
        message["entities"] = json!([{"type": "mention", "offset": at, "length": 12}]);
    }
    server.push(BOT, "message", message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_must_be_allowed_and_addressed_and_files_are_recorded_by_id() {
    let (allowed, other) = (-100_500, -100_999);
    let (server, bot, daemon, _model) = owner_and_daemon(
        vec![text_answer("Hello, group."), text_answer("A fine cat.")],
        &format!("allow_groups = [{allowed}]\n"),
    )
    .await;
    group_message(&server, other, OWNER, 1, "@steward_bot hi", true);
    group_message(&server, allowed, OWNER, 2, "just chatting among us", false);
    group_message(&server, allowed, 31337, 3, "@steward_bot obey me", true);
    group_message(&server, allowed, OWNER, 4, "@steward_bot what's up?", true);
    wait_until(30, "the group answer", || async {
        texts(&server.sent_to(allowed)).contains(&"Hello, group.".to_owned())
    })
    .await;
    let events = telegram_events(&daemon).await;
    let state_of = |text: &str| {
        events
            .iter()
            .find(|e| e.text == text)
            .map(|e| (e.state.clone(), e.detail.clone().unwrap_or_default()))
    };
    let (state, why) = state_of("@steward_bot hi").unwrap();
    assert_eq!(state, "rejected");
    assert!(why.contains("not in the configured rooms"), "{why}");
    assert_eq!(
        state_of("just chatting among us"),
        None,
        "chatter is no event"
    );
    assert_eq!(state_of("@steward_bot obey me").unwrap().0, "rejected");
    assert_eq!(state_of("@steward_bot what's up?").unwrap().0, "merged");
    assert_eq!(
        server.sent_to(allowed)[0]["reply_parameters"]["message_id"],
        4,
        "answered in the group, as a reply"
    );
    assert!(server.sent_to(other).is_empty());

    server.push(
        bot.id,
        "message",
        json!({
            "message_id": 5,
            "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
            "chat": {"id": OWNER, "type": "private"},
            "date": chrono::Utc::now().timestamp(),
            "caption": "our cat",
            "photo": [
                {"file_id": "AgAD-small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1200},
                {"file_id": "AgAD-large", "file_unique_id": "l", "width": 1280, "height": 960, "file_size": 98765},
            ],
        }),
    );
    wait_until(30, "the photo's answer", || async {
        texts(&server.sent_to(OWNER)).contains(&"A fine cat.".to_owned())
    })
    .await;
    let photo = telegram_events(&daemon)
        .await
        .into_iter()
        .find(|e| e.text.starts_with("our cat"))
        .unwrap();
    assert_eq!(photo.text, "our cat\n[photo AgAD-large, 98765 bytes]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_saying_no_to_a_request_denies_it_and_nothing_runs() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let post = one_call(
        "call_post",
        "http_request",
        json!({"method": "POST", "url": format!("http://127.0.0.1:{}/water", recorder.port), "body": "on"}),
    );
    let (server, bot, daemon, _model) = owner_and_daemon(
        vec![
            post,
            text_answer("Asked you first."),
            text_answer("Left dry."),
        ],
        "\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
    )
    .await;
    server.message_from(bot.id, OWNER, 3, "water the plants");
    wait_until(60, "the request arrives", || async {
        server
            .sent_to(OWNER)
            .iter()
            .any(|m| m.get("reply_markup").is_some())
    })
    .await;
    let index = server
        .calls("sendMessage")
        .iter()
        .position(|c| c.body.get("reply_markup").is_some())
        .unwrap();
    let request_id = 1002 + i64::try_from(index).unwrap();
    // The owner answers by replying to the request.
    server.push(
        bot.id,
        "message",
        json!({
            "message_id": 4,
            "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
            "chat": {"id": OWNER, "type": "private"},
            "date": chrono::Utc::now().timestamp(),
            "text": "no, not today",
            "reply_to_message": {"message_id": request_id, "date": 1,
                "chat": {"id": OWNER, "type": "private"},
                "from": {"id": bot.id, "is_bot": true, "first_name": "Steward"}},
        }),
    );
    wait_until(30, "the denial is told", || async {
        texts(&server.sent_to(OWNER))
            .iter()
            .any(|t| t.starts_with("Denied"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(recorder.seen().is_empty(), "nothing ran");
    let pending = stdout(&daemon.cli(&["pending", "--all", "--json"]));
    assert!(pending.contains("\"state\":\"denied\""), "{pending}");
    let handled = telegram_events(&daemon)
        .await
        .into_iter()
        .find(|e| e.state == "handled")
        .expect("the answer is recorded handled");
    assert!(handled.text.starts_with("deny to "), "{handled:?}");
}

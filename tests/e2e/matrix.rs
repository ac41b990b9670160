//! The Matrix channel against a real Synapse on 127.0.0.1 (`tests/matrix/synapse.sh`), the
//! owner and strangers being `matrix-sdk` clients with their own encryption keys: the
//! answer arrives encrypted, threaded to its message, once; a reminder reaches the DM with
//! no CLI open; ✅ answers a request for confirmation; `kill -9` in a burst loses and
//! doubles nothing; strangers change nothing but `rejected` events; a homeserver restart
//! is ridden out.

use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use matrix_sdk::config::SyncSettings;
use matrix_sdk::encryption::{CrossSigningResetAuthType, EncryptionSettings, LocalTrust};
use matrix_sdk::ruma::api::client::uiaa;
use matrix_sdk::ruma::events::reaction::ReactionEventContent;
use matrix_sdk::ruma::events::relation::Annotation;
use matrix_sdk::ruma::events::room::message::{
    OriginalSyncRoomMessageEvent, RoomMessageEventContent,
};
use matrix_sdk::ruma::events::typing::SyncTypingEvent;
use matrix_sdk::ruma::{OwnedDeviceId, OwnedEventId, OwnedUserId, UserId};
use matrix_sdk::{Client, Room, RoomMemberships};
use matrix_sdk_crypto::CollectStrategy;
use serde_json::{Value, json};
use steward_protocol::EventRow;
use tempfile::TempDir;

use crate::model::{config, one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, wait_until};

const PASSWORD: &str = "correct-horse-battery-staple";
const PASSWORD_ENV: &str = "STEWARD_TEST_MATRIX_PASSWORD";
const SHARED_PORT: u16 = 18008;

/// Runs `tests/matrix/synapse.sh` with the instance of `port`.
fn synapse(port: u16, args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/matrix/synapse.sh");
    let output = Command::new("bash")
        .arg(script)
        .args(args)
        .env("STEWARD_SYNAPSE_PORT", port.to_string())
        .env(
            "STEWARD_SYNAPSE_DIR",
            format!("/tmp/steward-synapse-{port}"),
        )
        .output()
        .expect("run tests/matrix/synapse.sh");
    assert!(
        output.status.success(),
        "synapse.sh {args:?} failed (it installs matrix-synapse from PyPI into a venv): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The shared Synapse, started once per test process.
fn homeserver() -> String {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| synapse(SHARED_PORT, &["start"]));
    format!("http://127.0.0.1:{SHARED_PORT}")
}

/// A fresh user name (tests share the server).
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    )
}

fn user_id(name: &str) -> OwnedUserId {
    UserId::parse(format!("@{name}:localhost")).unwrap()
}

/// What a person's client saw: every message, decrypted.
#[derive(Clone, Debug)]
struct Seen {
    event_id: String,
    room: String,
    sender: String,
    body: String,
    content: Value,
}

/// A person on the homeserver with their own client, device and keys, syncing.
struct Person {
    client: Client,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Every typing notice: who was typing, as the room said.
    typing: Arc<Mutex<Vec<Vec<String>>>>,
    _store: TempDir,
}

impl Person {
    async fn new(url: &str, port: u16, name: &str) -> Self {
        Self::sharing_keys(url, port, name, CollectStrategy::AllDevices).await
    }

    /// A person whose client shares room keys by `strategy`: with every device, or — as
    /// Element does with "exclude insecure devices" (MSC4153) — only with devices their
    /// account's cross-signing identity signed.
    async fn sharing_keys(url: &str, port: u16, name: &str, strategy: CollectStrategy) -> Self {
        synapse(port, &["register", name, PASSWORD]);
        Self::log_in(url, name, strategy, true).await
    }

    /// Another device of an account that has one already, which the account's identity did
    /// not sign: what someone who learnt the password alone would log in as.
    async fn another_device(url: &str, name: &str) -> Self {
        Self::log_in(url, name, CollectStrategy::AllDevices, false).await
    }

    /// Logs in as a new device; `first` makes the account's cross-signing identity, which
    /// signs the device, as any client does at an account's first login today.
    async fn log_in(url: &str, name: &str, strategy: CollectStrategy, first: bool) -> Self {
        let store = tempfile::tempdir().unwrap();
        let client = Client::builder()
            .homeserver_url(url)
            .sqlite_store(store.path(), None)
            .with_room_key_recipient_strategy(strategy)
            .with_encryption_settings(EncryptionSettings {
                auto_enable_cross_signing: first,
                ..EncryptionSettings::default()
            })
            .build()
            .await
            .unwrap();
        client
            .matrix_auth()
            .login_username(name, PASSWORD)
            .send()
            .await
            .unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        client.add_event_handler(move |event: OriginalSyncRoomMessageEvent, room: Room| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(Seen {
                    event_id: event.event_id.to_string(),
                    room: room.room_id().to_string(),
                    sender: event.sender.to_string(),
                    body: event.content.body().to_owned(),
                    content: serde_json::to_value(&event.content).unwrap(),
                });
            }
        });
        let typing: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let notices = typing.clone();
        client.add_event_handler(move |event: SyncTypingEvent| {
            let notices = notices.clone();
            async move {
                let who = event
                    .content
                    .user_ids
                    .iter()
                    .map(|u| u.to_string())
                    .collect();
                notices.lock().unwrap().push(who);
            }
        });
        client.sync_once(SyncSettings::default()).await.unwrap();
        if first {
            wait_until(
                60,
                "the person's cross-signing identity is set up",
                || async {
                    client
                        .encryption()
                        .cross_signing_status()
                        .await
                        .is_some_and(|status| status.is_complete())
                },
            )
            .await;
        }
        let syncing = client.clone();
        // `sync` returns when the homeserver fails (the restart test stops it): go on.
        tokio::spawn(async move {
            loop {
                let _ = syncing.sync(SyncSettings::default()).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Self {
            client,
            seen,
            typing,
            _store: store,
        }
    }

    fn seen_from(&self, sender: &OwnedUserId) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.sender == sender.as_str())
            .cloned()
            .collect()
    }

    /// Opens an encrypted direct room with `with` and waits until they joined.
    async fn direct_room(&self, with: &OwnedUserId) -> Room {
        let room = self.client.create_dm(with).await.unwrap();
        wait_until(60, "the assistant joins the direct room", || async {
            room.members(RoomMemberships::JOIN)
                .await
                .is_ok_and(|members| members.iter().any(|m| m.user_id() == with))
        })
        .await;
        room
    }

    /// Waits until this person's client has the keys of `device`, the daemon's.
    /// A client shares its room key with the devices it knows when it sends: a message sent
    /// before it learnt of a new device can never be read by that device (as with any
    /// client), so whoever tracked the assistant before the daemon's device existed (a room
    /// made before the daemon started, a new login) waits for it before speaking.
    async fn wait_to_know(&self, bot: &OwnedUserId, device: &OwnedDeviceId) {
        wait_until(60, "the client knows the daemon's device", || async {
            self.client
                .encryption()
                .get_device(bot, device)
                .await
                .is_ok_and(|found| found.is_some())
        })
        .await;
    }

    async fn say(&self, room: &Room, text: &str) -> OwnedEventId {
        room.send(RoomMessageEventContent::text_plain(text))
            .await
            .unwrap()
            .response
            .event_id
    }
}

fn matrix_config(url: &str, bot: &str, owners: &[&OwnedUserId], extra: &str) -> String {
    let owners: Vec<String> = owners.iter().map(|o| format!("{:?}", o.as_str())).collect();
    format!(
        "\n[matrix]\nhomeserver = \"{url}\"\nuser_id = \"@{bot}:localhost\"\npassword_env = \"{PASSWORD_ENV}\"\nowners = [{}]\n{extra}",
        owners.join(", ")
    )
}

/// The device the daemon logged in as, from its saved session.
fn daemon_device(daemon: &TestDaemon) -> OwnedDeviceId {
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.path().join("matrix/session.json")).unwrap(),
    )
    .unwrap();
    OwnedDeviceId::from(session["device_id"].as_str().unwrap())
}

fn start(config: &str) -> TestDaemon {
    TestDaemon::start_with_env(config, &[(PASSWORD_ENV, PASSWORD)])
}

async fn wait_ready(daemon: &TestDaemon) {
    daemon.wait_channel_ready("matrix", 60).await;
}

async fn matrix_events(daemon: &TestDaemon) -> Vec<EventRow> {
    daemon.channel_events("matrix:").await
}

/// Synapse, the owner, the assistant's account and a daemon with `script` as its model.
async fn owner_and_daemon(
    scripts: Vec<String>,
    extra: &str,
) -> (Person, OwnedUserId, TestDaemon, ScriptedModel) {
    let url = homeserver();
    let (owner_name, bot) = (unique("owner"), unique("steward"));
    synapse(SHARED_PORT, &["register", &bot, PASSWORD]);
    let owner = Person::new(&url, SHARED_PORT, &owner_name).await;
    let owner_id = user_id(&owner_name);
    let model = ScriptedModel::start(scripts, 4096);
    let daemon =
        start(&(config(model.port) + matrix_config(&url, &bot, &[&owner_id], extra).as_str()));
    wait_ready(&daemon).await;
    (owner, user_id(&bot), daemon, model)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_message_in_an_encrypted_dm_is_answered_there_once_threaded_to_it() {
    let (owner, bot, daemon, model) =
        owner_and_daemon(vec![text_answer("Hello, owner. **All** is well.")], "").await;
    let room = owner.direct_room(&bot).await;
    assert!(room.latest_encryption_state().await.unwrap().is_encrypted());
    let asked = owner.say(&room, "How is everything?").await;
    wait_until(60, "the answer arrives", || async {
        !owner.seen_from(&bot).is_empty()
    })
    .await;
    // Anything doubled would arrive within this.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let answers = owner.seen_from(&bot);
    assert_eq!(answers.len(), 1, "{answers:#?}");
    let answer = &answers[0];
    assert_eq!(answer.room, room.room_id().as_str());
    assert_eq!(answer.body, "Hello, owner. **All** is well.");
    assert!(
        answer.content["formatted_body"]
            .as_str()
            .is_some_and(|html| html.contains("<strong>All</strong>")),
        "Markdown is rendered: {answer:#?}"
    );
    assert_eq!(
        answer.content["m.relates_to"]["m.in_reply_to"]["event_id"],
        asked.as_str(),
        "threaded to the message: {answer:#?}"
    );
    // The message reached the model decrypted, as one owner event.
    let request = model.requests()[0]["messages"].to_string();
    assert!(request.contains("How is everything?"), "{request}");
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].trust, steward_events::Trust::Owner);
    assert_eq!(events[0].sender, owner.client.user_id().unwrap().as_str());
    // The answer was received encrypted (the SDK decrypted it for the owner).
    let raw = room
        .event(
            &OwnedEventId::try_from(answer.event_id.as_str()).unwrap(),
            None,
        )
        .await
        .unwrap();
    assert!(raw.encryption_info().is_some(), "sent encrypted");

    // `steward doctor` checks the saved session, and the store once the daemon let it go.
    let running = doctor(&daemon);
    assert!(
        running.contains("the running daemon holds the store"),
        "{running}"
    );
    let mut daemon = daemon;
    assert!(daemon.terminate().success());
    let stopped = doctor(&daemon);
    assert!(
        stopped.contains("the store holds its keys")
            && stopped.contains("the device is signed by the account's cross-signing identity"),
        "{stopped}"
    );
}

/// `steward doctor --json`'s Matrix check (its detail), asserted passing.
fn doctor(daemon: &TestDaemon) -> String {
    let check = doctor_check(daemon);
    assert_eq!(check["status"], "pass", "{check}");
    check["detail"].as_str().unwrap().to_owned()
}

/// `steward doctor --json`'s Matrix check.
fn doctor_check(daemon: &TestDaemon) -> Value {
    let output = Command::new(crate::support::BIN)
        .args(crate::support::common_args(daemon.path()))
        .args(["doctor", "--json"])
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "matrix")
        .cloned()
        .unwrap_or_else(|| panic!("no matrix check: {report}"))
}

/// An owner whose client shares room keys only with devices signed by their account's
/// identity (Element's "exclude insecure devices", MSC4153) is read and answered: the
/// assistant's account has a cross-signing identity that signed its device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_who_excludes_unsigned_devices_is_read_and_answered() {
    let url = homeserver();
    let (owner_name, bot) = (unique("owner"), unique("steward"));
    synapse(SHARED_PORT, &["register", &bot, PASSWORD]);
    let owner = Person::sharing_keys(
        &url,
        SHARED_PORT,
        &owner_name,
        CollectStrategy::IdentityBasedStrategy,
    )
    .await;
    let owner_id = user_id(&owner_name);
    let model = ScriptedModel::start(vec![text_answer("Read you.")], 4096);
    let daemon =
        start(&(config(model.port) + matrix_config(&url, &bot, &[&owner_id], "").as_str()));
    wait_ready(&daemon).await;
    let bot = user_id(&bot);
    let room = owner.direct_room(&bot).await;
    let device = daemon_device(&daemon);
    owner.wait_to_know(&bot, &device).await;
    wait_until(
        60,
        "the assistant's device is signed by its identity",
        || async {
            let encryption = owner.client.encryption();
            let found = encryption.get_device(&bot, &device).await.ok().flatten();
            found.is_some_and(|d| d.is_cross_signed_by_owner())
        },
    )
    .await;
    owner.say(&room, "can you read this?").await;
    wait_until(60, "the answer arrives", || async {
        owner.seen_from(&bot).iter().any(|s| s.body == "Read you.")
    })
    .await;
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].trust, steward_events::Trust::Owner);
}

/// With `require_verified_devices`, an owner's cross-signing identity reset with the password
/// (what someone who learnt it could do too) makes their messages untrusted, and the owner is
/// told once, with how to accept the identity if they reset it themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_identity_reset_makes_their_messages_untrusted_and_they_are_told() {
    let scripts = (0..40).map(|_| text_answer("Noted.")).collect();
    let (owner, bot, daemon, _model) =
        owner_and_daemon(scripts, "require_verified_devices = true\n").await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "before the reset").await;
    wait_until(60, "the first message is taken", || async {
        !matrix_events(&daemon).await.is_empty()
    })
    .await;
    assert_eq!(
        matrix_events(&daemon).await[0].trust,
        steward_events::Trust::Owner
    );
    let owner_id = owner.client.user_id().unwrap().to_owned();
    let handle = owner
        .client
        .encryption()
        .reset_cross_signing()
        .await
        .unwrap()
        .expect("the reset asks for authentication");
    if let CrossSigningResetAuthType::Uiaa(uiaa) = handle.auth_type() {
        let mut password = uiaa::Password::new(
            uiaa::UserIdentifier::Matrix(uiaa::MatrixUserIdentifier::new(owner_id.to_string())),
            PASSWORD.to_owned(),
        );
        password.session = uiaa.session.clone();
        handle
            .auth(Some(uiaa::AuthData::Password(password)))
            .await
            .unwrap();
    }
    // The assistant learns of the new identity at its next key query: until then a message
    // may still count under the old one, so the owner writes until one does not.
    let mut sent = 0;
    wait_until(60, "a message after the reset is untrusted", || {
        sent += 1;
        let text = format!("after the reset {sent}");
        let (owner, room, daemon) = (&owner, &room, &daemon);
        async move {
            owner.say(room, &text).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            matrix_events(daemon).await.iter().any(|e| {
                e.text.contains("after the reset") && e.trust == steward_events::Trust::Untrusted
            })
        }
    })
    .await;
    wait_until(60, "the owner is told", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body.contains("cross-signing identity of"))
    })
    .await;
    // Two more messages under the new identity: told once.
    owner.say(&room, "still me").await;
    owner.say(&room, "really").await;
    wait_until(60, "the later messages are taken", || async {
        matrix_events(&daemon)
            .await
            .iter()
            .any(|e| e.text.contains("really"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let told: Vec<Seen> = owner
        .seen_from(&bot)
        .into_iter()
        .filter(|s| s.body.contains("cross-signing identity of"))
        .collect();
    assert_eq!(told.len(), 1, "{told:#?}");
    assert!(
        told[0].body.contains("pinned-identities.json"),
        "says how to accept it: {told:#?}"
    );
}

/// With `RUST_LOG` unset, a conversation leaves Steward's own lines and none of the SDK's
/// housekeeping: before, every start added four `ERROR … Account data not found` lines (the
/// SDK's expected 404s) and every sync "Trying to backup room keys but no backup key was
/// found" (a warning about key backup, which Steward does not use) and the SDK's `info`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_log_has_stewards_lines_and_not_the_sdks_housekeeping() {
    let url = homeserver();
    let (owner_name, bot) = (unique("owner"), unique("steward"));
    synapse(SHARED_PORT, &["register", &bot, PASSWORD]);
    let owner = Person::new(&url, SHARED_PORT, &owner_name).await;
    let owner_id = user_id(&owner_name);
    let model = ScriptedModel::start(vec![text_answer("One."), text_answer("Two.")], 4096);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steward.log");
    let daemon = TestDaemon::start_with_log(
        &(config(model.port) + matrix_config(&url, &bot, &[&owner_id], "").as_str()),
        &[(PASSWORD_ENV, PASSWORD), ("RUST_LOG", "")],
        &log,
    );
    wait_ready(&daemon).await;
    let bot = user_id(&bot);
    let room = owner.direct_room(&bot).await;
    owner.wait_to_know(&bot, &daemon_device(&daemon)).await;
    for (asked, answer) in [("first", "One."), ("second", "Two.")] {
        owner.say(&room, asked).await;
        wait_until(60, "the answer arrives", || async {
            owner.seen_from(&bot).iter().any(|s| s.body == answer)
        })
        .await;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("steward is ready"), "{text}");
    assert!(
        text.contains("the Matrix device is signed by its account's cross-signing identity"),
        "{text}"
    );
    // One warning of the SDK's own is left, sometimes, at a new device's first sync: it sends
    // the device's keys and its query of the account's devices at once, and when the query
    // is answered first it warns that the device "might have been deleted". It is a race
    // inside the SDK, once per device; not hidden, because the same target warns of keys
    // that fail their checks.
    let sdk: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("matrix_sdk") && !l.contains("Our own device might have been deleted")
        })
        .collect();
    assert!(sdk.is_empty(), "{sdk:#?}");
}

/// The SDK's SQLite files (not the `-shm` maps, which readers touch): name, length, time
/// of last change.
fn sdk_store_files(daemon: &TestDaemon) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(daemon.path().join("matrix/store"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| !entry.file_name().to_string_lossy().ends_with("-shm"))
        .map(|entry| {
            let meta = entry.metadata().unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                meta.len(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// An idle channel's long polls come back empty every 30 s; none of them runs the SDK's
/// sync processing (which wrote its stores each time and mapped megabytes of code back
/// into memory), and a message after them is read and answered as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_channel_leaves_the_sdks_stores_alone_and_still_answers() {
    let (owner, bot, daemon, _model) = owner_and_daemon(vec![text_answer("Still here.")], "").await;
    let room = owner.direct_room(&bot).await;
    owner.wait_to_know(&bot, &daemon_device(&daemon)).await;
    // The joining's syncs settle; then a window longer than one long poll stays quiet.
    let mut before = sdk_store_files(&daemon);
    let mut quiet_since = std::time::Instant::now();
    wait_until(
        120,
        "a long poll's whole length passes with the stores untouched",
        || {
            let now = sdk_store_files(&daemon);
            if now != before {
                before = now;
                quiet_since = std::time::Instant::now();
            }
            let quiet = quiet_since.elapsed() > Duration::from_secs(35);
            async move { quiet }
        },
    )
    .await;
    owner.say(&room, "Are you still there?").await;
    wait_until(60, "the answer arrives", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "Still here.")
    })
    .await;
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
}

/// An owner's message whose keys never reach the assistant (the owner's client blocked the
/// assistant's device, so it shares no room key with it) is recorded `dead` after
/// `keys_wait_secs`, and the owner is told to send it again: it is not left unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_message_that_cannot_be_decrypted_is_reported_to_the_owner() {
    let url = homeserver();
    let (owner_name, bot) = (unique("owner"), unique("steward"));
    synapse(SHARED_PORT, &["register", &bot, PASSWORD]);
    let owner = Person::new(&url, SHARED_PORT, &owner_name).await;
    let owner_id = user_id(&owner_name);
    let model = ScriptedModel::start(vec![text_answer("never asked")], 4096);
    let daemon = start(
        &(config(model.port)
            + matrix_config(&url, &bot, &[&owner_id], "keys_wait_secs = 2\n").as_str()),
    );
    wait_ready(&daemon).await;
    let bot = user_id(&bot);
    let room = owner.direct_room(&bot).await;
    let device = daemon_device(&daemon);
    owner.wait_to_know(&bot, &device).await;
    let encryption = owner.client.encryption();
    let assistant = encryption.get_device(&bot, &device).await.unwrap().unwrap();
    assistant
        .set_local_trust(LocalTrust::BlackListed)
        .await
        .unwrap();
    owner.say(&room, "the plan for Saturday").await;
    // Given up at the first sync after the wait; a typing notice ends the long poll sooner.
    tokio::time::sleep(Duration::from_secs(3)).await;
    room.typing_notice(true).await.unwrap();
    wait_until(60, "the owner is told", || async {
        !owner.seen_from(&bot).is_empty()
    })
    .await;
    let told = owner.seen_from(&bot);
    assert_eq!(told.len(), 1, "{told:#?}");
    assert!(
        told[0]
            .body
            .starts_with("I could not read your encrypted message of ")
            && told[0].body.contains(" in our Matrix direct room: ")
            && told[0].body.ends_with(
                "the keys to decrypt it did not reach my device within 2 seconds. Please send it again."
            ),
        "{told:#?}"
    );
    assert_eq!(told[0].room, room.room_id().as_str(), "in the DM");
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].state, "dead", "{events:#?}");
    assert_eq!(events[0].sender, owner_id.as_str());
    assert!(
        events[0]
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("could not be decrypted")),
        "{events:#?}"
    );
    assert!(model.requests().is_empty(), "nothing reached the model");
    // Told once: later syncs do not tell again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(owner.seen_from(&bot).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_fires_with_no_cli_open_and_arrives_in_the_dm() {
    let (owner, bot, _daemon, _model) = owner_and_daemon(
        vec![
            one_call(
                "call_cron",
                "cron_create",
                json!({"name": "stretch", "schedule": "at +3s", "text": "Remind the owner to stretch."}),
            ),
            text_answer("I will remind you in three seconds."),
            text_answer("Reminder: time to stretch!"),
        ],
        "",
    )
    .await;
    let room = owner.direct_room(&bot).await;
    owner
        .say(&room, "in three seconds remind me to stretch")
        .await;
    wait_until(60, "the reminder arrives", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "Reminder: time to stretch!")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = owner.seen_from(&bot);
    let reminders: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.body == "Reminder: time to stretch!")
        .collect();
    assert_eq!(reminders.len(), 1, "{seen:#?}");
    assert_eq!(reminders[0].room, room.room_id().as_str(), "in the DM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_confirmation_is_answered_by_reacting_and_runs_once() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let post = one_call(
        "call_post",
        "http_request",
        json!({"method": "POST", "url": format!("http://127.0.0.1:{}/water", recorder.port), "body": "on"}),
    );
    let (owner, bot, _daemon, _model) = owner_and_daemon(
        vec![
            post,
            text_answer("Asked you first."),
            text_answer("Watered."),
        ],
        "\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
    )
    .await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "water the plants").await;
    wait_until(60, "the request for confirmation arrives", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body.contains("waits for your confirmation"))
    })
    .await;
    let request = owner
        .seen_from(&bot)
        .into_iter()
        .find(|s| s.body.contains("waits for your confirmation"))
        .unwrap();
    assert!(request.body.contains("react ✅"), "{request:#?}");
    assert!(recorder.seen().is_empty(), "nothing ran before the answer");
    let reaction = ReactionEventContent::new(Annotation::new(
        OwnedEventId::try_from(request.event_id.as_str()).unwrap(),
        "✅".to_owned(),
    ));
    room.send(reaction).await.unwrap();
    wait_until(60, "the action runs", || async {
        !recorder.seen().is_empty()
    })
    .await;
    wait_until(60, "the outcome is told", || async {
        owner.seen_from(&bot).iter().any(|s| {
            s.body.contains("http_request")
                && s.event_id != request.event_id
                && !s.body.contains("waits")
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(recorder.seen().len(), 1, "ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_loses_and_doubles_nothing_and_decryption_survives() {
    let answers: Vec<String> = (0..400)
        .map(|n| text_answer(&format!("answer number {n}")))
        .collect();
    let (owner, bot, daemon, _model) = owner_and_daemon(answers, "").await;
    let room = owner.direct_room(&bot).await;
    let mut sent = Vec::new();
    let mut daemon = Some(daemon);
    for n in 0..50 {
        sent.push(owner.say(&room, &format!("burst message {n}")).await);
        if n == 25 {
            daemon.as_mut().unwrap().kill9();
        }
    }
    let dir = daemon.take().unwrap().into_dir();
    let daemon = TestDaemon::start_in_with_env(dir, &[(PASSWORD_ENV, PASSWORD)]);
    wait_ready(&daemon).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let events = loop {
        let events = matrix_events(&daemon).await;
        if events.len() >= 50 {
            break events;
        }
        let missing: Vec<usize> = (0..50)
            .filter(|n| {
                let text = format!("burst message {n}");
                !events.iter().any(|e| e.text == text)
            })
            .collect();
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until all 50 messages are events; missing {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(events.len(), 50, "each message exactly one event");
    for n in 0..50 {
        let text = format!("burst message {n}");
        assert_eq!(
            events.iter().filter(|e| e.text == text).count(),
            1,
            "{text}: {events:#?}"
        );
    }
    // Every answer the outbox holds arrives, each once.
    wait_until(120, "every answer is delivered", || async {
        let outbox = daemon.cli(&["outbox", "--json"]);
        let lines: Vec<Value> = String::from_utf8_lossy(&outbox.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let answers: Vec<&Value> = lines.iter().filter(|m| m["kind"] == "answer").collect();
        !answers.is_empty()
            && answers
                .iter()
                .all(|m| m["delivered"].get("matrix").is_some())
            && daemon_idle(&daemon)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = owner.seen_from(&bot);
    let mut bodies: Vec<&str> = seen.iter().map(|s| s.body.as_str()).collect();
    bodies.sort();
    let total = bodies.len();
    bodies.dedup();
    assert_eq!(bodies.len(), total, "an answer shown twice: {seen:#?}");
    // Still decrypting after the crash.
    let before = owner.seen_from(&bot).len();
    owner.say(&room, "one more after the crash").await;
    wait_until(60, "the new message is answered", || async {
        owner.seen_from(&bot).len() > before
    })
    .await;
    assert!(
        matrix_events(&daemon)
            .await
            .iter()
            .any(|e| e.text == "one more after the crash")
    );
}

/// No event is waiting to be merged.
fn daemon_idle(daemon: &TestDaemon) -> bool {
    let output = daemon.cli(&["events", "--state", "pending", "--json"]);
    String::from_utf8_lossy(&output.stdout).trim().is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_unlisted_rooms_and_unmentioned_group_chatter_change_nothing() {
    let url = homeserver();
    let (owner_name, bot_name, stranger_name) =
        (unique("owner"), unique("steward"), unique("stranger"));
    synapse(SHARED_PORT, &["register", &bot_name, PASSWORD]);
    let owner = Person::new(&url, SHARED_PORT, &owner_name).await;
    let stranger = Person::new(&url, SHARED_PORT, &stranger_name).await;
    let (owner_id, bot, stranger_id) = (
        user_id(&owner_name),
        user_id(&bot_name),
        user_id(&stranger_name),
    );
    // A group room the owner lists, made before the daemon starts.
    let listed = owner.client.create_dm(&bot).await.unwrap();
    listed.invite_user_by_id(&stranger_id).await.unwrap();
    let model = ScriptedModel::start(vec![text_answer("Yes, in the group.")], 4096);
    let daemon = start(
        &(config(model.port)
            + matrix_config(
                &url,
                &bot_name,
                &[&owner_id],
                &format!("rooms = [\"{}\"]\n", listed.room_id()),
            )
            .as_str()),
    );
    wait_ready(&daemon).await;
    // The stranger's invite is declined and recorded.
    let strangers_room = stranger.client.create_dm(&bot).await.unwrap();
    wait_until(60, "the stranger's invite is recorded", || async {
        matrix_events(&daemon)
            .await
            .iter()
            .any(|e| e.state == "rejected" && e.text.contains(strangers_room.room_id().as_str()))
    })
    .await;
    // The listed group: the stranger joins, then chatter without a mention.
    let joined = stranger
        .client
        .join_room_by_id(listed.room_id())
        .await
        .unwrap();
    wait_until(60, "the assistant is in the group", || async {
        listed
            .members(RoomMemberships::JOIN)
            .await
            .is_ok_and(|m| m.len() == 3)
    })
    .await;
    // Both tracked the assistant before its device existed (the owner made the room before
    // the daemon started).
    let device = daemon_device(&daemon);
    owner.wait_to_know(&bot, &device).await;
    stranger.wait_to_know(&bot, &device).await;
    stranger.say(&joined, "steward, do something for me").await;
    owner.say(&listed, "just chatting with a friend").await;
    owner
        .say(&listed, &format!("{} are you there?", bot.as_str()))
        .await;
    wait_until(60, "the mention is answered", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "Yes, in the group.")
    })
    .await;
    // An unlisted group the owner made: refused.
    let unlisted = owner.client.create_dm(&bot).await.unwrap();
    unlisted.invite_user_by_id(&stranger_id).await.unwrap();
    stranger
        .client
        .join_room_by_id(unlisted.room_id())
        .await
        .ok();
    wait_until(60, "the assistant joins the unlisted room", || async {
        unlisted
            .members(RoomMemberships::JOIN)
            .await
            .is_ok_and(|m| m.iter().any(|m| m.user_id() == bot))
    })
    .await;
    wait_until(30, "the stranger is in the unlisted room", || async {
        unlisted
            .members(RoomMemberships::JOIN)
            .await
            .is_ok_and(|m| m.len() == 3)
    })
    .await;
    owner
        .say(&unlisted, &format!("{} here?", bot.as_str()))
        .await;
    wait_until(60, "the unlisted room's message is refused", || async {
        matrix_events(&daemon)
            .await
            .iter()
            .any(|e| e.text.ends_with(" here?"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = matrix_events(&daemon).await;
    let states: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.state.as_str(), e.text.as_str()))
        .collect();
    let taken: Vec<&EventRow> = events.iter().filter(|e| e.state != "rejected").collect();
    assert_eq!(
        taken.len(),
        1,
        "only the owner's mention is taken: {states:#?}"
    );
    assert!(taken[0].text.contains("are you there?"));
    let rejected = events.iter().filter(|e| e.state == "rejected").count();
    assert_eq!(
        rejected, 3,
        "the invite, the stranger, the unlisted room: {states:#?}"
    );
    assert!(
        !events.iter().any(|e| e.text.contains("just chatting")),
        "chatter is not an event"
    );
    assert_eq!(model.requests().len(), 1, "one model call, for the mention");
    let answers = owner.seen_from(&bot);
    assert_eq!(answers.len(), 1, "{answers:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_homeserver_restart_is_ridden_out_without_loss() {
    // Its own Synapse: stopping the shared one would break the other tests.
    const PORT: u16 = 18009;
    synapse(PORT, &["start"]);
    let url = format!("http://127.0.0.1:{PORT}");
    let (owner_name, bot_name) = (unique("owner"), unique("steward"));
    synapse(PORT, &["register", &bot_name, PASSWORD]);
    let owner = Person::new(&url, PORT, &owner_name).await;
    let (owner_id, bot) = (user_id(&owner_name), user_id(&bot_name));
    let model = ScriptedModel::start(
        vec![text_answer("First answer."), text_answer("Second answer.")],
        4096,
    );
    let daemon =
        start(&(config(model.port) + matrix_config(&url, &bot_name, &[&owner_id], "").as_str()));
    wait_ready(&daemon).await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "before the restart").await;
    wait_until(60, "the first answer", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "First answer.")
    })
    .await;
    synapse(PORT, &["stop"]);
    wait_until(120, "the channel backs off", || async {
        daemon
            .channel_state("matrix")
            .await
            .is_some_and(|s| s.starts_with("backoff"))
    })
    .await;
    synapse(PORT, &["start"]);
    wait_ready(&daemon).await;
    owner.say(&room, "after the restart").await;
    wait_until(120, "the second answer", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "Second answer.")
    })
    .await;
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 2, "{events:#?}");
    synapse(PORT, &["stop"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_and_redactions_are_recorded_not_run_and_unsigned_devices_are_untrusted() {
    let (owner, bot, daemon, model) = owner_and_daemon(
        vec![
            text_answer("Taken."),
            text_answer("Noted, as untrusted content."),
        ],
        "require_verified_devices = true\n",
    )
    .await;
    let room = owner.direct_room(&bot).await;
    let first = owner.say(&room, "the first version").await;
    wait_until(60, "the answer", || async {
        !owner.seen_from(&bot).is_empty()
    })
    .await;
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(
        events[0].trust,
        steward_events::Trust::Owner,
        "a device the owner's identity signed, that identity pinned at first sight"
    );
    let pins =
        std::fs::read_to_string(daemon.path().join("matrix/pinned-identities.json")).unwrap();
    assert!(
        pins.contains(owner.client.user_id().unwrap().as_str()),
        "{pins}"
    );
    let edit = RoomMessageEventContent::text_plain("* the second version").make_replacement(
        matrix_sdk::ruma::events::room::message::ReplacementMetadata::new(first.clone(), None),
    );
    room.send(edit).await.unwrap();
    room.redact(&first, Some("never mind"), None).await.unwrap();
    wait_until(60, "the edit and the redaction are recorded", || async {
        matrix_events(&daemon)
            .await
            .iter()
            .filter(|e| e.state == "handled")
            .count()
            == 2
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = matrix_events(&daemon).await;
    let handled: Vec<&EventRow> = events.iter().filter(|e| e.state == "handled").collect();
    assert!(
        handled.iter().any(|e| e.text.starts_with("an edit of"))
            && handled.iter().any(|e| e.text.starts_with("a redaction of")),
        "{handled:#?}"
    );
    assert_eq!(model.requests().len(), 1, "nothing was run again");

    // A second login with the password alone: a device the owner's identity did not sign.
    let owner_name = owner.client.user_id().unwrap().localpart().to_owned();
    let unsigned = Person::another_device(&homeserver(), &owner_name).await;
    unsigned.wait_to_know(&bot, &daemon_device(&daemon)).await;
    let same_room = unsigned.client.get_room(room.room_id()).unwrap();
    unsigned
        .say(&same_room, "from a device nobody signed")
        .await;
    wait_until(60, "the unsigned device's message is taken", || async {
        matrix_events(&daemon)
            .await
            .iter()
            .any(|e| e.text.contains("from a device nobody signed"))
    })
    .await;
    let events = matrix_events(&daemon).await;
    let taken = events
        .iter()
        .find(|e| e.text.contains("from a device nobody signed"))
        .unwrap();
    assert_eq!(
        taken.trust,
        steward_events::Trust::Untrusted,
        "an owner's device their identity did not sign is untrusted: {taken:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assistant_types_while_a_step_works_and_stops_when_it_ends() {
    // The model holds its first answer past the daemon's model timeout (10 s); the retry
    // answers at once: the step works for about ten seconds, then ends.
    let slow = text_answer("too late").replacen("data: ", "<<PAUSE>>data: ", 1);
    let (owner, bot, _daemon, _model) =
        owner_and_daemon(vec![slow, text_answer("Done at last.")], "").await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "take your time").await;
    let typing_now = || {
        owner
            .typing
            .lock()
            .unwrap()
            .last()
            .is_some_and(|who| who.contains(&bot.to_string()))
    };
    wait_until(30, "the assistant is shown typing", || async {
        typing_now()
    })
    .await;
    // Renewed while the step works: still typing after the first notice would have lapsed.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(typing_now(), "the notice is renewed while the step works");
    wait_until(120, "the answer", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "Done at last.")
    })
    .await;
    wait_until(30, "the notice is cleared", || async { !typing_now() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_direct_room_yet_the_assistant_opens_one_and_the_owner_reads_it() {
    let (owner, bot, daemon, _model) = owner_and_daemon(Vec::new(), "").await;
    let call = daemon.cli(&[
        "tools",
        "call",
        "notify_owner",
        "--args",
        r#"{"text":"the backup finished"}"#,
    ]);
    assert!(call.status.success(), "{call:?}");
    // The room can be listed before its invite event is read: wait for both.
    wait_until(60, "the assistant invites the owner", || async {
        match owner.client.invited_rooms().first() {
            Some(room) => room.invite_details().await.is_ok(),
            None => false,
        }
    })
    .await;
    let invited = owner.client.invited_rooms().remove(0);
    let inviter = invited.invite_details().await.unwrap().inviter_id;
    assert_eq!(inviter, bot);
    invited.join().await.unwrap();
    wait_until(60, "the notice is read in the new room", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "the backup finished" && s.room == invited.room_id().as_str())
    })
    .await;
    assert!(
        invited
            .latest_encryption_state()
            .await
            .unwrap()
            .is_encrypted(),
        "the room the assistant opens is encrypted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_saying_no_to_a_request_denies_it_and_nothing_runs() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let post = one_call(
        "call_post",
        "http_request",
        json!({"method": "POST", "url": format!("http://127.0.0.1:{}/water", recorder.port), "body": "on"}),
    );
    let (owner, bot, daemon, model) = owner_and_daemon(
        vec![
            post,
            text_answer("Asked you first."),
            text_answer("Understood."),
        ],
        "\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
    )
    .await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "water the plants").await;
    wait_until(60, "the request for confirmation arrives", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body.contains("waits for your confirmation"))
    })
    .await;
    let request = owner
        .seen_from(&bot)
        .into_iter()
        .find(|s| s.body.contains("waits for your confirmation"))
        .unwrap();
    let calls_before = model.requests().len();
    room.send_raw(
        "m.room.message",
        json!({"msgtype": "m.text", "body": "no too risky",
            "m.relates_to": {"m.in_reply_to": {"event_id": request.event_id}}}),
    )
    .await
    .unwrap();
    wait_until(60, "the denial is told", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body.to_lowercase().contains("denied"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(recorder.seen().is_empty(), "a denied action never runs");
    let handled: Vec<EventRow> = matrix_events(&daemon)
        .await
        .into_iter()
        .filter(|e| e.state == "handled")
        .collect();
    assert_eq!(handled.len(), 1, "the answer is recorded: {handled:#?}");
    let requests = model.requests();
    assert!(
        !requests[calls_before..]
            .iter()
            .any(|r| r["messages"].to_string().contains("no too risky")),
        "the answer is not a message for the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_sent_while_the_daemon_was_down_is_taken_even_past_the_timeline_limit() {
    // More than a sync's timeline holds (100 per room): the cut timeline is filled in.
    let answers: Vec<String> = (0..400)
        .map(|n| text_answer(&format!("reply {n}")))
        .collect();
    let (owner, bot, mut daemon, _model) = owner_and_daemon(answers, "").await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "before going down").await;
    wait_until(60, "the first is taken", || async {
        matrix_events(&daemon).await.len() == 1
    })
    .await;
    daemon.kill9();
    for n in 0..130 {
        owner.say(&room, &format!("while down {n}")).await;
    }
    let daemon = TestDaemon::start_in_with_env(daemon.into_dir(), &[(PASSWORD_ENV, PASSWORD)]);
    wait_until(120, "every message is an event", || async {
        matrix_events(&daemon).await.len() >= 131
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = matrix_events(&daemon).await;
    assert_eq!(events.len(), 131, "nothing lost, nothing twice");
    for n in 0..130 {
        let text = format!("while down {n}");
        assert_eq!(
            events.iter().filter(|e| e.text == text).count(),
            1,
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_off_an_encrypted_room_is_refused_and_a_long_answer_comes_in_parts() {
    let long: String = (0..1200)
        .map(|n| format!("line {n:04} of a long answer\n"))
        .collect();
    let (owner, bot, daemon, _model) =
        owner_and_daemon(vec![text_answer(&long)], "e2ee = false\n").await;
    // An encrypted DM: refused, nothing is sent back into it.
    let encrypted = owner.direct_room(&bot).await;
    owner.say(&encrypted, "can you read this?").await;
    wait_until(60, "the encrypted message is refused", || async {
        matrix_events(&daemon).await.iter().any(|e| {
            e.state == "rejected" && e.detail.as_deref().is_some_and(|d| d.contains("e2ee"))
        })
    })
    .await;
    // A plain room: taken, and the 34 KB answer arrives in parts, in order, whole.
    let request = matrix_sdk::ruma::api::client::room::create_room::v3::Request::new();
    let plain = owner.client.create_room(request).await.unwrap();
    plain.invite_user_by_id(&bot).await.unwrap();
    wait_until(60, "the assistant joins the plain room", || async {
        plain
            .members(RoomMemberships::JOIN)
            .await
            .is_ok_and(|m| m.iter().any(|m| m.user_id() == bot))
    })
    .await;
    owner.say(&plain, "tell me everything").await;
    wait_until(60, "the whole answer arrives", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.room == plain.room_id().as_str() && s.body.contains("line 1199"))
    })
    .await;
    let parts: Vec<Seen> = owner
        .seen_from(&bot)
        .into_iter()
        .filter(|s| s.room == plain.room_id().as_str())
        .collect();
    assert!(parts.len() >= 3, "split into parts: {}", parts.len());
    assert!(parts.iter().all(|p| p.body.len() <= 16_000));
    let whole: String = parts
        .iter()
        .map(|p| p.body.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for n in [0, 600, 1199] {
        assert!(
            whole.contains(&format!("line {n:04} of a long answer")),
            "line {n}"
        );
    }
    assert!(
        owner
            .seen_from(&bot)
            .iter()
            .all(|s| s.room != encrypted.room_id().as_str()),
        "nothing went back into the encrypted room"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_token_logs_in_as_its_own_device_and_a_revoked_password_session_logs_in_anew() {
    let url = homeserver();
    let (owner_name, bot_name) = (unique("owner"), unique("steward"));
    synapse(SHARED_PORT, &["register", &bot_name, PASSWORD]);
    let owner = Person::new(&url, SHARED_PORT, &owner_name).await;
    let (owner_id, bot) = (user_id(&owner_name), user_id(&bot_name));
    // A token made elsewhere (its device has no keys yet): the daemon becomes that device.
    let minted = Client::builder()
        .homeserver_url(&url)
        .build()
        .await
        .unwrap();
    let login = minted
        .matrix_auth()
        .login_username(&bot_name, PASSWORD)
        .send()
        .await
        .unwrap();
    let model = ScriptedModel::start(
        vec![text_answer("By token."), text_answer("By a new device.")],
        4096,
    );
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), &login.access_token).unwrap();
    let by_token = format!(
        "\n[matrix]\nhomeserver = \"{url}\"\nuser_id = \"{bot}\"\naccess_token_file = {:?}\nowners = [\"{owner_id}\"]\n",
        token_file.path().display().to_string()
    );
    let mut daemon = TestDaemon::start_with(&(config(model.port) + by_token.as_str()));
    wait_ready(&daemon).await;
    let room = owner.direct_room(&bot).await;
    owner.say(&room, "who are you?").await;
    wait_until(60, "the answer by token", || async {
        owner.seen_from(&bot).iter().any(|s| s.body == "By token.")
    })
    .await;
    let session: Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.path().join("matrix/session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        session["device_id"],
        login.device_id.as_str(),
        "the token's own device"
    );
    assert!(daemon.terminate().success());

    // Now by password, after the token was revoked: a new device, the old store set aside,
    // and the owner's next message is still read and answered.
    minted.matrix_auth().logout().await.unwrap();
    let dir = daemon.into_dir();
    let by_password = matrix_config(&url, &bot_name, &[&owner_id], "");
    std::fs::write(
        dir.path().join("config.toml"),
        config(model.port) + by_password.as_str(),
    )
    .unwrap();
    // The saved session names the revoked token: restoring it fails with M_UNKNOWN_TOKEN.
    let daemon = TestDaemon::start_in_with_env(dir, &[(PASSWORD_ENV, PASSWORD)]);
    wait_ready(&daemon).await;
    let aside = std::fs::read_dir(daemon.path().join("matrix"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("store.old-"))
        .count();
    assert_eq!(aside, 1, "the old device's store is kept aside");
    let device = daemon_device(&daemon);
    assert_ne!(device, login.device_id, "a new device");
    owner.wait_to_know(&bot, &device).await;
    owner.say(&room, "and now?").await;
    wait_until(60, "the answer from the new device", || async {
        owner
            .seen_from(&bot)
            .iter()
            .any(|s| s.body == "By a new device.")
    })
    .await;
    // The identity was made by the first device, whose keys stayed in the store set aside:
    // the new device is not signed by it, and `steward doctor` says so.
    let mut daemon = daemon;
    assert!(daemon.terminate().success());
    let check = doctor_check(&daemon);
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("the device is not signed by the account's cross-signing identity"),
        "{check}"
    );
}

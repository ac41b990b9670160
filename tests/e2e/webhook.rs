//! Webhook deliveries over real HTTP on 127.0.0.1 to the real daemon: signed deliveries are
//! stored before 202, redeliveries answered as duplicates, refusals store nothing.

use std::time::Duration;

use serde_json::{Value, json};
use steward_daemon::channels::http::verify::hmac_sha256;
use steward_events::to_hex;

use crate::support::TestDaemon;

const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const STRIPE_SECRET: &str = "whsec_test_secret";

fn config(extra: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"STEWARD_TEST_GH_SECRET\"\ntext = \"{{header.x-github-event}} on {{body.repository.full_name}}\"\n{extra}\n[[webhook.routes]]\nname = \"pay\"\nauth = \"stripe\"\nsecret_env = \"STEWARD_TEST_STRIPE_SECRET\"\n"
    )
}

fn start(extra: &str) -> TestDaemon {
    TestDaemon::start_with_env(
        &config(extra),
        &[
            ("STEWARD_TEST_GH_SECRET", GITHUB_SECRET),
            ("STEWARD_TEST_STRIPE_SECRET", STRIPE_SECRET),
        ],
    )
}

fn base(daemon: &TestDaemon) -> String {
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    format!("http://{address}")
}

fn github_post(
    client: &reqwest::Client,
    base: &str,
    delivery: &str,
    body: &str,
    secret: &str,
) -> reqwest::RequestBuilder {
    let signature = format!(
        "sha256={}",
        to_hex(&hmac_sha256(secret.as_bytes(), body.as_bytes()))
    );
    client
        .post(format!("{base}/hooks/gh"))
        .header("X-Hub-Signature-256", signature)
        .header("X-GitHub-Delivery", delivery)
        .header("X-GitHub-Event", "push")
        .body(body.to_owned())
}

/// GET a `/v1` route with the token; its JSON body.
async fn get_json(client: &reqwest::Client, url: String, token: &str) -> Value {
    let response = client.get(url).bearer_auth(token).send().await.unwrap();
    serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
}

async fn webhook_events(daemon: &TestDaemon) -> Vec<steward_protocol::EventRow> {
    daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e.channel.starts_with("webhook:"))
        .collect()
}

/// GitHub's default content type for a new hook is `form`: `payload=<url-encoded JSON>`.
/// The signature is over those raw bytes; the templates and the text read the JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_github_form_delivery_reads_as_the_json_it_carries() {
    let daemon = start("");
    let base = base(&daemon);
    let client = reqwest::Client::new();
    let json = r#"{"ref":"refs/heads/main","repository":{"full_name":"me/steward"},"head_commit":{"message":"Grüße & more"}}"#;
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", json)
        .finish();
    assert!(body.starts_with("payload=%7B"), "{body}");
    let response = github_post(&client, &base, "form-1", &body, GITHUB_SECRET)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let events = webhook_events(&daemon).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let text = &events[0].text;
    assert!(text.starts_with("push on me/steward"), "{text}");
    assert!(text.contains("Grüße & more"), "{text}");
    assert!(!text.contains("%7B"), "no percent-encoding left: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_deliveries_are_stored_once_and_refusals_store_nothing() {
    let daemon = start("");
    let base = base(&daemon);
    let client = reqwest::Client::new();
    let body = json!({"repository": {"full_name": "me/steward"}}).to_string();

    let response = github_post(&client, &base, "d-1", &body, GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let first: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    let events = webhook_events(&daemon).await;
    assert_eq!(events.len(), 1, "durable before the 202");
    assert_eq!(
        events[0].id.to_string(),
        first["event_id"].as_str().unwrap()
    );
    assert!(
        events[0].text.starts_with("push on me/steward"),
        "{:?}",
        events[0].text
    );

    // The same delivery again: one event, the answer says duplicate.
    let response = github_post(&client, &base, "d-1", &body, GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let again: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(
        again,
        json!({"event_id": first["event_id"], "duplicate": true})
    );

    // Wrong or missing signatures: 401, no detail, nothing stored.
    let wrong = github_post(&client, &base, "d-2", &body, "another secret")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.bytes().await.unwrap().is_empty());
    let missing = client
        .post(format!("{base}/hooks/gh"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);

    // Stripe: current timestamp accepted, one outside the tolerance refused.
    let stripe = |t: i64, body: &str| {
        let signed = format!("{t}.{body}");
        let v1 = to_hex(&hmac_sha256(STRIPE_SECRET.as_bytes(), signed.as_bytes()));
        client
            .post(format!("{base}/hooks/pay"))
            .header("Stripe-Signature", format!("t={t},v1={v1}"))
            .body(body.to_owned())
    };
    let now = chrono::Utc::now().timestamp();
    let paid = r#"{"id":"evt_42","type":"charge.succeeded"}"#;
    assert_eq!(stripe(now, paid).send().await.unwrap().status(), 202);
    assert_eq!(
        stripe(now - 600, r#"{"id":"evt_43"}"#)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    // Two deliveries stored, plus the redelivery recorded (visible) as a duplicate.
    let events = webhook_events(&daemon).await;
    let states: Vec<&str> = events.iter().map(|e| e.state.as_str()).collect();
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_eq!(
        states.iter().filter(|s| **s == "duplicate").count(),
        1,
        "{states:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e.source == steward_events::Source::Webhook)
    );
    assert_eq!(
        client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        client
            .post(format!("{base}/hooks/nope"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_too_fast_deliveries_are_refused() {
    let daemon = start("max_body_bytes = 1000\nrate_per_min = 3\n");
    let base = base(&daemon);
    let client = reqwest::Client::new();
    let big = "x".repeat(2000);
    let response = github_post(&client, &base, "big", &big, GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let mut statuses = Vec::new();
    for i in 0..5 {
        let response = github_post(&client, &base, &format!("r-{i}"), "{}", GITHUB_SECRET)
            .send()
            .await
            .unwrap();
        if response.status() == 429 {
            let retry: u64 = response.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(retry >= 1, "{retry}");
        }
        statuses.push(response.status().as_u16());
    }
    // The oversized one did not use up the rate (it was refused first).
    assert_eq!(statuses, [202, 202, 202, 429, 429]);
    assert_eq!(webhook_events(&daemon).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_deliveries_make_a_thousand_events() {
    let daemon = start("");
    let base = base(&daemon);
    // One connection per delivery, closed after its answer, as webhook senders do. A pooled
    // connection would sit idle until the server's header timeout (10 s) closes it, and a
    // request sent on it at that moment is reset — HTTP keep-alive's own race, which a
    // loaded CI machine hit once (2026-12-06), not something this test is about.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut posts = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let request = github_post(&client, &base, &format!("c-{i}"), "{}", GITHUB_SECRET);
        posts.spawn(async move { request.send().await.map(|r| r.status().as_u16()) });
    }
    let mut accepted = 0;
    while let Some(status) = posts.join_next().await {
        if status.unwrap().unwrap() == 202 {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 1000);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let events = webhook_events(&daemon).await;
        let merged = events.iter().filter(|e| e.state == "merged").count();
        if events.len() == 1000 && merged == 1000 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} events, {merged} merged",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_acknowledged_before_kill_9_is_there_after_restart() {
    let mut daemon = start("");
    let base = base(&daemon);
    let client = reqwest::Client::new();
    let response = github_post(&client, &base, "k-1", "{}", GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let id: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    daemon.kill9();
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in_with_env(
        dir,
        &[
            ("STEWARD_TEST_GH_SECRET", GITHUB_SECRET),
            ("STEWARD_TEST_STRIPE_SECRET", STRIPE_SECRET),
        ],
    );
    let events = webhook_events(&daemon).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id.to_string(), id["event_id"].as_str().unwrap());
}

#[test]
fn a_missing_secret_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), config("")).unwrap();
    let output = std::process::Command::new(crate::support::BIN)
        .args(crate::support::common_args(dir.path()))
        .arg("run")
        .env_remove("STEWARD_TEST_GH_SECRET")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    assert!(
        crate::support::stderr(&output).contains("webhook.routes[0]"),
        "{output:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_api_sends_streams_and_confirms_with_its_token() {
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let daemon = TestDaemon::start_with(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
    );
    let base = base(&daemon);
    let token = crate::support::stdout(&daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    assert_eq!(token.len(), 40, "{token}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(daemon.path().join("api.token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let client = reqwest::Client::new();

    // Without the token: 401, nothing stored.
    let refused = client
        .post(format!("{base}/v1/messages"))
        .body(r#"{"text":"hi"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(daemon.events().await.len(), 0);

    // A message: 202, and its reply arrives on the stream.
    let mut stream = client
        .get(format!("{base}/v1/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // The daemon's own commands are answered at once, without a model or an event.
    let help = client
        .post(format!("{base}/v1/messages"))
        .bearer_auth(&token)
        .body(r#"{"text":"/help"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(help.status(), 200);
    let help: Value = serde_json::from_slice(&help.bytes().await.unwrap()).unwrap();
    assert!(
        help["reply"]
            .as_str()
            .is_some_and(|r| r.contains("/pending")),
        "{help}"
    );
    assert_eq!(daemon.events().await.len(), 0, "no event for a command");
    let sent = client
        .post(format!("{base}/v1/messages"))
        .bearer_auth(&token)
        .body(r#"{"text":"hello"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    let event_id =
        serde_json::from_slice::<Value>(&sent.bytes().await.unwrap()).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !(seen.contains("event: reply") && seen.contains(&event_id)) {
        assert!(std::time::Instant::now() < deadline, "{seen}");
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("No model is configured"), "{seen}");

    // A pending action confirmed over HTTP runs once.
    let args = json!({"method": "POST", "url": format!("http://127.0.0.1:{}/order", recorder.port), "body": "tea"});
    let (_, line) = crate::http::call(&daemon, &args);
    assert_eq!(line["outcome"], "pending", "{line}");
    let id = line["pending_id"].as_str().unwrap();
    let listed: Value = get_json(&client, format!("{base}/v1/pending"), &token).await;
    assert_eq!(listed[0]["id"], id);
    let confirm = |client: &reqwest::Client| {
        client
            .post(format!("{base}/v1/pending/{id}/confirm"))
            .bearer_auth(&token)
            .send()
    };
    assert_eq!(confirm(&client).await.unwrap().status(), 200);
    // A second confirmation reports the action; it does not run it again.
    let _ = confirm(&client).await.unwrap();
    assert_eq!(recorder.seen().len(), 1);

    // Listings as the CLI's --json, as JSON arrays.
    let events: Value = get_json(&client, format!("{base}/v1/events?limit=1"), &token).await;
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert!(events[0]["state"].is_string());
    let items: Value = get_json(&client, format!("{base}/v1/trajectory?limit=3"), &token).await;
    assert_eq!(items.as_array().unwrap().len(), 3, "{items}");

    // Metrics: Prometheus text behind the token.
    let metrics = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 401);
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "# TYPE steward_events_total counter",
        "steward_inbox_pending ",
        "steward_channel_up{channel=\"http\"} 1",
        "steward_pending_actions{state=",
        "steward_events_terminal_total{source=\"user\",state=\"merged\"}",
        "steward_tool_calls_total{tool=\"http_request\",outcome=\"ok\"} 1",
        "steward_steps_total ",
        "steward_ledger_actions{state=\"completed\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing in:\n{metrics}");
    }

    // Rotation: the old token stops working at once.
    let rotated = crate::support::stdout(&daemon.cli(&["token", "rotate"]))
        .trim()
        .to_owned();
    assert_ne!(rotated, token);
    let old = client
        .get(format!("{base}/v1/status"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 401);
    let new = client
        .get(format!("{base}/v1/status"))
        .bearer_auth(&rotated)
        .send()
        .await
        .unwrap();
    assert_eq!(new.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_policy_decides_trust_and_refusals_are_recorded() {
    let daemon = TestDaemon::start_with_env(
        &format!(
            "{}\n[senders]\ntrusted = [\"webhook:gh\"]\nunknown = \"reject\"\n",
            config("")
        ),
        &[
            ("STEWARD_TEST_GH_SECRET", GITHUB_SECRET),
            ("STEWARD_TEST_STRIPE_SECRET", STRIPE_SECRET),
        ],
    );
    let base = base(&daemon);
    let client = reqwest::Client::new();
    // A listed sender: accepted, as trusted content.
    let response = github_post(&client, &base, "s-1", "{}", GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    // An authenticated but unknown sender: refused, and the refusal is recorded.
    let now = chrono::Utc::now().timestamp();
    let body = r#"{"id":"evt_9"}"#;
    let v1 = to_hex(&hmac_sha256(
        STRIPE_SECRET.as_bytes(),
        format!("{now}.{body}").as_bytes(),
    ));
    let refused = client
        .post(format!("{base}/hooks/pay"))
        .header("Stripe-Signature", format!("t={now},v1={v1}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let events = webhook_events(&daemon).await;
    let pay = events.iter().find(|e| e.channel == "webhook:pay").unwrap();
    assert_eq!(pay.state, "rejected");
    assert!(
        pay.detail
            .as_deref()
            .unwrap()
            .contains("not a known sender"),
        "{pay:?}"
    );
    let items = daemon
        .wait_for_trajectory("the trusted delivery", |items| {
            items.iter().any(|i| matches!(&i.kind, steward_events::ItemKind::Event { channel, .. } if channel == "webhook:gh"))
        })
        .await;
    let trust = items.iter().find_map(|i| match &i.kind {
        steward_events::ItemKind::Event { channel, trust, .. } if channel == "webhook:gh" => {
            Some(*trust)
        }
        _ => None,
    });
    assert_eq!(trust, Some(steward_events::Trust::Trusted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_times_out_and_stores_nothing() {
    use std::io::{Read, Write};
    let daemon = TestDaemon::start_with_env(
        &config("").replace("[http]\n", "[http]\nrequest_timeout_secs = 1\n"),
        &[
            ("STEWARD_TEST_GH_SECRET", GITHUB_SECRET),
            ("STEWARD_TEST_STRIPE_SECRET", STRIPE_SECRET),
        ],
    );
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    stream
        .write_all(b"POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"par")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = [0u8; 64];
    let n = stream.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(webhook_events(&daemon).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_and_standard_routes_readiness_and_a_denial_over_http() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let daemon = TestDaemon::start_with_env(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"ci\"\nauth = \"bearer\"\nsecret_env = \"T_BEARER\"\n\n[[webhook.routes]]\nname = \"std\"\nauth = \"standard\"\nsecret_env = \"T_STD\"\n\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
        &[("T_BEARER", "ci-token"), ("T_STD", secret)],
    );
    let base = base(&daemon);
    let client = reqwest::Client::new();
    let bearer = |token: &str, key: &str| {
        client
            .post(format!("{base}/hooks/ci"))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .body("{}")
    };
    assert_eq!(bearer("ci-token", "k1").send().await.unwrap().status(), 202);
    assert_eq!(bearer("ci-token", "k1").send().await.unwrap().status(), 200);
    assert_eq!(bearer("nope", "k2").send().await.unwrap().status(), 401);

    // Standard Webhooks: signed now with the specification's secret.
    let now = chrono::Utc::now().timestamp();
    let body = r#"{"test": 2432232314}"#;
    let key =
        steward_daemon::channels::http::verify::base64_decode(secret.trim_start_matches("whsec_"))
            .unwrap();
    let signed = format!("msg_1.{now}.{body}");
    let signature = steward_daemon::channels::http::verify::base64_encode(&hmac_sha256(
        &key,
        signed.as_bytes(),
    ));
    let response = client
        .post(format!("{base}/hooks/std"))
        .header("webhook-id", "msg_1")
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", format!("v1,{signature}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    assert_eq!(
        webhook_events(&daemon).await.len(),
        3,
        "two stored, one duplicate"
    );

    assert_eq!(
        client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    // A pending action denied over HTTP does not run.
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let args = json!({"method": "POST", "url": format!("http://127.0.0.1:{}/x", recorder.port), "body": "b"});
    let (_, line) = crate::http::call(&daemon, &args);
    let id = line["pending_id"].as_str().unwrap();
    let token = crate::support::stdout(&daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    let denied = client
        .post(format!("{base}/v1/pending/{id}/deny"))
        .bearer_auth(&token)
        .body(r#"{"reason":"not now"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 200);
    let row: Value = serde_json::from_slice(&denied.bytes().await.unwrap()).unwrap();
    assert_eq!(row["state"], "denied", "{row}");
    assert!(recorder.seen().is_empty());
}

/// An empty or blank message is refused alike by both front doors: recorded `rejected`
/// with the same reason, no step run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_message_is_rejected_by_http_as_by_the_socket() {
    let daemon = start("");
    let base = base(&daemon);
    let token = crate::support::stdout(&daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    let client = reqwest::Client::new();
    for text in ["", "  \n\t "] {
        let response = client
            .post(format!("{base}/v1/messages"))
            .bearer_auth(&token)
            .body(json!({ "text": text }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{text:?}");
        let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(body["rejected"], "empty message", "{body}");
        assert!(body["event_id"].is_string(), "{body}");
    }
    let socket = daemon.cli(&["send", ""]);
    assert!(!socket.status.success(), "{socket:?}");
    assert!(
        crate::support::stderr(&socket).contains("empty message"),
        "{socket:?}"
    );
    let events = daemon.events().await;
    assert_eq!(events.len(), 3, "{events:#?}");
    for event in &events {
        assert_eq!(event.state, "rejected", "{event:#?}");
        assert_eq!(event.detail.as_deref(), Some("empty message"), "{event:#?}");
    }
    let merged = daemon.trajectory().await;
    assert!(
        crate::support::merged_ids(&merged).is_empty(),
        "no step ran: {merged:#?}"
    );
    // The state filter is checked as the CLI checks it, not matched as a string.
    let rejected = get_json(&client, format!("{base}/v1/events?state=rejected"), &token).await;
    assert_eq!(rejected.as_array().map(Vec::len), Some(3), "{rejected}");
    let bogus = client
        .get(format!("{base}/v1/events?state=done"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(bogus.status(), 400);
    let body: Value = serde_json::from_slice(&bogus.bytes().await.unwrap()).unwrap();
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("not an event state")),
        "{body}"
    );
}

/// Both front doors are one owner API: the jobs and watches HTTP lists are the rows the CLI
/// prints, a chat answer `/deny ID reason` works over HTTP as in `steward chat`, and an
/// unknown action is refused with the same words (404 over HTTP, an error on the socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_the_socket_answer_from_one_owner_api() {
    let watched = tempfile::tempdir().unwrap();
    let recorder = crate::http::Recorder::start(Duration::ZERO);
    let daemon = TestDaemon::start_with(&format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n\n\
         [[cron]]\nname = \"stretch\"\nschedule = \"0 9 * * *\"\ntz = \"UTC\"\ntext = \"stretch\"\n\n\
         [[watch]]\nname = \"inbox\"\npath = \"{}\"\n",
        watched.path().display()
    ));
    let base = base(&daemon);
    let token = crate::support::stdout(&daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    let client = reqwest::Client::new();
    let lines = |args: &[&str]| -> Vec<Value> {
        crate::support::stdout(&daemon.cli(args))
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };

    let jobs = get_json(&client, format!("{base}/v1/cron"), &token).await;
    assert_eq!(jobs, Value::Array(lines(&["cron", "list", "--json"])));
    assert_eq!(jobs[0]["name"], "stretch", "{jobs}");
    let watches = get_json(&client, format!("{base}/v1/watches"), &token).await;
    assert_eq!(watches, Value::Array(lines(&["watch", "list", "--json"])));
    assert_eq!(watches[0]["name"], "inbox", "{watches}");

    // A chat answer to a pending action, sent as a message over HTTP.
    let args = json!({"method": "POST", "url": format!("http://127.0.0.1:{}/x", recorder.port), "body": "b"});
    let (_, line) = crate::http::call(&daemon, &args);
    let id = line["pending_id"].as_str().unwrap();
    let answered = client
        .post(format!("{base}/v1/messages"))
        .bearer_auth(&token)
        .body(json!({ "text": format!("/deny {id} not today") }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let row: Value = serde_json::from_slice(&answered.bytes().await.unwrap()).unwrap();
    assert_eq!(row["state"], "denied", "{row}");
    assert_eq!(row["state_reason"], "not today", "{row}");
    assert!(recorder.seen().is_empty());

    // The same refusal, in the same words, from both doors.
    let http = client
        .post(format!("{base}/v1/pending/nosuch/confirm"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), 404);
    let body: Value = serde_json::from_slice(&http.bytes().await.unwrap()).unwrap();
    let message = body["error"].as_str().unwrap().to_owned();
    assert!(!message.is_empty(), "{body}");
    let socket = daemon.cli(&["confirm", "nosuch"]);
    assert!(!socket.status.success(), "{socket:?}");
    assert!(
        crate::support::stderr(&socket).contains(&message),
        "{message:?} in {socket:?}"
    );
}

/// The owner API answers only to its own names: a request with a valid token but a foreign
/// `Host` (what a DNS-rebinding page sends) gets 421 and does nothing; a configured name and
/// loopback work; no token gets 401 with `WWW-Authenticate` and a JSON error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_api_refuses_foreign_host_names_and_says_how_to_authenticate() {
    let daemon = TestDaemon::start_with(
        "[http]\nlisten = \"127.0.0.1:0\"\nhosts = [\"steward.home.arpa\"]\n",
    );
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let port = address.trim().rsplit(':').next().unwrap().to_owned();
    let token = crate::support::stdout(&daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    let request = |host: String, token: Option<String>| {
        let address = address.trim().to_owned();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            let auth = token
                .map(|t| format!("Authorization: Bearer {t}\r\n"))
                .unwrap_or_default();
            let body = r#"{"text":"hello"}"#;
            stream
                .write_all(
                    format!(
                        "POST /v1/messages HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        }
    };
    let rebound = request(format!("evil.example:{port}"), Some(token.clone())).await;
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(rebound.contains("http.hosts"), "{rebound}");
    assert_eq!(
        daemon.events().await.len(),
        0,
        "a refused request stores nothing"
    );

    let named = request(format!("steward.home.arpa:{port}"), Some(token.clone())).await;
    assert!(named.starts_with("HTTP/1.1 202"), "{named}");
    let local = request(format!("localhost:{port}"), Some(token.clone())).await;
    assert!(local.starts_with("HTTP/1.1 202"), "{local}");

    let anonymous = request(format!("127.0.0.1:{port}"), None).await;
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    assert!(
        anonymous
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{anonymous}"
    );
    assert!(anonymous.contains(r#""error""#), "{anonymous}");
}

/// Slowloris: a client that trickles its headers is cut off after `http.header_timeout_secs`,
/// and while `http.max_connections` are taken a new client waits — then is served once a
/// slow one is cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_trickling_headers_are_cut_off_and_connections_are_capped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let daemon = TestDaemon::start_with(
        "[http]\nlisten = \"127.0.0.1:0\"\nmax_connections = 2\nheader_timeout_secs = 1\n",
    );
    let address = std::fs::read_to_string(daemon.path().join("http.addr"))
        .unwrap()
        .trim()
        .to_owned();
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x")
            .await
            .unwrap();
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let waiting = {
        let address = address.clone();
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        })
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting client is served once a slow one is cut off")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "it waited for a place: {:?}",
        started.elapsed()
    );
    for mut stream in slow {
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "a trickling client is disconnected");
        assert!(
            !String::from_utf8_lossy(&rest).contains("200 OK"),
            "never answered"
        );
    }
}

/// Without a model, a delivery is merged and nobody is told "no model is configured" about
/// it (a burst of webhooks made as many messages for the owner); the owner still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_a_delivery_is_recorded_and_only_the_owner_is_answered() {
    let daemon = start("");
    let client = reqwest::Client::new();
    let base = base(&daemon);
    let body = r#"{"repository":{"full_name":"me/steward"}}"#;
    let response = github_post(&client, &base, "quiet-1", body, GITHUB_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    daemon
        .wait_for_events("the delivery merged", |events| {
            events
                .iter()
                .any(|e| e.channel == "webhook:gh" && e.state == "merged")
        })
        .await;
    let answered = daemon.cli(&["send", "--wait", "hello"]);
    assert!(
        crate::support::stdout(&answered).contains("No model is configured"),
        "{answered:?}"
    );
    let outbox = crate::support::stdout(&daemon.cli(&["outbox", "--json"]));
    assert_eq!(
        outbox.lines().count(),
        1,
        "one answer, to the owner: {outbox}"
    );
}

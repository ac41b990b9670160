//! The owner's web page through the real daemon: over plain HTTP for its defences (a
//! login link works once, every page needs the session, a change needs the session, its
//! CSRF token and this origin, a foreign `Host` is refused) and in a real headless
//! Chromium (Debian's, over WebDriver) as its owner uses it, with screenshots of every page
//! at desktop and phone width under `target/web-screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::model::{config, text_answer, text_held_after};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, stdout, wait_until};

/// A job and a policy that makes file writes ask first.
const CONFIG: &str = r#"
[http]
listen = "127.0.0.1:0"

[[cron]]
name = "brief"
schedule = "0 7 * * *"
tz = "Europe/Berlin"
text = "morning brief"

[[tools.policy]]
id = "careful-writes"
tool = "fs_write"
decision = "confirm"
"#;

struct Page {
    daemon: TestDaemon,
    base: String,
    http: reqwest::Client,
}

impl Page {
    fn start(extra: &str) -> Self {
        let daemon = TestDaemon::start_with(&format!("{extra}\n{CONFIG}"));
        let addr = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            daemon,
            base: format!("http://{}", addr.trim()),
            http,
        }
    }

    fn login_link(&self) -> String {
        let output = self.daemon.cli(&["web", "login", "--json"]);
        assert!(output.status.success(), "{output:?}");
        let link: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        link["url"].as_str().unwrap().to_owned()
    }

    /// Logs in with a fresh link; the session cookie (`name=value`).
    async fn login(&self) -> String {
        let answer = self.http.get(self.login_link()).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
        cookie.split(';').next().unwrap().to_owned()
    }

    async fn get(&self, path: &str, cookie: Option<&str>) -> (u16, String) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let answer = request.send().await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.text().await.unwrap())
    }

    /// The CSRF token the page at `path` carries.
    async fn csrf(&self, cookie: &str, path: &str) -> String {
        let (_, html) = self.get(path, Some(cookie)).await;
        let at = html
            .find(r#"name="csrf" value=""#)
            .expect("a form with its token")
            + 19;
        html[at..at + 40].to_owned()
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap().status().as_u16()
    }

    fn job_paused(&self) -> bool {
        let jobs = stdout(&self.daemon.cli(&["cron", "list", "--json"]));
        let brief: Value = jobs
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|j| j["name"] == "brief")
            .unwrap();
        brief["paused"] == true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_works_once_and_every_page_needs_the_session() {
    let page = Page::start("");
    for path in [
        "/",
        "/chat",
        "/approvals",
        "/activity",
        "/schedule",
        "/web/stream",
    ] {
        let (status, html) = page.get(path, None).await;
        assert_eq!(status, 401, "{path}");
        assert!(html.contains("steward web login"), "{path}: {html}");
    }
    let link = page.login_link();
    assert!(
        link.starts_with(&format!("{}/login?token=", page.base)),
        "{link}"
    );
    let first = page.http.get(&link).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let cookie = first.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=2592000"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let headers = first.headers().clone();
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(
        page.http.get(&link).send().await.unwrap().status(),
        403,
        "a link works once"
    );
    let session = cookie.split(';').next().unwrap();
    for (path, shows) in [
        ("/", "Waiting for you"),
        ("/chat", "Nothing said yet"),
        ("/approvals", "Nothing waits for your approval"),
        ("/activity", "<table>"),
        ("/schedule", "morning brief"),
    ] {
        let (status, html) = page.get(path, Some(session)).await;
        assert_eq!(status, 200, "{path}");
        assert!(html.contains(shows), "{path}: {html}");
        assert!(!html.contains("<script>"), "no inline script on {path}");
    }
    let (status, _) = page.get("/", Some("steward_session=forged")).await;
    assert_eq!(status, 401);
    let out = page.daemon.cli(&["web", "logout", "--all"]);
    assert!(stdout(&out).contains("1 web sessions ended"), "{out:?}");
    let (status, _) = page.get("/", Some(session)).await;
    assert_eq!(status, 401, "logged out everywhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_needs_the_session_its_token_and_this_origin_and_a_foreign_host_is_refused() {
    let page = Page::start("");
    let cookie = page.login().await;
    let csrf = page.csrf(&cookie, "/schedule").await;
    let origin = page.base.clone();
    let host = page.base.trim_start_matches("http://").to_owned();
    let form = format!("csrf={csrf}");
    let refusals = [
        (
            "no session",
            vec![("origin", origin.as_str())],
            form.as_str(),
        ),
        (
            "no token",
            vec![("cookie", cookie.as_str()), ("origin", origin.as_str())],
            "",
        ),
        (
            "another session's token",
            vec![("cookie", cookie.as_str()), ("origin", origin.as_str())],
            "csrf=0000000000000000000000000000000000000000",
        ),
        (
            "no origin",
            vec![("cookie", cookie.as_str())],
            form.as_str(),
        ),
        (
            "another origin",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", "http://evil.example"),
            ],
            form.as_str(),
        ),
        (
            "another site, same origin header",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", origin.as_str()),
                ("sec-fetch-site", "cross-site"),
            ],
            form.as_str(),
        ),
    ];
    for (what, headers, body) in refusals {
        let status = page.post("/schedule/brief/pause", &headers, body).await;
        assert_eq!(status, 403, "{what}");
        assert!(!page.job_paused(), "{what} changed nothing");
    }
    let rebinding = page
        .post(
            "/schedule/brief/pause",
            &[
                ("cookie", cookie.as_str()),
                ("origin", "http://evil.example:80"),
                ("host", "evil.example"),
            ],
            &form,
        )
        .await;
    assert_eq!(rebinding, 421, "a foreign Host (DNS rebinding)");
    assert!(!page.job_paused());

    let allowed = [("cookie", cookie.as_str()), ("origin", origin.as_str())];
    assert_eq!(
        page.post("/schedule/brief/pause", &allowed, &form).await,
        303
    );
    assert!(page.job_paused(), "the form works without JavaScript");
    assert!(host.starts_with("127.0.0.1:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_the_page_runs_once_with_its_edited_arguments() {
    let page = Page::start(
        "[[cron]]\nname = \"water\"\nschedule = \"at +1s\"\nurgency = \"queue\"\naction = { tool = \"fs_write\", args = { path = \"plants.txt\", content = \"dry\" } }\n",
    );
    let cookie = page.login().await;
    let pending = wait_for_pending(&page.daemon).await;
    let csrf = page.csrf(&cookie, "/approvals").await;
    let (_, html) = page.get("/approvals", Some(&cookie)).await;
    assert!(html.contains(&pending), "the whole id is shown");
    let edited = r#"{"path":"plants.txt","content":"watered"}"#;
    let body = format!(
        "csrf={csrf}&args={}",
        form_urlencoded::byte_serialize(edited.as_bytes()).collect::<String>()
    );
    let headers = [("cookie", cookie.as_str()), ("origin", page.base.as_str())];
    let path = format!("/approvals/{pending}/confirm");
    assert_eq!(page.post(&path, &headers, &body).await, 303);
    let file = page.daemon.path().join("workspace/plants.txt");
    wait_until(20, "the write ran", || async { file.exists() }).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "watered");
    // Answering again (with other arguments) runs nothing a second time.
    let again = format!(
        "csrf={csrf}&args={}",
        form_urlencoded::byte_serialize(br#"{"path":"plants.txt","content":"twice"}"#)
            .collect::<String>()
    );
    page.post(&path, &headers, &again).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "watered",
        "ran once"
    );
    let (_, html) = page.get("/approvals", Some(&cookie)).await;
    assert!(html.contains("completed"), "{html}");
}

/// The id of the first pending action, once there is one.
async fn wait_for_pending(daemon: &TestDaemon) -> String {
    let mut id = String::new();
    wait_until(30, "a request for confirmation", || {
        let rows = stdout(&daemon.cli(&["pending", "--json"]));
        let found = rows
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["state"] == "pending")
            .and_then(|r| r["id"].as_str().map(str::to_owned));
        if let Some(found) = &found {
            id = found.clone();
        }
        async move { found.is_some() }
    })
    .await;
    id
}

fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg_attr(
    not(web_browser),
    ignore = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_the_owner_logs_in_approves_live_pauses_a_job_and_sees_an_answer_stream_in() {
    use crate::webdriver::Browser;
    // Approvals and the schedule on a daemon without a model: a cron turn runs its tool
    // call directly.
    let page = Page::start(
        "[[cron]]\nname = \"water\"\nschedule = \"at +6s\"\nurgency = \"queue\"\naction = { tool = \"fs_write\", args = { path = \"plants.txt\", content = \"watered\" } }\n",
    );
    let browser = Browser::start(1280, 900).await;
    browser.open(&page.login_link()).await;
    browser.wait_for("nav a[aria-current=page][href='/']").await;
    assert!(
        !browser.url().await.contains("token"),
        "no token left in the address bar"
    );
    // The keyboard alone reaches the navigation and follows a link.
    const TAB: &str = "\u{E004}";
    const ENTER: &str = "\u{E007}";
    let mut reached = false;
    for _ in 0..12 {
        browser.press(TAB).await;
        if browser.focused_attribute("href").await.as_deref() == Some("/schedule") {
            reached = true;
            break;
        }
    }
    assert!(reached, "Tab reaches the Schedule link");
    browser.press(ENTER).await;
    browser
        .wait_for("nav a[aria-current=page][href='/schedule']")
        .await;

    // Approvals open before the cron turn asks: the request appears without a reload.
    browser.open(&format!("{}/approvals", page.base)).await;
    browser.wait_for("html[data-live=on]").await;
    let approve = browser
        .wait_for("form[action$='/confirm'] button[type=submit]")
        .await;
    browser.click(&approve).await;
    browser.wait_for_text("completed").await;
    let file = page.daemon.path().join("workspace/plants.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "watered");

    browser.open(&format!("{}/schedule", page.base)).await;
    let pause = browser
        .wait_for("form[action='/schedule/brief/pause'] button")
        .await;
    browser.click(&pause).await;
    browser
        .wait_for("form[action='/schedule/brief/resume'] button")
        .await;
    assert!(page.job_paused());

    // The chat, on a daemon with a model that streams "Hello, " and then stalls: the page
    // shows the answer growing, then the whole answer (the call tried again) replaces it.
    let model = ScriptedModel::start(
        vec![
            text_held_after("Hello, ", "never sent"),
            text_answer("Hello, streaming world."),
        ],
        4096,
    );
    // Reached as `localhost`: the same browser keeps a separate session cookie for it (two
    // browsers fewer on a 2-core machine running the rest of the suite).
    let chatting = Page::start(&config(model.port));
    let chat_base = chatting.base.replace("127.0.0.1", "localhost");
    let talker = &browser;
    talker
        .open(&chatting.login_link().replace("127.0.0.1", "localhost"))
        .await;
    talker.wait_for("nav").await;
    talker.open(&format!("{chat_base}/chat")).await;
    // The page listens before the owner writes (an answer streamed before that is shown
    // whole when it arrives, as on any page opened late).
    talker.wait_for("html[data-live=on]").await;
    let text = talker.wait_for("textarea[name=text]").await;
    talker.type_into(&text, "hello there").await;
    let send = talker.wait_for("form[action='/chat'] button").await;
    talker.click(&send).await;
    talker.wait_for("#streaming pre").await;
    talker.wait_for_text("Hello, </pre>").await;
    assert!(
        !talker.source().await.contains("Hello, streaming world."),
        "shown while it streams, before the answer"
    );
    talker.wait_for_text("Hello, streaming world.").await;
    let event = chatting
        .daemon
        .events()
        .await
        .into_iter()
        .find(|e| e.text == "hello there")
        .expect("the chat message is an event");

    // Every page, at desktop and at phone width.
    let dir = screenshots_dir();
    let phone = Browser::start(390, 844).await;
    phone
        .open(&chatting.login_link().replace("127.0.0.1", "localhost"))
        .await;
    phone.wait_for("nav").await;
    phone.open(&page.login_link()).await;
    phone.wait_for("nav").await;
    for (name, on_chat_daemon, path) in [
        ("now", false, "/".to_owned()),
        ("chat", true, "/chat".to_owned()),
        ("approvals", false, "/approvals".to_owned()),
        ("activity", true, "/activity".to_owned()),
        ("event", true, format!("/activity/{}", event.id)),
        ("schedule", false, "/schedule".to_owned()),
        ("usage", true, "/usage".to_owned()),
    ] {
        let base = if on_chat_daemon {
            &chat_base
        } else {
            &page.base
        };
        for (width, browser) in [("desktop", &browser), ("phone", &phone)] {
            browser.open(&format!("{base}{path}")).await;
            browser.wait_for("main h1").await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let png = browser.screenshot().await;
            assert!(png.starts_with(b"\x89PNG"), "{name} {width}");
            std::fs::write(dir.join(format!("{name}-{width}.png")), png).unwrap();
        }
    }
}

#[test]
fn doctor_warns_when_the_page_is_served_in_the_clear_beyond_loopback() {
    for (listen, expected) in [
        ("0.0.0.0:0", "WARN  web"),
        ("192.0.2.10:8787", "WARN  web"),
        ("127.0.0.1:0", "pass  web"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            format!("[http]\nlisten = \"{listen}\"\n"),
        )
        .unwrap();
        let doctor = stdout(&crate::support::cli_in(dir.path(), &["doctor"]));
        assert!(doctor.contains(expected), "{listen}: {doctor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_comes_back_is_told_at_once_what_it_missed() {
    let page = Page::start("");
    let cookie = page.login().await;
    let args = r#"{"text":"the bread is ready"}"#;
    let called = page
        .daemon
        .cli(&["tools", "call", "notify_owner", "--args", args]);
    assert!(called.status.success(), "{called:?}");
    let outbox = stdout(&page.daemon.cli(&["outbox", "--json"]));
    let newest: Value = serde_json::from_str(outbox.lines().last().unwrap()).unwrap();
    let id = newest["id"].as_u64().unwrap();
    let mut stream = page
        .http
        .get(format!("{}/web/stream", page.base))
        .header("cookie", &cookie)
        .header("last-event-id", (id - 1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(5), stream.chunk())
        .await
        .expect("told at once")
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(first.contains("event: changed"), "{first}");
    assert!(first.contains(&format!("id: {id}")), "{first}");
    let (status, html) = page.get("/", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(html.contains("the bread is ready"), "today's messages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_page_and_metrics_show_each_model_call_under_its_channel_and_model() {
    let model = crate::scripted_model::ScriptedModel::start(
        vec![crate::model::text_answer("Hello.")],
        4096,
    );
    let page = Page::start(&format!(
        "{}[budget]\ndaily_tokens = 100000\n",
        crate::model::config(model.port)
    ));
    let sent = page.daemon.cli(&["send", "--wait", "hi"]);
    assert!(stdout(&sent).contains("Hello."), "{sent:?}");
    let cookie = page.login().await;
    let (status, html) = page.get("/usage", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"aria-current="page">Usage<"#), "{html}");
    // The scripted model reports 100 tokens in and 20 out.
    assert!(
        html.contains("120 tokens of 100000 (budget.daily_tokens)"),
        "{html}"
    );
    assert!(
        html.contains(concat!(
            r#"<td><b>(not a job)</b></td><td class="num" data-label="Calls">1</td>"#,
            r#"<td class="num" data-label="Tokens in">100</td>"#
        )),
        "{html}"
    );
    let (status, _) = page.get("/usage", None).await;
    assert_ne!(status, 200, "the page needs the session");
    let token = stdout(&page.daemon.cli(&["token", "show"]))
        .trim()
        .to_owned();
    let metrics = page
        .http
        .get(format!("{}/metrics", page.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"steward_model_calls_total{channel="user:socket",model="scripted"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"steward_model_call_tokens_total{channel="user:socket",model="scripted",kind="out"} 20"#
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_now_page_shows_the_task_list() {
    let page = Page::start("");
    let items = r#"{"items":[{"text":"book the train","status":"in_progress"},{"text":"pack","status":"pending"}]}"#;
    let written = page
        .daemon
        .cli(&["tools", "call", "todo_write", "--args", items]);
    assert!(written.status.success(), "{written:?}");
    let cookie = page.login().await;
    let (status, html) = page.get("/", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(html.contains("Task list"), "{html}");
    assert!(
        html.contains(r#"<li class="todo-in_progress"><span class="muted">in progress</span> book the train</li>"#),
        "{html}"
    );
}

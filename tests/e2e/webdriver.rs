//! A small W3C WebDriver client over Debian's `chromedriver` driving headless `chromium`:
//! enough to open pages, find elements by CSS selector, click, type, read text and take
//! screenshots. Each [`Browser`] runs its own chromedriver on a free port and a fresh
//! profile, closed when dropped: the session is ended first, which makes chromedriver quit
//! its Chromium (killing only the driver left the browser running after the tests).

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        end_session(&self.base);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `DELETE` of the session at `base` (`http://HOST:PORT/session/ID`), over a plain socket
/// because `drop` cannot await; chromedriver answers once its Chromium has quit.
fn end_session(base: &str) {
    let Some((host, path)) = base
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return;
    };
    let Ok(mut stream) = std::net::TcpStream::connect(host) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!("DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_ok() {
        // The answer's first bytes are enough: chromedriver keeps the connection open after.
        let _ = stream.read(&mut [0; 4096]);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// A headless Chromium `width` × `height` pixels.
    pub async fn start(width: u32, height: u32) -> Self {
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (apt-get install chromium-driver)");
        let http = reqwest::Client::new();
        let driver_url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http
            .get(format!("{driver_url}/status"))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={width},{height}"),
                ],
            },
        }}});
        let created: Value = http
            .post(format!("{driver_url}/session"))
            .body(capabilities.to_string())
            .send()
            .await
            .unwrap()
            .json_value()
            .await;
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_owned();
        Self {
            driver,
            base: format!("{driver_url}/session/{session}"),
            http,
            _profile: profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let answer = request.send().await.unwrap().json_value().await;
        answer["value"].clone()
    }

    pub async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The page's HTML as the browser now has it.
    pub async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The first element `css` selects, if any.
    pub async fn find(&self, css: &str) -> Option<String> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT].as_str().map(str::to_owned)
    }

    /// Waits (20 s at most) for an element `css` selects.
    pub async fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(element) = self.find(css).await {
                return element;
            }
            assert!(
                Instant::now() < deadline,
                "no element {css} appeared; the page: {}",
                self.source().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (20 s at most) until the page's HTML contains `text`.
    pub async fn wait_for_text(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.source().await.contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} did not appear; the page: {}",
                self.source().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    pub async fn type_into(&self, element: &str, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Presses and releases one key (a WebDriver key code such as `\u{E004}` for Tab).
    pub async fn press(&self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.call(reqwest::Method::POST, "/actions", Some(actions))
            .await;
    }

    /// An attribute of the element that has the keyboard focus.
    pub async fn focused_attribute(&self, name: &str) -> Option<String> {
        let active = self
            .call(reqwest::Method::GET, "/element/active", None)
            .await;
        let element = active[ELEMENT].as_str()?;
        self.call(
            reqwest::Method::GET,
            &format!("/element/{element}/attribute/{name}"),
            None,
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// A screenshot of the window, as PNG bytes.
    pub async fn screenshot(&self) -> Vec<u8> {
        let encoded = self.call(reqwest::Method::GET, "/screenshot", None).await;
        base64_decode(encoded.as_str().unwrap_or_default())
    }
}

/// `response.json()` without reqwest's `json` feature.
trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        let bytes = self.bytes().await.unwrap();
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    }
}

/// Standard base64 (the screenshot's encoding).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0);
    for c in text.bytes().filter_map(value) {
        buffer = (buffer << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    out
}

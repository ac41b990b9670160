//! A scripted Telegram Bot API server, written from the Bot API reference
//! (<https://core.telegram.org/bots/api>): `POST /bot<token>/<method>` with a JSON body,
//! answered `{"ok": true, "result": …}` or `{"ok": false, "error_code": N, "description":
//! "…", "parameters": {"retry_after": S}}`; `getUpdates` holds the request open until an
//! update arrives or its `timeout` passes, and confirms (forgets) every update below the
//! `offset` asked for. Update ids count per bot. There is no Telegram server to run here;
//! this is the other side, protocol-exact, and it records everything it was asked.
//!
//! Faults the tests ask for: a `409 Conflict` on `getUpdates`, `429` with `retry_after` on
//! the next sends, a send carried out whose answer is never written (the connection is
//! closed), and sends held forever (the daemon is killed meanwhile).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A bot the server knows: its token, id and username.
#[derive(Clone, Debug)]
pub struct Bot {
    pub token: String,
    pub id: i64,
    pub username: String,
}

impl Bot {
    pub fn new(id: i64, username: &str) -> Self {
        Self {
            token: format!("{id}:AAH-test-token-{username}"),
            id,
            username: username.to_owned(),
        }
    }
}

/// One request the server was sent (recorded as it arrives, whatever its answer).
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub body: Value,
}

#[derive(Debug, Default)]
struct BotState {
    next_update: i64,
    next_message: i64,
    queue: Vec<Value>,
}

#[derive(Debug, Default)]
struct Faults {
    conflict: bool,
    rate_limit_sends: u32,
    lose_send_answers: u32,
    hold_sends: bool,
}

#[derive(Debug, Default)]
struct Inner {
    bots: HashMap<String, Bot>,
    state: HashMap<i64, BotState>,
    calls: Vec<Call>,
    faults: Faults,
}

/// The server. Cheap to clone.
#[derive(Clone)]
pub struct BotApiServer {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    news: Arc<Notify>,
}

impl BotApiServer {
    pub async fn start(bots: &[Bot]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut inner = Inner::default();
        for bot in bots {
            inner.bots.insert(bot.token.clone(), bot.clone());
            inner.state.insert(
                bot.id,
                BotState {
                    next_update: 1,
                    next_message: 1,
                    queue: Vec::new(),
                },
            );
        }
        let server = Self {
            url,
            inner: Arc::new(Mutex::new(inner)),
            news: Arc::default(),
        };
        let serving = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = serving.clone();
                tokio::spawn(async move { server.connection(stream).await });
            }
        });
        server
    }

    /// Queues an update for `bot` (`kind` is `message`, `edited_message`, `callback_query`);
    /// its `update_id`.
    pub fn push(&self, bot: i64, kind: &str, object: Value) -> i64 {
        let id = {
            let mut inner = self.inner.lock().unwrap();
            let state = inner.state.get_mut(&bot).unwrap();
            let id = state.next_update;
            state.next_update += 1;
            state.queue.push(json!({"update_id": id, kind: object}));
            id
        };
        self.news.notify_waiters();
        id
    }

    /// A text message from `user` in their private chat with `bot`.
    pub fn message_from(&self, bot: i64, user: i64, message_id: i64, text: &str) -> i64 {
        self.push(
            bot,
            "message",
            json!({
                "message_id": message_id,
                "from": {"id": user, "is_bot": false, "first_name": format!("User{user}"), "username": format!("user{user}")},
                "chat": {"id": user, "type": "private", "first_name": format!("User{user}")},
                "date": chrono::Utc::now().timestamp(),
                "text": text,
            }),
        )
    }

    /// A press of an inline button with `data` on the bot's message `message_id`.
    pub fn press(&self, bot: i64, user: i64, message_id: i64, data: &str) -> i64 {
        self.push(
            bot,
            "callback_query",
            json!({
                "id": format!("cb{user}-{message_id}-{}", chrono::Utc::now().timestamp_micros()),
                "from": {"id": user, "is_bot": false, "first_name": format!("User{user}")},
                "chat_instance": "42",
                "data": data,
                "message": {
                    "message_id": message_id,
                    "date": chrono::Utc::now().timestamp(),
                    "chat": {"id": user, "type": "private"},
                    "from": {"id": bot, "is_bot": true, "first_name": "Steward"},
                    "text": "…",
                },
            }),
        )
    }

    /// Updates not yet confirmed by an offset.
    pub fn unconfirmed(&self, bot: i64) -> usize {
        self.inner.lock().unwrap().state[&bot].queue.len()
    }

    pub fn calls(&self, method: &str) -> Vec<Call> {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The texts sent into `chat`, in order.
    pub fn sent_to(&self, chat: i64) -> Vec<Value> {
        self.calls("sendMessage")
            .into_iter()
            .filter(|c| c.body["chat_id"] == json!(chat))
            .map(|c| c.body)
            .collect()
    }

    pub fn set_conflict(&self, on: bool) {
        self.inner.lock().unwrap().faults.conflict = on;
        self.news.notify_waiters();
    }

    pub fn rate_limit_sends(&self, n: u32) {
        self.inner.lock().unwrap().faults.rate_limit_sends = n;
    }

    pub fn lose_send_answers(&self, n: u32) {
        self.inner.lock().unwrap().faults.lose_send_answers = n;
    }

    pub fn hold_sends(&self, on: bool) {
        self.inner.lock().unwrap().faults.hold_sends = on;
    }

    async fn connection(&self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some((path, body)) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            match self.answer(&path, body).await {
                Some((status, answer)) => {
                    let text = answer.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if stream.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
                // Carried out, never answered.
                None => return,
            }
        }
    }

    fn error(code: u16, description: &str, retry_after: Option<u64>) -> (String, Value) {
        let reason = match code {
            401 => "Unauthorized",
            409 => "Conflict",
            429 => "Too Many Requests",
            _ => "Bad Request",
        };
        let mut body = json!({"ok": false, "error_code": code, "description": description});
        if let Some(secs) = retry_after {
            body["parameters"] = json!({"retry_after": secs});
        }
        (format!("{code} {reason}"), body)
    }

    /// The answer to one request (`None`: close without answering).
    async fn answer(&self, path: &str, body: Value) -> Option<(String, Value)> {
        let ok = |result: Value| Some(("200 OK".to_owned(), json!({"ok": true, "result": result})));
        let Some((token, method)) = path
            .strip_prefix("/bot")
            .and_then(|rest| rest.split_once('/'))
        else {
            return Some(Self::error(404, "Not Found", None));
        };
        let Some(bot) = self.inner.lock().unwrap().bots.get(token).cloned() else {
            return Some(Self::error(401, "Unauthorized", None));
        };
        self.inner.lock().unwrap().calls.push(Call {
            method: method.to_owned(),
            body: body.clone(),
        });
        match method {
            "getMe" => ok(json!({
                "id": bot.id, "is_bot": true, "first_name": "Steward",
                "username": bot.username, "can_join_groups": true,
                "can_read_all_group_messages": false, "supports_inline_queries": false,
            })),
            "getUpdates" => self.get_updates(&bot, &body).await,
            "sendMessage" => {
                let fault = {
                    let mut inner = self.inner.lock().unwrap();
                    let faults = &mut inner.faults;
                    if faults.hold_sends {
                        "hold"
                    } else if faults.rate_limit_sends > 0 {
                        faults.rate_limit_sends -= 1;
                        "429"
                    } else if faults.lose_send_answers > 0 {
                        faults.lose_send_answers -= 1;
                        "lose"
                    } else {
                        ""
                    }
                };
                match fault {
                    "hold" => {
                        std::future::pending::<()>().await;
                        None
                    }
                    "429" => Some(Self::error(
                        429,
                        "Too Many Requests: retry after 1",
                        Some(1),
                    )),
                    "lose" => None,
                    _ => {
                        let message_id = {
                            let mut inner = self.inner.lock().unwrap();
                            let state = inner.state.get_mut(&bot.id).unwrap();
                            state.next_message += 1;
                            1000 + state.next_message
                        };
                        ok(json!({
                            "message_id": message_id,
                            "from": {"id": bot.id, "is_bot": true, "first_name": "Steward", "username": bot.username},
                            "chat": {"id": body["chat_id"], "type": "private"},
                            "date": chrono::Utc::now().timestamp(),
                            "text": body["text"],
                        }))
                    }
                }
            }
            "sendChatAction" | "answerCallbackQuery" => ok(json!(true)),
            "editMessageText" => ok(json!({
                "message_id": body["message_id"],
                "chat": {"id": body["chat_id"], "type": "private"},
                "date": chrono::Utc::now().timestamp(),
                "text": body["text"],
            })),
            _ => Some(Self::error(404, "Not Found: method not found", None)),
        }
    }

    async fn get_updates(&self, bot: &Bot, body: &Value) -> Option<(String, Value)> {
        let offset = body["offset"].as_i64();
        let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let news = self.news.notified();
            {
                let mut inner = self.inner.lock().unwrap();
                if inner.faults.conflict {
                    return Some(Self::error(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                        None,
                    ));
                }
                let state = inner.state.get_mut(&bot.id).unwrap();
                if let Some(offset) = offset {
                    state
                        .queue
                        .retain(|u| u["update_id"].as_i64().unwrap() >= offset);
                }
                if !state.queue.is_empty() {
                    let batch: Vec<Value> = state.queue.iter().take(100).cloned().collect();
                    return Some(("200 OK".into(), json!({"ok": true, "result": batch})));
                }
            }
            if tokio::time::timeout_at(deadline, news).await.is_err() {
                return Some(("200 OK".into(), json!({"ok": true, "result": []})));
            }
        }
    }
}

/// Reads one HTTP/1.1 request (path and JSON body) from `stream`; `None` at its end.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, Value)> {
    let header_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_owned();
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body =
        serde_json::from_slice(&buffer[header_end..header_end + length]).unwrap_or(Value::Null);
    buffer.drain(..header_end + length);
    Some((path, body))
}

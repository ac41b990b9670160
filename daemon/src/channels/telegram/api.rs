//! A Bot API client: the few methods the channel calls, each a JSON `POST` to
//! `API_URL/botTOKEN/METHOD`, answered `{"ok": true, "result": …}` or
//! `{"ok": false, "error_code": …, "description": …, "parameters": {"retry_after": …}}`.
//!
//! Decided here:
//! - Errors say whether the request can have been carried out ([`ApiError`]): a connection
//!   that never opened sent nothing; a refusal with a code did nothing; anything else — a
//!   timeout, a reset, a body that is not the API's — may have been carried out. Telegram has
//!   no idempotency key, so the caller must not send such a message again.
//! - The token is in every URL: errors are given without their URL, and nothing here logs
//!   one.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Time for any call but the long poll.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest text of an answer to a button press.
const CALLBACK_TEXT_CHARS: usize = 200;
/// How long the server may hold `getUpdates` open.
pub const POLL_TIMEOUT_SECS: u64 = 50;

/// Why a call did not give its result.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    /// The API answered with an error: nothing was done.
    #[error("the Bot API refused {method}: {code} {description}")]
    Refused {
        method: &'static str,
        code: i64,
        description: String,
        /// `parameters.retry_after` of a 429: seconds to wait.
        retry_after: Option<u64>,
    },
    /// The request never reached the server.
    #[error("cannot reach the Bot API ({method}): {why}")]
    NotSent { method: &'static str, why: String },
    /// No answer could be read: the request may or may not have been carried out.
    #[error("no answer from the Bot API to {method}: {why}")]
    Lost { method: &'static str, why: String },
}

impl ApiError {
    /// A 401/404 on `getMe`: the token is not a bot's (revoked, mistyped).
    pub fn is_bad_token(&self) -> bool {
        matches!(
            self,
            Self::Refused {
                code: 401 | 404,
                ..
            }
        )
    }

    /// A 409: a webhook is set, or another client polls with this token.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Refused { code: 409, .. })
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Refused {
                retry_after: Some(secs),
                ..
            } => Some(Duration::from_secs(*secs)),
            _ => None,
        }
    }
}

/// The bot, as `getMe` says.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Me {
    pub id: i64,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub first_name: String,
}

/// A message the bot sent.
#[derive(Clone, Debug, Deserialize)]
pub struct SentMessage {
    pub message_id: i64,
}

#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error_code: Option<i64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// The client. Cheap to clone.
#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    /// `API_URL/botTOKEN`.
    base: String,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BotApi { .. }")
    }
}

/// The Bot API's HTTP client: one for the channel's whole life, so that a session started
/// again after a failure makes no new TLS setup and connection pool of its own.
pub fn http_client() -> Result<reqwest::Client, ApiError> {
    steward_tools::https::client_builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ApiError::NotSent {
            method: "client",
            why: e.without_url().to_string(),
        })
}

impl BotApi {
    pub fn new(http: reqwest::Client, api_url: &str, token: &str) -> Self {
        Self {
            http,
            base: format!("{api_url}/bot{token}"),
        }
    }

    /// Calls `method` with `body`, waiting at most `timeout`.
    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        body: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let lost = |why: String| ApiError::Lost { method, why };
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| {
                let connect = e.is_connect();
                let why = e.without_url().to_string();
                if connect {
                    ApiError::NotSent { method, why }
                } else {
                    lost(why)
                }
            })?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| lost(e.without_url().to_string()))?;
        let envelope: Envelope = serde_json::from_slice(&bytes)
            .map_err(|_| lost(format!("HTTP {status} with a body that is not the API's")))?;
        if !envelope.ok {
            return Err(ApiError::Refused {
                method,
                code: envelope.error_code.unwrap_or(i64::from(status.as_u16())),
                description: envelope.description.unwrap_or_default(),
                retry_after: envelope.parameters.and_then(|p| p.retry_after),
            });
        }
        serde_json::from_value(envelope.result.unwrap_or(Value::Null))
            .map_err(|e| lost(format!("a result of an unexpected shape: {e}")))
    }

    pub async fn get_me(&self) -> Result<Me, ApiError> {
        self.call("getMe", &json!({}), CALL_TIMEOUT).await
    }

    /// The updates from `offset` on (raw: each is parsed by [`super::parse`]), held open by
    /// the server up to [`POLL_TIMEOUT_SECS`].
    pub async fn get_updates(&self, offset: Option<i64>) -> Result<Vec<Value>, ApiError> {
        let mut body = serde_json::Map::new();
        body.insert("timeout".into(), json!(POLL_TIMEOUT_SECS));
        body.insert(
            "allowed_updates".into(),
            json!(["message", "edited_message", "callback_query"]),
        );
        // No offset at all (not null) until there is one: the first poll takes what waits.
        if let Some(offset) = offset {
            body.insert("offset".into(), json!(offset));
        }
        self.call(
            "getUpdates",
            &Value::Object(body),
            Duration::from_secs(POLL_TIMEOUT_SECS + 15),
        )
        .await
    }

    /// Sends HTML `text` into `chat`, as a reply to `reply_to` when given, with inline
    /// `buttons` (text, callback data) in one row.
    pub async fn send_message(
        &self,
        chat: i64,
        text: &str,
        reply_to: Option<i64>,
        buttons: &[(String, String)],
    ) -> Result<SentMessage, ApiError> {
        let mut body = serde_json::Map::new();
        body.insert("chat_id".into(), json!(chat));
        body.insert("text".into(), json!(text));
        body.insert("parse_mode".into(), json!("HTML"));
        body.insert("link_preview_options".into(), json!({"is_disabled": true}));
        if let Some(to) = reply_to {
            body.insert(
                "reply_parameters".into(),
                json!({"message_id": to, "allow_sending_without_reply": true}),
            );
        }
        if !buttons.is_empty() {
            let row: Vec<Value> = buttons
                .iter()
                .map(|(text, data)| json!({"text": text, "callback_data": data}))
                .collect();
            body.insert("reply_markup".into(), json!({"inline_keyboard": [row]}));
        }
        self.call("sendMessage", &Value::Object(body), CALL_TIMEOUT)
            .await
    }

    /// Replaces the text of a message the bot sent (its buttons go).
    pub async fn edit_message_text(
        &self,
        chat: i64,
        message_id: i64,
        text: &str,
    ) -> Result<(), ApiError> {
        let body = json!({
            "chat_id": chat,
            "message_id": message_id,
            "text": text,
            "parse_mode": "HTML",
        });
        self.call::<Value>("editMessageText", &body, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// Answers a button press (`alert`: as a dialog the user must dismiss); the text is cut
    /// to the API's 200 characters.
    pub async fn answer_callback_query(
        &self,
        id: &str,
        text: &str,
        alert: bool,
    ) -> Result<(), ApiError> {
        let text = crate::text::cut(text, CALLBACK_TEXT_CHARS);
        let body = json!({"callback_query_id": id, "text": text, "show_alert": alert});
        self.call::<Value>("answerCallbackQuery", &body, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// "typing…" in `chat`; the client shows it for 5 s or until a message arrives.
    pub async fn send_typing(&self, chat: i64) -> Result<(), ApiError> {
        let body = json!({"chat_id": chat, "action": "typing"});
        self.call::<Value>("sendChatAction", &body, CALL_TIMEOUT)
            .await
            .map(drop)
    }
}

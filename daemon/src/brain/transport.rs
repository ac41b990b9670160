//! HTTP for the model providers: the client, the API key, retries, and reading a streamed
//! answer. Each provider brings a [`StreamDecoder`] for its event format; everything about
//! getting the bytes is here, once.
//!
//! Failures are retried inside one call (3 attempts): 429 and 5xx (honouring `Retry-After`,
//! capped at 60 s), network errors, broken or stalled streams, malformed chunks and streams
//! cut before their end, with exponential backoff and jitter. A 4xx other than 429 is a
//! clear, final error. When every attempt failed the dispatcher defers the step and tries
//! again later (see [`super::BrainError::Unavailable`]).
//!
//! Steward always asks for a stream, but some servers and proxies answer with the complete
//! message instead (`content-type: application/json`; LiteLLM's Anthropic mock does). That
//! is a valid answer and is decoded as one ([`StreamDecoder::complete`]). A success whose
//! content type is neither a stream nor JSON (an HTML page from a proxy or a wrong
//! `base_url`) is a final error that says what was received; a missing content type is read
//! as a stream, as servers that forget the header mean.

use std::sync::Arc;
use std::time::Duration;

use steward_config::ApiKeySource;
use steward_tools::ToolSpec;

use super::prompt::{self, Turn};
use super::sse::{SseEvent, SseParser};
use super::{BrainError, BrainFuture, BrainInput, Summary, SummaryFuture};
use steward_events::TokenUsage;

const MAX_ATTEMPTS: u32 = 3;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The largest complete (non-streamed) answer read.
const MAX_COMPLETE_BYTES: usize = 32 * 1024 * 1024;
/// The most tool calls one answer may make; an index beyond it is a broken answer, not a
/// reason to allocate.
pub const MAX_CALLS: usize = 256;

/// Why an attempt failed, and whether another attempt may help.
#[derive(Debug)]
pub enum Failure {
    Retry {
        error: String,
        after: Option<Duration>,
    },
    Final(BrainError),
}

impl Failure {
    pub fn retry(error: impl Into<String>) -> Self {
        Failure::Retry {
            error: error.into(),
            after: None,
        }
    }
}

/// What a streamed answer amounts to once complete.
#[derive(Debug, Default)]
pub struct Answer {
    pub text: String,
    pub calls: Vec<PartialCall>,
    pub usage: Option<TokenUsage>,
}

/// A tool call as it is assembled from deltas.
#[derive(Debug, Default)]
pub struct PartialCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Turns one provider's stream events into an [`Answer`].
/// Told the answer's text so far while it streams (see [`Endpoint::stream`]).
pub type Progress = dyn Fn(&str) + Send + Sync;

pub trait StreamDecoder: Default + Send {
    /// Takes one event; `Ok(true)` when it was the stream's explicit end.
    fn feed(&mut self, event: &SseEvent) -> Result<bool, Failure>;
    /// The answer's text so far (what a watching owner is shown while it streams).
    fn text(&self) -> &str;
    /// The answer, once the stream ended (explicitly or by closing); an error when it
    /// ended before the answer was complete.
    fn finish(self) -> Result<Answer, Failure>;
    /// The answer from a complete, non-streamed message of the provider's API.
    fn complete(message: &serde_json::Value) -> Result<Answer, Failure>;
}

/// How a successful response carries its answer, from its `content-type`.
#[derive(Debug, PartialEq, Eq)]
enum Body {
    Stream,
    Complete,
    Other(String),
}

fn body_kind(content_type: Option<&str>) -> Body {
    let Some(value) = content_type else {
        return Body::Stream;
    };
    let media = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media.is_empty() || media == "text/event-stream" {
        Body::Stream
    } else if media == "application/json" || media.ends_with("+json") {
        Body::Complete
    } else {
        Body::Other(value.to_owned())
    }
}

#[derive(Debug)]
pub struct Endpoint {
    client: reqwest::Client,
    url: String,
    headers: Vec<(&'static str, String)>,
    timeout: Duration,
}

impl Endpoint {
    pub fn new(
        url: String,
        headers: Vec<(&'static str, String)>,
        timeout: Duration,
    ) -> Result<Self, BrainError> {
        let client = steward_tools::https::client_builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BrainError::Unavailable(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            url,
            headers,
            timeout,
        })
    }

    /// Posts `body` and decodes the streamed answer, retrying as the module docs say; the
    /// text so far goes to `progress` as it grows (from the start again on a retry).
    pub async fn stream<D: StreamDecoder>(
        &self,
        body: Vec<u8>,
        progress: Option<&Progress>,
    ) -> Result<Answer, BrainError> {
        // Shared, not copied, between attempts: bodies can be megabytes.
        let body = bytes::Bytes::from(body);
        let mut attempt = 0;
        loop {
            match self.attempt::<D>(body.clone(), progress).await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Retry { error, after }) => {
                    attempt += 1;
                    if attempt >= MAX_ATTEMPTS {
                        return Err(BrainError::Unavailable(error));
                    }
                    let wait = after.unwrap_or_else(|| backoff(attempt));
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %error, "model call failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn attempt<D: StreamDecoder>(
        &self,
        body: bytes::Bytes,
        progress: Option<&Progress>,
    ) -> Result<Answer, Failure> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        let secs = self.timeout.as_secs();
        let mut response = tokio::time::timeout(self.timeout, request.send())
            .await
            .map_err(|_| Failure::retry(format!("no response within {secs}s")))?
            .map_err(|e| Failure::retry(format!("request failed: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            let after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|secs| Duration::from_secs(secs).min(MAX_RETRY_AFTER));
            let text = response.text().await.unwrap_or_default();
            let error = format!(
                "HTTP {status}: {}",
                text.chars().take(500).collect::<String>()
            );
            return Err(if status.as_u16() == 429 || status.is_server_error() {
                Failure::Retry { error, after }
            } else {
                Failure::Final(BrainError::Rejected(error))
            });
        }
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        match body_kind(content_type.as_deref()) {
            Body::Stream => {}
            Body::Complete => return self.read_complete::<D>(response).await,
            Body::Other(media) => {
                let text = response.text().await.unwrap_or_default();
                return Err(Failure::Final(BrainError::Rejected(format!(
                    "expected a stream (text/event-stream) or a JSON message, received {media}: {}",
                    text.chars().take(300).collect::<String>()
                ))));
            }
        }
        let mut parser = SseParser::default();
        let mut decoder = D::default();
        let mut told = 0;
        loop {
            let Some(bytes) = self.next_chunk(&mut response, "stream").await? else {
                return decoder.finish();
            };
            for event in parser.push(&bytes) {
                if decoder.feed(&event)? {
                    return decoder.finish();
                }
            }
            if let Some(progress) = progress
                && decoder.text().len() != told
            {
                told = decoder.text().len();
                progress(decoder.text());
            }
        }
    }

    /// The next piece of a response body, `None` at its end; a stall or a break is worth
    /// another attempt.
    async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
        what: &str,
    ) -> Result<Option<bytes::Bytes>, Failure> {
        let secs = self.timeout.as_secs();
        match tokio::time::timeout(self.timeout, response.chunk()).await {
            Err(_) => Err(Failure::retry(format!("the {what} stalled for {secs}s"))),
            Ok(Err(e)) => Err(Failure::retry(format!("the {what} broke: {e}"))),
            Ok(Ok(next)) => Ok(next),
        }
    }

    /// A complete JSON message instead of a stream.
    async fn read_complete<D: StreamDecoder>(
        &self,
        mut response: reqwest::Response,
    ) -> Result<Answer, Failure> {
        let mut body = Vec::new();
        while let Some(bytes) = self.next_chunk(&mut response, "answer").await? {
            if body.len() + bytes.len() > MAX_COMPLETE_BYTES {
                return Err(Failure::Final(BrainError::Rejected(format!(
                    "the answer is over {MAX_COMPLETE_BYTES} bytes"
                ))));
            }
            body.extend_from_slice(&bytes);
        }
        let message: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::retry(format!(
                "a JSON answer that is not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ))
        })?;
        if let Some(error) = message.get("error").filter(|e| !e.is_null()) {
            return Err(Failure::retry(format!(
                "the model reported an error: {error}"
            )));
        }
        D::complete(&message)
    }
}

/// The API key from where the config says, read once when the brain is built.
pub fn load_api_key(source: &ApiKeySource) -> Result<Option<String>, BrainError> {
    match source {
        ApiKeySource::None => Ok(None),
        ApiKeySource::Env(var) => std::env::var(var)
            .map(Some)
            .map_err(|_| BrainError::Unavailable(format!("the API key variable {var} is not set"))),
        ApiKeySource::File(path) => {
            let path =
                steward_config::credentials_path(path, std::env::var_os("CREDENTIALS_DIRECTORY"))
                    .map_err(BrainError::Unavailable)?;
            std::fs::read_to_string(&path)
                .map(|key| Some(key.trim().to_owned()))
                .map_err(|e| {
                    BrainError::Unavailable(format!(
                        "cannot read the API key file {}: {e}",
                        path.display()
                    ))
                })
        }
    }
}

/// 250 ms, 500 ms, 1 s … plus up to 25% jitter, so that restarts do not retry in lockstep.
fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(250 * 2u64.pow(attempt.saturating_sub(1).min(8)));
    let jitter = (ulid::Ulid::generate().random() % 1000) as u32;
    base + base * jitter / 4000
}

/// Parses one event's JSON; a malformed chunk is worth another attempt.
pub fn parse_chunk(event: &SseEvent) -> Result<serde_json::Value, Failure> {
    serde_json::from_str(&event.data)
        .map_err(|e| Failure::retry(format!("malformed stream chunk ({e}): {}", event.data)))
}

/// What differs between providers: the request's JSON shape and the stream's format.
/// Everything else — what is said, how it travels, what comes back — is shared.
pub trait Wire: Send + Sync + std::fmt::Debug + 'static {
    /// Shown in `steward status`.
    const NAME: &'static str;
    type Decoder: StreamDecoder;

    fn endpoint(&self) -> &Endpoint;

    /// What this brain rendered of the trajectories it answered last.
    fn memo(&self) -> &prompt::RenderMemo;

    /// The request body, serialized: the stable prefix (tools, system), then the turns.
    fn request_body(
        &self,
        system: &str,
        turns: Vec<Turn<'_>>,
        tools: &Arc<Vec<ToolSpec>>,
    ) -> Result<Vec<u8>, BrainError>;
}

/// A request's `tools` array, serialized once per tool set.
///
/// The schemas are most of a short conversation's request, and they change only when the
/// tool set does (an MCP server's list, a compaction); serializing them for every call was a
/// third of Steward's own time per call. The last tool set is kept with its JSON; the same
/// shared list is recognised at once (a step passes one list to all its calls), another one
/// is compared by value, so a changed schema can never be sent stale.
#[derive(Debug, Default)]
pub struct ToolsJson(std::sync::Mutex<Option<SerializedTools>>);

/// A tool list and its `tools` array.
type SerializedTools = (Arc<Vec<ToolSpec>>, Box<serde_json::value::RawValue>);

impl ToolsJson {
    /// The shown tools of `tools`, each as `render` makes it, as one JSON array; `None` when
    /// no schema is shown (the field is then left out).
    pub fn get<'t, T: serde::Serialize>(
        &self,
        tools: &'t Arc<Vec<ToolSpec>>,
        render: impl Fn(&'t ToolSpec) -> T,
    ) -> Result<Option<Box<serde_json::value::RawValue>>, BrainError> {
        if prompt::shown_tools(tools).next().is_none() {
            return Ok(None);
        }
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, json)) = last.as_mut()
            && (Arc::ptr_eq(seen, tools) || seen == tools)
        {
            // Held here, the list cannot be freed and its address reused by another.
            *seen = tools.clone();
            return Ok(Some(json.clone()));
        }
        let rendered: Vec<T> = prompt::shown_tools(tools).map(render).collect();
        let json = serde_json::value::to_raw_value(&rendered)
            .map_err(|e| BrainError::Rejected(format!("cannot encode the tools: {e}")))?;
        *last = Some((tools.clone(), json.clone()));
        Ok(Some(json))
    }
}

/// Serializes a request body straight from its borrowed parts (no JSON tree in between:
/// a conversation can be megabytes).
pub fn encode(request: &impl serde::Serialize) -> Result<Vec<u8>, BrainError> {
    serde_json::to_vec(request)
        .map_err(|e| BrainError::Rejected(format!("cannot encode the request: {e}")))
}

/// Every wire is a brain: the trajectory as turns, the answer as a turn.
impl<W: Wire> super::Brain for W {
    fn name(&self) -> &'static str {
        W::NAME
    }

    fn respond<'a>(&'a self, input: BrainInput<'a>) -> BrainFuture<'a> {
        respond(self, input)
    }

    fn summarize(&self, transcript: String) -> SummaryFuture<'_> {
        summarize(self, transcript)
    }
}

fn respond<'a, W: Wire>(wire: &'a W, input: BrainInput<'a>) -> BrainFuture<'a> {
    Box::pin(async move {
        let body = wire.request_body(
            &prompt::system_text(input.tools, input.skills),
            wire.memo()
                .conversation(input.trajectory, input.history, input.zone),
            input.tools,
        )?;
        let answer = wire
            .endpoint()
            .stream::<W::Decoder>(body, input.on_text.map(|sink| sink.0))
            .await?;
        Ok(answer.into_turn(input.events))
    })
}

/// A summary: one user turn with the transcript, no tools.
fn summarize<W: Wire>(wire: &W, transcript: String) -> SummaryFuture<'_> {
    Box::pin(async move {
        let turns = vec![Turn::User {
            results: Vec::new(),
            texts: vec![prompt::JsonText::new(&transcript)],
        }];
        let body = wire.request_body(prompt::SUMMARY_SYSTEM_TEXT, turns, &Arc::default())?;
        let answer = wire.endpoint().stream::<W::Decoder>(body, None).await?;
        Ok(Summary {
            text: answer.text,
            usage: answer.usage,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_are_serialized_again_only_when_they_change() {
        use std::cell::Cell;
        use steward_tools::Tier;
        let spec = |name: &str, tier| ToolSpec {
            name: name.into(),
            description: format!("{name} things"),
            parameters: serde_json::json!({"type": "object"}),
            usage_guidance: None,
            tier,
        };
        let cache = ToolsJson::default();
        let renders = Cell::new(0);
        let render = |t: &ToolSpec| {
            renders.set(renders.get() + 1);
            serde_json::json!({"name": t.name, "schema": t.parameters})
        };
        let json = |tools: &Arc<Vec<ToolSpec>>| {
            cache
                .get(tools, render)
                .unwrap()
                .map(|raw| raw.get().to_owned())
        };
        let mut tools = vec![spec("fs_read", Tier::Core), spec("cal_add", Tier::Deferred)];
        let shared = Arc::new(tools.clone());
        let first = json(&shared);
        assert_eq!(
            first.as_deref(),
            Some(r#"[{"name":"fs_read","schema":{"type":"object"}}]"#),
            "only shown tools"
        );
        assert_eq!(json(&shared), first, "the same list again");
        assert_eq!(
            json(&Arc::new(tools.clone())),
            first,
            "an equal tool set, from elsewhere"
        );
        assert_eq!(renders.get(), 1, "served from the cache");
        tools[0].parameters = serde_json::json!({"type": "object", "required": ["path"]});
        assert_eq!(
            json(&Arc::new(tools.clone())).as_deref(),
            Some(r#"[{"name":"fs_read","schema":{"required":["path"],"type":"object"}}]"#),
            "a changed schema is never sent stale"
        );
        assert_eq!(
            json(&Arc::new(tools[1..].to_vec())),
            None,
            "no shown tool: no field"
        );
    }

    #[test]
    fn the_content_type_says_how_the_answer_comes() {
        let table = [
            (None, Body::Stream),
            (Some("text/event-stream"), Body::Stream),
            (Some("text/event-stream; charset=utf-8"), Body::Stream),
            (Some(""), Body::Stream),
            (Some("application/json"), Body::Complete),
            (Some("Application/JSON; charset=utf-8"), Body::Complete),
            (Some("application/vnd.api+json"), Body::Complete),
            (
                Some("text/html; charset=utf-8"),
                Body::Other("text/html; charset=utf-8".into()),
            ),
        ];
        for (content_type, expected) in table {
            assert_eq!(body_kind(content_type), expected, "{content_type:?}");
        }
    }
}

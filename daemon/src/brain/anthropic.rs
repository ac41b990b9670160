//! Anthropic's Messages API: the conversation as `user`/`assistant` messages of content
//! blocks (`text`, `tool_use`, `tool_result`), tools with `input_schema`, the answer streamed
//! as named events — `message_start` (input usage), `content_block_start` (a text or
//! `tool_use` block at an index), `content_block_delta` (`text_delta`, or `input_json_delta`
//! whose `partial_json` fragments make the tool input), `content_block_stop`,
//! `message_delta` (stop reason, output usage), `message_stop`, `ping`, `error`.
//!
//! Caching: a `cache_control` breakpoint on the system block caches the stable prefix
//! (tools, then system — the order Anthropic builds the prompt in); a second on the last
//! block of the conversation lets each step reuse the previous step's prefix.
//!
//! An `error` event inside a 200 stream (`overloaded_error`, `api_error`, …) is retried like
//! the HTTP status it stands for; request errors (`invalid_request_error`, auth) are final.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use steward_config::ModelConfig;
use steward_tools::ToolSpec;

use super::BrainError;
use super::prompt::{self, JsonText, RenderMemo, Turn};
use super::sse::SseEvent;
use super::transport::{
    Answer, Endpoint, Failure, MAX_CALLS, PartialCall, StreamDecoder, ToolsJson, Wire, parse_chunk,
};
use steward_events::TokenUsage;

const API_VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub struct AnthropicBrain {
    endpoint: Endpoint,
    model: String,
    max_tokens: u64,
    tools: ToolsJson,
    memo: RenderMemo,
}

impl AnthropicBrain {
    pub fn new(config: &ModelConfig) -> Result<Self, BrainError> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(key) = super::transport::load_api_key(&config.api_key)? {
            headers.push(("x-api-key", key));
        }
        Ok(Self {
            endpoint: Endpoint::new(
                format!("{}/messages", config.base_url),
                headers,
                config.timeout,
            )?,
            model: config.model.clone(),
            max_tokens: config.max_output_tokens,
            tools: ToolsJson::default(),
            memo: RenderMemo::default(),
        })
    }
}

impl Wire for AnthropicBrain {
    const NAME: &'static str = "anthropic";
    type Decoder = EventDecoder;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn memo(&self) -> &RenderMemo {
        &self.memo
    }

    /// The request body: tools and system (the cached prefix), then the messages.
    fn request_body(
        &self,
        system: &str,
        turns: Vec<Turn<'_>>,
        tools: &Arc<Vec<ToolSpec>>,
    ) -> Result<Vec<u8>, BrainError> {
        let mut messages: Vec<Message<'_>> = turns.into_iter().map(render_turn).collect();
        if let Some(block) = messages.last_mut().and_then(|m| m.content.last_mut()) {
            block.cache_control = Some(EPHEMERAL);
        }
        let request = Request {
            model: &self.model,
            max_tokens: self.max_tokens,
            system: [SystemBlock {
                kind: "text",
                text: system,
                cache_control: EPHEMERAL,
            }],
            messages,
            stream: true,
            tools: self.tools.get(tools, |t| Tool {
                name: &t.name,
                description: prompt::tool_description(t),
                input_schema: &t.parameters,
            })?,
        };
        super::transport::encode(&request)
    }
}

/// A Messages request, serialized straight from borrowed parts.
#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u64,
    system: [SystemBlock<'a>; 1],
    messages: Vec<Message<'a>>,
    stream: bool,
    /// The [`Tool`]s, serialized once per tool set.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: Cow<'a, str>,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
struct Block<'a> {
    #[serde(flatten)]
    body: BlockBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockBody<'a> {
    Text {
        text: JsonText,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: JsonText,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: JsonText,
        is_error: bool,
    },
}

impl<'a> From<BlockBody<'a>> for Block<'a> {
    fn from(body: BlockBody<'a>) -> Self {
        Self {
            body,
            cache_control: None,
        }
    }
}

fn render_turn(turn: Turn<'_>) -> Message<'_> {
    match turn {
        // Tool results first, as the API requires, then any text that came after them.
        Turn::User { results, texts } => Message {
            role: "user",
            content: results
                .into_iter()
                .map(|r| BlockBody::ToolResult {
                    tool_use_id: r.id,
                    content: r.content,
                    is_error: r.is_error,
                })
                .chain(texts.into_iter().map(|text| BlockBody::Text { text }))
                .map(Block::from)
                .collect(),
        },
        Turn::Assistant { texts, calls } => Message {
            role: "assistant",
            content: texts
                .into_iter()
                .map(|text| BlockBody::Text {
                    text: JsonText::new(text),
                })
                .chain(calls.into_iter().map(|c| BlockBody::ToolUse {
                    id: c.id,
                    name: c.name,
                    // `input` must be an object; arguments that were not JSON are kept
                    // visible to the model instead of being silently replaced.
                    input: match c.args {
                        Value::Object(_) => c.args_json,
                        other => JsonText::of(&json!({"invalid_arguments": other})),
                    },
                }))
                .map(Block::from)
                .collect(),
        },
    }
}

/// A message's `usage`, as Steward counts it: `input_tokens` covers only what came after
/// the last cache breakpoint, so the cache's reads and writes are added to the input.
fn usage_of(usage: &Value) -> TokenUsage {
    let count = |path: &str| usage.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("/cache_read_input_tokens");
    TokenUsage {
        input: count("/input_tokens") + count("/cache_creation_input_tokens") + cached,
        cached_input: cached,
        output: count("/output_tokens"),
    }
}

/// A content block of the answer as it streams in, by its index.
#[derive(Debug)]
enum StreamBlock {
    Text,
    ToolUse(usize),
    /// Thinking and other blocks Steward does not use.
    Other,
}

#[derive(Debug, Default)]
pub struct EventDecoder {
    answer: Answer,
    blocks: Vec<StreamBlock>,
    usage: TokenUsage,
    started: bool,
    stopped: bool,
}

impl EventDecoder {
    fn block(&self, value: &Value) -> Option<&StreamBlock> {
        let index = value.get("index").and_then(Value::as_u64)? as usize;
        self.blocks.get(index)
    }
}

impl EventDecoder {
    /// `content_block_start`: a text block or a tool call begins at its index.
    fn block_started(&mut self, value: &Value) -> Result<(), Failure> {
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let block = value.get("content_block").unwrap_or(&Value::Null);
        let kind = match block["type"].as_str() {
            Some("text") => {
                self.answer
                    .text
                    .push_str(block["text"].as_str().unwrap_or(""));
                StreamBlock::Text
            }
            Some("tool_use") => {
                // The input streams as JSON fragments; a start that already carries
                // a non-empty input (no deltas follow) keeps it.
                let arguments = match &block["input"] {
                    Value::Object(map) if !map.is_empty() => block["input"].to_string(),
                    _ => String::new(),
                };
                self.answer.calls.push(PartialCall {
                    id: block["id"].as_str().unwrap_or("").to_owned(),
                    name: block["name"].as_str().unwrap_or("").to_owned(),
                    arguments,
                });
                StreamBlock::ToolUse(self.answer.calls.len() - 1)
            }
            _ => StreamBlock::Other,
        };
        if index >= MAX_CALLS * 4 {
            return Err(Failure::retry(format!(
                "a content block index out of any reasonable range: {index}"
            )));
        }
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || StreamBlock::Other);
        }
        if let Some(slot) = self.blocks.get_mut(index) {
            *slot = kind;
        }
        Ok(())
    }
}

/// An `error` event: final when the request itself is at fault, retried otherwise.
fn stream_error(value: &Value) -> Failure {
    let error_type = value.pointer("/error/type").and_then(Value::as_str);
    let message = format!(
        "the model reported an error: {}",
        value.get("error").unwrap_or(&Value::Null)
    );
    match error_type {
        Some(
            "invalid_request_error"
            | "authentication_error"
            | "permission_error"
            | "not_found_error"
            | "request_too_large",
        ) => Failure::Final(BrainError::Rejected(message)),
        _ => Failure::retry(message),
    }
}

impl StreamDecoder for EventDecoder {
    fn text(&self) -> &str {
        &self.answer.text
    }

    fn feed(&mut self, event: &SseEvent) -> Result<bool, Failure> {
        let value = parse_chunk(event)?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "message_start" => {
                self.started = true;
                self.usage = usage_of(value.pointer("/message/usage").unwrap_or(&Value::Null));
            }
            "content_block_start" => self.block_started(&value)?,
            "content_block_delta" => {
                let delta = value.get("delta").unwrap_or(&Value::Null);
                match (self.block(&value), delta["type"].as_str()) {
                    (Some(StreamBlock::Text), Some("text_delta")) => {
                        let text = delta["text"].as_str().unwrap_or("");
                        self.answer.text.push_str(text);
                    }
                    (Some(StreamBlock::ToolUse(call)), Some("input_json_delta")) => {
                        let call = *call;
                        let fragment = delta["partial_json"].as_str().unwrap_or("");
                        if let Some(call) = self.answer.calls.get_mut(call) {
                            call.arguments.push_str(fragment);
                        }
                    }
                    (None, _) => {
                        return Err(Failure::retry(format!(
                            "a delta for a block that never started: {}",
                            event.data
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                // Output usage here is cumulative for the whole message.
                if let Some(output) = value
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                {
                    self.usage.output = output;
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(stream_error(&value)),
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(false)
    }

    fn finish(mut self) -> Result<Answer, Failure> {
        if !self.stopped {
            return Err(Failure::retry("the stream ended before message_stop"));
        }
        if self.started {
            self.answer.usage = Some(self.usage);
        }
        Ok(self.answer)
    }

    /// A whole `message` object: `content` blocks (`text`, `tool_use` with its `input`) and
    /// `usage`.
    fn complete(message: &Value) -> Result<Answer, Failure> {
        let is_message = message.get("content").is_some_and(Value::is_array)
            && message
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(|kind| kind == "message");
        if !is_message {
            return Err(Failure::retry(format!(
                "a JSON answer that is not a message: {}",
                message.to_string().chars().take(300).collect::<String>()
            )));
        }
        let mut answer = Answer::default();
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => answer.text.push_str(block["text"].as_str().unwrap_or("")),
                Some("tool_use") if answer.calls.len() < MAX_CALLS => {
                    answer.calls.push(PartialCall {
                        id: block["id"].as_str().unwrap_or("").to_owned(),
                        name: block["name"].as_str().unwrap_or("").to_owned(),
                        arguments: match &block["input"] {
                            Value::Null => String::new(),
                            input => input.to_string(),
                        },
                    });
                }
                _ => {}
            }
        }
        answer.usage = message.get("usage").filter(|u| u.is_object()).map(usage_of);
        Ok(answer)
    }
}

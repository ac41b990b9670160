//! The OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, llama.cpp server,
//! LM Studio, OpenRouter): the conversation as messages, tools as functions, the answer
//! streamed over SSE — text deltas, and `tool_calls` deltas whose `arguments` arrive in
//! fragments, several calls in one response, keyed by `index`; usage from the final chunk
//! (`stream_options.include_usage`).
//!
//! The request starts with the stable prefix — the system message, then the tool schemas in
//! registry order — so provider prompt caches keep hitting across steps.

use serde_json::{Value, json};
use steward_config::ModelConfig;
use steward_tools::ToolSpec;

use super::prompt::{self, Turn};
use super::sse::SseEvent;
use super::transport::{
    self, Answer, Endpoint, Failure, PartialCall, StreamDecoder, Wire, parse_chunk,
};
use super::{Brain, BrainError, BrainFuture, BrainInput, SummaryFuture, TokenUsage};

#[derive(Debug)]
pub struct OpenAiBrain {
    endpoint: Endpoint,
    model: String,
}

impl OpenAiBrain {
    pub fn new(config: &ModelConfig) -> Result<Self, BrainError> {
        let headers = super::transport::load_api_key(&config.api_key)?
            .map(|key| ("authorization", format!("Bearer {key}")))
            .into_iter()
            .collect();
        Ok(Self {
            endpoint: Endpoint::new(
                format!("{}/chat/completions", config.base_url),
                headers,
                config.timeout,
            )?,
            model: config.model.clone(),
        })
    }
}

impl Wire for OpenAiBrain {
    type Decoder = ChunkDecoder;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The request body: the stable prefix (system, tools), then the conversation.
    fn request_body(&self, system: &str, turns: Vec<Turn>, tools: &[ToolSpec]) -> Value {
        let mut messages = vec![json!({"role": "system", "content": system})];
        for turn in turns {
            render_turn(turn, &mut messages);
        }
        let tools: Vec<Value> = prompt::shown_tools(tools)
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": prompt::tool_description(t), "parameters": t.parameters}})
            })
            .collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

impl Brain for OpenAiBrain {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn respond<'a>(&'a self, input: BrainInput<'a>) -> BrainFuture<'a> {
        transport::respond(self, input)
    }

    fn summarize(&self, transcript: String) -> SummaryFuture<'_> {
        transport::summarize(self, transcript)
    }
}

/// Moves the turn's text into messages: no copy of what may be megabytes.
fn render_turn(turn: Turn, messages: &mut Vec<Value>) {
    match turn {
        Turn::User { results, texts } => {
            for result in results {
                messages.push(
                    json!({"role": "tool", "tool_call_id": result.id, "content": result.content}),
                );
            }
            for text in texts {
                messages.push(json!({"role": "user", "content": text}));
            }
        }
        Turn::Assistant { texts, calls } => {
            let content = if texts.is_empty() {
                Value::Null
            } else {
                Value::String(texts.join("\n\n"))
            };
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                let calls: Vec<Value> = calls
                    .into_iter()
                    .map(|c| {
                        // Arguments that were not JSON are sent back as the model wrote them.
                        let arguments = match c.args {
                            Value::String(raw) => raw,
                            other => other.to_string(),
                        };
                        json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
                    })
                    .collect();
                message["tool_calls"] = Value::Array(calls);
            }
            messages.push(message);
        }
    }
}

/// Decodes `chat.completion.chunk` objects up to `data: [DONE]`.
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    answer: Answer,
    finished: bool,
}

impl StreamDecoder for ChunkDecoder {
    fn feed(&mut self, event: &SseEvent) -> Result<bool, Failure> {
        if event.data == "[DONE]" {
            self.finished = true;
            return Ok(true);
        }
        let value = parse_chunk(event)?;
        if let Some(error) = value.get("error") {
            return Err(Failure::retry(format!(
                "the model reported an error: {error}"
            )));
        }
        if value
            .pointer("/choices/0/finish_reason")
            .is_some_and(|r| !r.is_null())
        {
            self.finished = true;
        }
        if let Some(reported) = value.get("usage").filter(|u| u.is_object()) {
            let count = |path: &str| reported.pointer(path).and_then(Value::as_u64).unwrap_or(0);
            self.answer.usage = Some(TokenUsage {
                input: count("/prompt_tokens"),
                cached_input: count("/prompt_tokens_details/cached_tokens"),
                output: count("/completion_tokens"),
            });
        }
        let Some(delta) = value.pointer("/choices/0/delta") else {
            return Ok(false);
        };
        if let Some(piece) = delta.get("content").and_then(Value::as_str) {
            self.answer.text.push_str(piece);
        }
        let calls = &mut self.answer.calls;
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            if calls.len() <= index {
                calls.resize_with(index + 1, PartialCall::default);
            }
            let partial = &mut calls[index];
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                partial.id = id.to_owned();
            }
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                partial.name.push_str(name);
            }
            if let Some(arguments) = call.pointer("/function/arguments").and_then(Value::as_str) {
                partial.arguments.push_str(arguments);
            }
        }
        Ok(false)
    }

    fn finish(self) -> Result<Answer, Failure> {
        // A stream cut before its end (neither finish_reason nor `[DONE]`) is not an
        // answer. Some servers close without `[DONE]` after a finish_reason: complete.
        if self.finished {
            Ok(self.answer)
        } else {
            Err(Failure::retry(
                "the stream ended before the answer was complete",
            ))
        }
    }
}

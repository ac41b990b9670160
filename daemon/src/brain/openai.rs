//! The OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, llama.cpp server,
//! LM Studio, OpenRouter): the conversation as messages, tools as functions, the answer
//! streamed over SSE — text deltas, and `tool_calls` deltas whose `arguments` arrive in
//! fragments, several calls in one response, keyed by `index`; usage from the final chunk
//! (`stream_options.include_usage`).
//!
//! The request starts with the stable prefix — the system message, then the tool schemas in
//! registry order — so provider prompt caches keep hitting across steps.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use steward_config::ModelConfig;
use steward_tools::ToolSpec;

use super::BrainError;
use super::prompt::{self, JsonText, RenderMemo, Turn};
use super::sse::SseEvent;
use super::transport::{
    Answer, Endpoint, Failure, MAX_CALLS, PartialCall, StreamDecoder, ToolsJson, Wire, parse_chunk,
};
use steward_events::TokenUsage;

#[derive(Debug)]
pub struct OpenAiBrain {
    endpoint: Endpoint,
    model: String,
    tools: ToolsJson,
    memo: RenderMemo,
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
            tools: ToolsJson::default(),
            memo: RenderMemo::default(),
        })
    }
}

impl Wire for OpenAiBrain {
    const NAME: &'static str = "openai";
    type Decoder = ChunkDecoder;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn memo(&self) -> &RenderMemo {
        &self.memo
    }

    /// The request body: the stable prefix (system, tools), then the conversation.
    fn request_body(
        &self,
        system: &str,
        turns: Vec<Turn<'_>>,
        tools: &Arc<Vec<ToolSpec>>,
    ) -> Result<Vec<u8>, BrainError> {
        let mut messages = vec![Message::System { content: system }];
        for turn in turns {
            render_turn(turn, &mut messages);
        }
        let request = Request {
            model: &self.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: self.tools.get(tools, |t| Function {
                kind: "function",
                function: FunctionDef {
                    name: &t.name,
                    description: prompt::tool_description(t),
                    parameters: &t.parameters,
                },
            })?,
        };
        super::transport::encode(&request)
    }
}

/// A Chat Completions request, serialized straight from borrowed parts.
#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    /// The [`Function`]s, serialized once per tool set.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: JsonText,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: JsonText,
    },
}

#[derive(Serialize)]
struct ToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: Arguments<'a>,
}

/// A call's arguments as Chat Completions wants them: a string holding their JSON.
enum Arguments<'a> {
    /// Arguments that were not JSON, sent back as the model wrote them.
    AsWritten(&'a str),
    Json(JsonText),
}

impl Serialize for Arguments<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::AsWritten(text) => serializer.serialize_str(text),
            Self::Json(json) => serializer.serialize_str(json.json()),
        }
    }
}

#[derive(Serialize)]
struct Function<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    description: Cow<'a, str>,
    parameters: &'a Value,
}

fn render_turn<'a>(turn: Turn<'a>, messages: &mut Vec<Message<'a>>) {
    match turn {
        Turn::User { results, texts } => {
            messages.extend(results.into_iter().map(|r| Message::Tool {
                tool_call_id: r.id,
                content: r.content,
            }));
            messages.extend(texts.into_iter().map(|content| Message::User { content }));
        }
        Turn::Assistant { texts, calls } => messages.push(Message::Assistant {
            content: (!texts.is_empty()).then(|| texts.join("\n\n")),
            tool_calls: calls
                .into_iter()
                .map(|c| ToolCall {
                    id: c.id,
                    kind: "function",
                    function: CallFunction {
                        name: c.name,
                        arguments: match c.args {
                            Value::String(raw) => Arguments::AsWritten(raw),
                            _ => Arguments::Json(c.args_json),
                        },
                    },
                })
                .collect(),
        }),
    }
}

/// The `usage` of a chunk or a completion, when reported.
fn usage(value: &Value) -> Option<TokenUsage> {
    let reported = value.get("usage").filter(|u| u.is_object())?;
    let count = |path: &str| reported.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    Some(TokenUsage {
        input: count("/prompt_tokens"),
        cached_input: count("/prompt_tokens_details/cached_tokens"),
        output: count("/completion_tokens"),
    })
}

/// Decodes `chat.completion.chunk` objects up to `data: [DONE]`.
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    answer: Answer,
    finished: bool,
}

impl StreamDecoder for ChunkDecoder {
    fn text(&self) -> &str {
        &self.answer.text
    }

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
        if let Some(reported) = usage(&value) {
            self.answer.usage = Some(reported);
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
            if index >= MAX_CALLS {
                return Err(Failure::retry(format!(
                    "a tool call index out of any reasonable range: {index}"
                )));
            }
            if calls.len() <= index {
                calls.resize_with(index + 1, PartialCall::default);
            }
            let Some(partial) = calls.get_mut(index) else {
                continue;
            };
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

    /// A whole `chat.completion`: the first choice's `message` and `usage`.
    fn complete(completion: &Value) -> Result<Answer, Failure> {
        let Some(message) = completion.pointer("/choices/0/message") else {
            return Err(Failure::retry(format!(
                "a JSON answer without choices[0].message: {}",
                completion.to_string().chars().take(300).collect::<String>()
            )));
        };
        let mut answer = Answer {
            text: message["content"].as_str().unwrap_or("").to_owned(),
            ..Answer::default()
        };
        for call in message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .take(MAX_CALLS)
        {
            answer.calls.push(PartialCall {
                id: call["id"].as_str().unwrap_or("").to_owned(),
                name: call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                arguments: call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            });
        }
        answer.usage = usage(completion);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::brain::prompt::Call;

    fn call<'a>(id: &'a str, args: &'a Value) -> Call<'a> {
        Call {
            id,
            name: "fs_read",
            args,
            args_json: JsonText::of(args),
        }
    }

    #[test]
    fn call_arguments_go_back_as_the_string_of_json_chat_completions_expects() {
        let args = json!({"path": "notes.txt", "note": "say \"hi\"\n"});
        let as_written = Value::String("{\"path\": \"no".into());
        let mut messages = Vec::new();
        render_turn(
            Turn::Assistant {
                texts: Vec::new(),
                calls: vec![call("a", &args), call("b", &as_written)],
            },
            &mut messages,
        );
        let wire = serde_json::to_value(&messages).unwrap();
        let calls = &wire[0]["tool_calls"];
        let sent = calls[0]["function"]["arguments"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(sent).unwrap(), args);
        // Arguments that were not JSON go back exactly as the model wrote them.
        assert_eq!(calls[1]["function"]["arguments"], "{\"path\": \"no");
    }
}

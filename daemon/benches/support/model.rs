//! The wire half of a scripted OpenAI-compatible model server for benchmarks: read a Chat
//! Completions request from a connection, write a streamed (SSE) answer, and keep the
//! connection open for the next request, as the providers' servers do (a server that
//! closed every connection would put a TCP connect on every measured call).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

/// Reads one HTTP request and returns its JSON body; `None` when the peer closed first. A
/// client does not send its next request before the answer to this one, so nothing read
/// ahead is lost between calls.
pub fn read_request(stream: &TcpStream) -> Option<Value> {
    read_request_at(stream).map(|(request, _)| request)
}

/// [`read_request`], and when its last byte had been read: what a model server receives is
/// bytes, and the time this (optimised-for-size) bench takes to parse them is not Steward's.
pub fn read_request_at(stream: &TcpStream) -> Option<(Value, tokio::time::Instant)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let read = tokio::time::Instant::now();
    Some((serde_json::from_slice(&body).ok()?, read))
}

/// Whether the request is the daemon asking for a summary (compaction), not a turn.
pub fn is_summary_request(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You compact"))
}

/// The two SSE chunks of an answer: `delta`, then the finish reason.
pub fn chunk(delta: Value, finish: &str) -> String {
    let content = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    let end = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]});
    format!("data: {content}\n\ndata: {end}\n\n")
}

/// An answer that calls `tool` with `args`.
pub fn tool_call(tool: &str, args: &Value) -> String {
    let call = json!({"index": 0, "id": format!("call_{}", ulid::Ulid::generate()), "type": "function",
        "function": {"name": tool, "arguments": args.to_string()}});
    chunk(
        json!({"role": "assistant", "tool_calls": [call]}),
        "tool_calls",
    )
}

/// An answer with text only.
pub fn text(text: &str) -> String {
    chunk(json!({"role": "assistant", "content": text}), "stop")
}

/// Writes `events` as a complete streamed response; the connection stays open.
pub fn respond(mut stream: &TcpStream, events: &str) -> std::io::Result<()> {
    let body = format!("{events}data: [DONE]\n\n");
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

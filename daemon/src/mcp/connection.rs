//! One live connection to an MCP server: JSON-RPC 2.0 requests with ids and timeouts over a
//! transport — a child process (newline-delimited JSON on stdin/stdout) or streamable HTTP
//! (each message POSTed; the answer comes back as JSON or as an SSE stream; a session id
//! from `initialize` goes on every later request; server notifications arrive on an
//! optional GET stream).
//!
//! What the server sends unasked is turned into [`Incoming`]: `tools/list_changed`, and the
//! connection's end. Server requests are answered: `ping` with an empty result, anything
//! else with "method not found" (Steward offers no sampling or roots).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use steward_config::McpTransport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::brain::sse::SseParser;

/// The protocol revision Steward speaks.
const PROTOCOL_VERSION: &str = "2025-06-18";

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("the connection is closed")]
    Closed,
    #[error("no answer to {method} within {secs}s")]
    Timeout { method: String, secs: u64 },
    #[error("{method} failed: {message}")]
    Rpc { method: String, message: String },
    #[error("HTTP: {0}")]
    Http(String),
    #[error("the bearer token variable {0} is not set")]
    MissingToken(String),
}

/// What the server says unasked.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    ToolsChanged,
    Closed(String),
}

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>>;

#[derive(Debug)]
pub struct Connection {
    transport: Transport,
    next_id: AtomicU64,
    tasks: ConnectionTasks,
}

/// Where a connection's own tasks (the server's stdout and stderr readers, the HTTP
/// notification stream) run: on the daemon's tracker, so shutdown waits for them, and
/// stopped with the connection (or the daemon).
#[derive(Clone, Debug)]
pub struct ConnectionTasks {
    pub tracker: TaskTracker,
    pub stop: CancellationToken,
}

impl ConnectionTasks {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }
}

#[derive(Debug)]
enum Transport {
    Stdio {
        stdin: Arc<Mutex<ChildStdin>>,
        pending: Pending,
        /// Killed when the connection is dropped.
        _child: Child,
    },
    Http {
        client: reqwest::Client,
        url: String,
        token: Option<String>,
        session: std::sync::Mutex<Option<String>>,
        incoming: mpsc::Sender<Incoming>,
    },
}

impl Connection {
    /// Opens the transport; the caller then calls [`Connection::initialize`].
    pub fn open(
        transport: &McpTransport,
        tasks: ConnectionTasks,
    ) -> Result<(Self, mpsc::Receiver<Incoming>), McpError> {
        let (incoming, events) = mpsc::channel(16);
        let transport = match transport {
            McpTransport::Stdio { command, args, env } => {
                spawn(command, args, env, incoming, &tasks)?
            }
            McpTransport::Http {
                url,
                bearer_token_env,
            } => Transport::Http {
                client: steward_tools::https::client_builder()
                    .connect_timeout(Duration::from_secs(10))
                    .build()
                    .map_err(|e| McpError::Http(e.to_string()))?,
                url: url.clone(),
                token: match bearer_token_env {
                    Some(var) => {
                        Some(std::env::var(var).map_err(|_| McpError::MissingToken(var.clone()))?)
                    }
                    None => None,
                },
                session: std::sync::Mutex::new(None),
                incoming,
            },
        };
        Ok((
            Self {
                transport,
                next_id: AtomicU64::new(1),
                tasks,
            },
            events,
        ))
    }

    /// The handshake: `initialize`, then `notifications/initialized`. Returns the server's
    /// name and version as it reports them.
    pub async fn initialize(&self) -> Result<String, McpError> {
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "steward", "version": env!("CARGO_PKG_VERSION")},
                }),
                Duration::from_secs(30),
            )
            .await?;
        self.notify("notifications/initialized", json!({})).await?;
        if let Transport::Http { .. } = &self.transport {
            self.listen_for_notifications();
        }
        let info = result.get("serverInfo").unwrap_or(&Value::Null);
        Ok(format!(
            "{} {}",
            info["name"].as_str().unwrap_or("?"),
            info["version"].as_str().unwrap_or("")
        )
        .trim()
        .to_owned())
    }

    /// Every tool the server lists, following `nextCursor`.
    pub async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self
                .request("tools/list", params, Duration::from_secs(30))
                .await?;
            tools.extend(
                page.get("tools")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && tools.len() < 10_000 => {
                    cursor = Some(next.to_owned());
                }
                _ => return Ok(tools),
            }
        }
    }

    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = match &self.transport {
            Transport::Stdio { stdin, pending, .. } => {
                let (tx, rx) = oneshot::channel();
                lock(pending).insert(id, tx);
                if let Err(e) = write_line(stdin, &message).await {
                    lock(pending).remove(&id);
                    return Err(e);
                }
                let answer = tokio::time::timeout(timeout, rx).await;
                lock(pending).remove(&id);
                match answer {
                    Err(_) => {
                        // Tell the server to stop working on it.
                        let _ = self
                            .notify(
                                "notifications/cancelled",
                                json!({"requestId": id, "reason": "timeout"}),
                            )
                            .await;
                        return Err(McpError::Timeout {
                            method: method.to_owned(),
                            secs: timeout.as_secs(),
                        });
                    }
                    Ok(Err(_)) => return Err(McpError::Closed),
                    Ok(Ok(answer)) => answer,
                }
            }
            Transport::Http { .. } => {
                match tokio::time::timeout(timeout, self.post(&message, Some(id))).await {
                    Err(_) => {
                        return Err(McpError::Timeout {
                            method: method.to_owned(),
                            secs: timeout.as_secs(),
                        });
                    }
                    Ok(answer) => answer?,
                }
            }
        };
        answer.map_err(|message| McpError::Rpc {
            method: method.to_owned(),
            message,
        })
    }

    pub async fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        match &self.transport {
            Transport::Stdio { stdin, .. } => write_line(stdin, &message).await,
            Transport::Http { .. } => self.post(&message, None).await.map(|_| ()),
        }
    }

    /// POSTs one message; for a request (`id`), reads its answer from a JSON body or an SSE
    /// stream. `Ok(Err(message))` is a JSON-RPC error.
    async fn post(
        &self,
        message: &Value,
        id: Option<u64>,
    ) -> Result<Result<Value, String>, McpError> {
        let Transport::Http {
            session, incoming, ..
        } = &self.transport
        else {
            unreachable!("post is only called for the HTTP transport");
        };
        let Some(request) =
            self.http_request(reqwest::Method::POST, "application/json, text/event-stream")
        else {
            unreachable!("post is only called for the HTTP transport");
        };
        let mut response = request
            .header("content-type", "application/json")
            .body(message.to_string())
            .send()
            .await
            .map_err(|e| McpError::Http(e.to_string()))?;
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *lock(session) = Some(id.to_owned());
        }
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(McpError::Http(format!(
                "{status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        let Some(id) = id else {
            return Ok(Ok(Value::Null));
        };
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let bytes = response
                .bytes()
                .await
                .map_err(|e| McpError::Http(e.to_string()))?;
            let body: Value = serde_json::from_slice(&bytes)
                .map_err(|e| McpError::Http(format!("a malformed answer: {e}")))?;
            return Ok(answer_of(&body));
        }
        let mut parser = SseParser::default();
        while let Some(bytes) = response
            .chunk()
            .await
            .map_err(|e| McpError::Http(e.to_string()))?
        {
            for event in parser.push(&bytes) {
                let Ok(value) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                if value.get("id").and_then(Value::as_u64) == Some(id) {
                    return Ok(answer_of(&value));
                }
                if value.get("method").and_then(Value::as_str)
                    == Some("notifications/tools/list_changed")
                {
                    let _ = incoming.try_send(Incoming::ToolsChanged);
                }
            }
        }
        Err(McpError::Http(
            "the event stream ended without an answer".into(),
        ))
    }

    /// Streamable HTTP: the GET stream on which a server may send notifications. A server
    /// without one (405) simply never tells; its tools are listed again on reconnects.
    fn listen_for_notifications(&self) {
        let (Transport::Http { incoming, .. }, Some(request)) = (
            &self.transport,
            self.http_request(reqwest::Method::GET, "text/event-stream"),
        ) else {
            return;
        };
        let incoming = incoming.clone();
        self.tasks.spawn(async move {
            let Ok(mut response) = request.send().await else {
                return;
            };
            if !response.status().is_success() {
                debug!(status = %response.status(), "the MCP server offers no notification stream");
                return;
            }
            let mut parser = SseParser::default();
            while let Ok(Some(bytes)) = response.chunk().await {
                for event in parser.push(&bytes) {
                    if event.data.contains("notifications/tools/list_changed")
                        && incoming.send(Incoming::ToolsChanged).await.is_err()
                    {
                        return;
                    }
                }
            }
        });
    }
}

impl Connection {
    /// A request to the HTTP endpoint with what every one carries: the protocol version,
    /// the bearer token, the session id. `None` for other transports.
    fn http_request(
        &self,
        method: reqwest::Method,
        accept: &str,
    ) -> Option<reqwest::RequestBuilder> {
        let Transport::Http {
            client,
            url,
            token,
            session,
            ..
        } = &self.transport
        else {
            return None;
        };
        let mut request = client
            .request(method, url)
            .header("accept", accept)
            .header("mcp-protocol-version", PROTOCOL_VERSION);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(id) = lock(session).clone() {
            request = request.header("mcp-session-id", id);
        }
        Some(request)
    }
}

fn answer_of(message: &Value) -> Result<Value, String> {
    match message.get("error") {
        Some(error) => Err(error["message"]
            .as_str()
            .map_or_else(|| error.to_string(), str::to_owned)),
        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

async fn write_line(stdin: &Mutex<ChildStdin>, message: &Value) -> Result<(), McpError> {
    let mut line = message.to_string();
    line.push('\n');
    let mut stdin = stdin.lock().await;
    stdin
        .write_all(line.as_bytes())
        .await
        .map_err(|_| McpError::Closed)?;
    stdin.flush().await.map_err(|_| McpError::Closed)
}

fn spawn(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    incoming: mpsc::Sender<Incoming>,
    tasks: &ConnectionTasks,
) -> Result<Transport, McpError> {
    let mut child = tokio::process::Command::new(command)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| McpError::Spawn {
            command: command.to_owned(),
            source,
        })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three streams were asked to be piped");
    };
    let pending: Pending = Arc::default();
    let stdin = Arc::new(Mutex::new(stdin));
    // Answers to the server's own requests share the writer.
    let replies = stdin.clone();
    let server = command.to_owned();
    tasks.spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            debug!(server = %server, "{line}");
        }
    });
    let answers = pending.clone();
    tasks.spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let reason = loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => break "the server closed its output".to_owned(),
                Err(e) => break format!("reading from the server failed: {e}"),
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                warn!(line = %line.chars().take(200).collect::<String>(), "an MCP server wrote something that is not JSON-RPC");
                continue;
            };
            match (
                message.get("id"),
                message.get("method").and_then(Value::as_str),
            ) {
                (Some(id), None) => {
                    if let Some(tx) = id.as_u64().and_then(|id| lock(&answers).remove(&id)) {
                        let _ = tx.send(answer_of(&message));
                    }
                }
                (Some(id), Some(method)) => {
                    let reply = if method == "ping" {
                        json!({"jsonrpc": "2.0", "id": id, "result": {}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("{method} is not supported by this client")}})
                    };
                    let _ = write_line(&replies, &reply).await;
                }
                (None, Some("notifications/tools/list_changed")) => {
                    let _ = incoming.send(Incoming::ToolsChanged).await;
                }
                _ => {}
            }
        };
        // Whoever waits for an answer learns that none will come.
        lock(&answers).clear();
        let _ = incoming.send(Incoming::Closed(reason)).await;
    });
    Ok(Transport::Stdio {
        stdin,
        pending,
        _child: child,
    })
}

//! MCP servers: each configured server is kept connected by its own supervisor task, and
//! its tools live in the registry as the source `mcp:NAME` (see [`tools`] for how they are
//! declared).
//!
//! - Start: the daemon waits (at most [`START_WAIT`]) for every server's first tool list
//!   before it reports ready, so the first prompt already names them.
//! - `notifications/tools/list_changed`: the list is fetched again and the server's tools
//!   are replaced as a whole. The prompt prefix does not change with it — a context view
//!   keeps the tools it started with; `tool_search` sees the new ones at once.
//! - A crash or a broken connection: the server's tools leave the registry (a call says the
//!   tool is unknown rather than hanging), and the server is restarted with exponential
//!   backoff (1 s doubling to 60 s). `steward status` shows each server as a channel
//!   `mcp:NAME`: `starting`, `ready (N tools)` or `backoff: <error>`.
// Everything here reads outside input (MCP servers): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

mod connection;
mod tools;

pub use tools::{LocalName, local_names};

use std::sync::Arc;
use std::time::Duration;

use steward_config::McpServerConfig;
use steward_tools::{ToolHandler, ToolRegistry, ToolSource};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

pub use connection::{Connection, Incoming, McpError};
pub use tools::tool_name;

use crate::channels::health::pause;
use crate::channels::{Backoff, ChannelHealth};
use crate::status::StatusBoard;

/// How long start-up waits for the servers' first tool lists.
pub const START_WAIT: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Starts a supervisor per server and waits for their first lists (see the module docs).
pub async fn start(
    servers: &[McpServerConfig],
    registry: Arc<ToolRegistry>,
    status: Arc<StatusBoard>,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) {
    let (first_try, mut tried) = mpsc::channel::<()>(servers.len().max(1));
    for server in servers {
        let supervisor = Supervisor {
            server: server.clone(),
            registry: registry.clone(),
            status: status.clone(),
            first_try: Some(first_try.clone()),
            tasks: tasks.clone(),
        };
        tasks.spawn(supervisor.run(shutdown.clone()));
    }
    drop(first_try);
    let all = async {
        for _ in servers {
            if tried.recv().await.is_none() {
                break;
            }
        }
    };
    if tokio::time::timeout(START_WAIT, all).await.is_err() {
        warn!(
            wait_secs = START_WAIT.as_secs(),
            "some MCP servers are not ready yet; starting without their tools"
        );
    }
}

struct Supervisor {
    server: McpServerConfig,
    registry: Arc<ToolRegistry>,
    status: Arc<StatusBoard>,
    /// Told once the first connection attempt has listed tools or failed.
    first_try: Option<mpsc::Sender<()>>,
    /// The daemon's tracker: each connection's own tasks run on it.
    tasks: TaskTracker,
}

impl Supervisor {
    fn channel(&self) -> String {
        format!("mcp:{}", self.server.name)
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp(self.server.name.clone())
    }

    async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = Backoff::new(MAX_BACKOFF);
        loop {
            self.status
                .set_channel(&self.channel(), ChannelHealth::starting("starting"));
            let error = tokio::select! {
                () = shutdown.cancelled() => {
                    // Dropping the handlers drops the connection: the child is killed.
                    self.registry.replace_source(&self.source(), Vec::new());
                    return;
                }
                error = self.serve(&shutdown) => error,
            };
            self.registry.replace_source(&self.source(), Vec::new());
            self.first_try.take();
            if error.connected {
                backoff.reset();
            }
            let wait = backoff.next_wait();
            warn!(server = %self.server.name, error = %error.message, retry_secs = wait.as_secs(), "MCP server unavailable; restarting");
            self.status.set_channel(
                &self.channel(),
                ChannelHealth::backoff(&error.message, wait),
            );
            if !pause(wait, &shutdown).await {
                return;
            }
        }
    }

    /// One connection's life: handshake, tools, then waiting for changes until it ends.
    async fn serve(&mut self, shutdown: &CancellationToken) -> Ended {
        let fail = |connected: bool| {
            move |e: McpError| Ended {
                message: e.to_string(),
                connected,
            }
        };
        // The connection's tasks stop when this attempt ends, however it ends.
        let stop = shutdown.child_token();
        let _stop_when_done = stop.clone().drop_guard();
        let tasks = connection::ConnectionTasks {
            tracker: self.tasks.clone(),
            stop,
        };
        let (connection, mut incoming) = match Connection::open(&self.server.transport, tasks) {
            Ok(opened) => opened,
            Err(e) => return fail(false)(e),
        };
        let connection = Arc::new(connection);
        let server_info = match connection.initialize().await {
            Ok(info) => info,
            Err(e) => return fail(false)(e),
        };
        if let Err(e) = self.load_tools(&connection).await {
            return fail(false)(e);
        }
        info!(server = %self.server.name, info = %server_info, "MCP server connected");
        if let Some(first_try) = self.first_try.take() {
            let _ = first_try.send(()).await;
        }
        loop {
            match incoming.recv().await {
                Some(Incoming::ToolsChanged) => {
                    if let Err(e) = self.load_tools(&connection).await {
                        return fail(true)(e);
                    }
                }
                Some(Incoming::Closed(reason)) => {
                    return Ended {
                        message: reason,
                        connected: true,
                    };
                }
                None => {
                    return Ended {
                        message: "the connection ended".into(),
                        connected: true,
                    };
                }
            }
        }
    }

    async fn load_tools(&self, connection: &Arc<Connection>) -> Result<(), McpError> {
        let listed = connection.list_tools().await?;
        let remotes: Vec<&str> = listed
            .iter()
            .filter_map(|tool| tool["name"].as_str().filter(|n| !n.is_empty()))
            .collect();
        let by_remote: std::collections::HashMap<&str, &serde_json::Value> = listed
            .iter()
            .rev() // the first entry of a name listed twice wins
            .filter_map(|tool| Some((tool["name"].as_str()?, tool)))
            .collect();
        // Names other sources hold: built-ins, other servers' tools.
        let reserved = self.registry.names_outside(&self.source());
        let tools: Vec<(steward_tools::ToolContract, Arc<dyn ToolHandler>)> =
            tools::local_names(&self.server.name, &remotes, &reserved)
                .into_iter()
                .filter_map(|name| {
                    if name.disambiguated {
                        info!(server = %self.server.name, remote = name.remote, local = %name.local, "MCP tool renamed: its plain name is another tool's");
                    }
                    let tool = by_remote.get(name.remote)?;
                    let contract = tools::contract(&self.server, tool, name.local)?;
                    let handler: Arc<dyn ToolHandler> = Arc::new(tools::McpTool {
                        connection: connection.clone(),
                        server: self.server.name.clone(),
                        remote: name.remote.to_owned(),
                        timeout: self.server.call_timeout,
                    });
                    Some((contract, handler))
                })
                .collect();
        if remotes.len() > tools.len() {
            warn!(server = %self.server.name, listed = remotes.len(), distinct = tools.len(), "the MCP server listed a tool name more than once; the first entry is used");
        }
        let offered = tools.len();
        let rejected = self.registry.replace_source(&self.source(), tools);
        for error in &rejected {
            warn!(server = %self.server.name, error = %error, "an MCP tool was refused");
        }
        let loaded = offered - rejected.len();
        info!(server = %self.server.name, offered, loaded, "MCP tools loaded");
        self.status.set_channel(
            &self.channel(),
            ChannelHealth::ready(format!("ready ({loaded} tools)")),
        );
        Ok(())
    }
}

/// Why a connection ended, and whether it had been up (then backoff starts over).
struct Ended {
    message: String,
    connected: bool,
}

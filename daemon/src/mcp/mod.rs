//! MCP servers: tool sources, not channels, but each is kept connected as a channel of the
//! supervisor (`mcp:NAME`, started by [`start`], restarted by `keep_up`), and
//! its tools live in the registry as the source `mcp:NAME` (see `tools` for how they are
//! declared).
//!
//! - Start: the dispatcher waits (at most [`START_WAIT`]) for every server's first tool
//!   list before its first step, so the first prompt already names them; READY=1 does not
//!   wait (an MCP server is a process to spawn and a handshake — ~150 ms for a Python one,
//!   most of a start with every channel), and input that arrives meanwhile is durable in
//!   the inbox, merged at that first step.
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
use tracing::{info, warn};

pub use connection::{Connection, Incoming, McpError};
#[cfg(test)]
pub(crate) use tools::contract;
pub use tools::tool_name;

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};
use crate::supervisor::Supervisor;

/// How long start-up waits for the servers' first tool lists.
pub const START_WAIT: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Starts each server as a channel of the supervisor; the future returned resolves once
/// each has its first list or [`START_WAIT`] passed (see the module docs).
pub fn start(
    servers: &[McpServerConfig],
    registry: Arc<ToolRegistry>,
    supervisor: &Supervisor,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let settled: Vec<_> = servers
        .iter()
        .map(|server| {
            let source = McpSource {
                server: server.clone(),
                registry: registry.clone(),
            };
            supervisor.start(&format!("mcp:{}", server.name), move |cx| run(source, cx))
        })
        .collect();
    async move {
        let all = futures_util::future::join_all(settled.into_iter().map(|s| s.wait(START_WAIT)));
        if all.await.iter().any(|settled| !settled) {
            warn!(
                wait_secs = START_WAIT.as_secs(),
                "some MCP servers are not ready yet; starting without their tools"
            );
        }
    }
}

/// One server and the registry its tools go to.
#[derive(Clone, Debug)]
pub struct McpSource {
    pub server: McpServerConfig,
    pub registry: Arc<ToolRegistry>,
}

/// Keeps the server connected until the channel stops; its tools leave the registry
/// whenever the connection is down, and when the channel stops.
pub async fn run(source: McpSource, cx: ChannelContext) {
    let server = Server { source, cx };
    // Dropping the handlers drops the connection: the child is killed.
    let _clear = ClearOnDrop(&server);
    server
        .cx
        .keep_up(MAX_BACKOFF, || async {
            let ended = server.serve().await;
            server.clear();
            Err(Down::Failed(ended))
        })
        .await;
}

struct Server {
    source: McpSource,
    cx: ChannelContext,
}

/// Takes the server's tools out of the registry when the channel's future ends or is dropped.
struct ClearOnDrop<'a>(&'a Server);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.clear();
    }
}

impl Server {
    fn source(&self) -> ToolSource {
        ToolSource::Mcp(self.source.server.name.clone())
    }

    fn clear(&self) {
        self.source
            .registry
            .replace_source(&self.source(), Vec::new());
    }

    /// One connection's life: handshake, tools, then waiting for changes until it ends.
    /// Why it ended.
    async fn serve(&self) -> String {
        // The connection's tasks stop when this attempt ends, however it ends.
        let stop = self.cx.shutdown().child_token();
        let _stop_when_done = stop.clone().drop_guard();
        let tasks = connection::ConnectionTasks {
            tracker: self.cx.tracker().clone(),
            stop,
        };
        let (connection, mut incoming) =
            match Connection::open(&self.source.server.transport, tasks) {
                Ok(opened) => opened,
                Err(e) => return e.to_string(),
            };
        let connection = Arc::new(connection);
        let server_info = match connection.initialize().await {
            Ok(info) => info,
            Err(e) => return e.to_string(),
        };
        if let Err(e) = self.load_tools(&connection).await {
            return e.to_string();
        }
        info!(server = %self.source.server.name, info = %server_info, "MCP server connected");
        loop {
            match incoming.recv().await {
                Some(Incoming::ToolsChanged) => {
                    if let Err(e) = self.load_tools(&connection).await {
                        return e.to_string();
                    }
                }
                Some(Incoming::Closed(reason)) => return reason,
                None => return "the connection ended".into(),
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
        let reserved = self.source.registry.names_outside(&self.source());
        let tools: Vec<(steward_tools::ToolContract, Arc<dyn ToolHandler>)> =
            tools::local_names(&self.source.server.name, &remotes, &reserved)
                .into_iter()
                .filter_map(|name| {
                    if name.disambiguated {
                        info!(server = %self.source.server.name, remote = name.remote, local = %name.local, "MCP tool renamed: its plain name is another tool's");
                    }
                    let tool = by_remote.get(name.remote)?;
                    let contract = tools::contract(&self.source.server, tool, name.local)?;
                    let handler: Arc<dyn ToolHandler> = Arc::new(tools::McpTool {
                        connection: connection.clone(),
                        server: self.source.server.name.clone(),
                        remote: name.remote.to_owned(),
                        timeout: self.source.server.call_timeout,
                    });
                    Some((contract, handler))
                })
                .collect();
        if remotes.len() > tools.len() {
            warn!(server = %self.source.server.name, listed = remotes.len(), distinct = tools.len(), "the MCP server listed a tool name more than once; the first entry is used");
        }
        let offered = tools.len();
        let rejected = self.source.registry.replace_source(&self.source(), tools);
        for error in &rejected {
            warn!(server = %self.source.server.name, error = %error, "an MCP tool was refused");
        }
        let loaded = offered - rejected.len();
        info!(server = %self.source.server.name, offered, loaded, "MCP tools loaded");
        self.cx
            .set_health(ChannelHealth::ready(format!("ready ({loaded} tools)")));
        Ok(())
    }
}

//! Sub-agents: `agent_spawn` hands a task to a side lane with its own short trajectory, a
//! tool set no larger than the parent's, a model-call budget and a timeout; its result
//! comes back to the main conversation as a QUEUE event that starts a step there.
//! `agent_list` and `agent_cancel` look after them.
//!
//! Decided here:
//! - Depth 1: the agent tools are not allowed in side lanes, so a sub-agent cannot spawn.
//! - Tools: those named (each must be enabled and lane-allowed), by default every enabled
//!   read-only lane tool; never `notify_owner`, email or chat sends unless
//!   `agents.allow_sending`. A call outside the set is refused by the pipeline, and the
//!   sub-agent is shown only its set.
//! - At most `agents.max_running` sub-agents at once (queued or running); a spawn past it
//!   is refused with the reason, not queued silently.
//! - A sub-agent's answers go to the conversation that spawned it, not to the owner.
//! - The registry of sub-agents is in memory: after a restart a sub-agent whose event was
//!   still pending runs again (its lane's origin stays pending until its result is
//!   durable), but `agent_list` forgets finished ones.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::{Event, EventId, Payload, Sender, Source, SubAgentTask, ToolOutcome, Urgency};
use steward_tools::{
    ExecutionContext, SideEffect, ToolContract, ToolFuture, ToolHandler, ToolRegistry,
    ToolRegistryBuilder,
};
use tokio_util::sync::CancellationToken;

use crate::store::Inbox;

/// Tools a sub-agent never gets unless `agents.allow_sending`: they reach people.
const SENDING: &[&str] = &["notify_owner", "email_send", "email_reply"];
const DEFAULT_MAX_CALLS: u32 = 10;
const DEFAULT_TIMEOUT_SECS: u64 = 300;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentState {
    Queued,
    Running,
    Done,
    Cancelled,
    TimedOut,
}

impl AgentState {
    fn as_str(self) -> &'static str {
        match self {
            AgentState::Queued => "queued",
            AgentState::Running => "running",
            AgentState::Done => "done",
            AgentState::Cancelled => "cancelled",
            AgentState::TimedOut => "timed_out",
        }
    }

    fn active(self) -> bool {
        matches!(self, AgentState::Queued | AgentState::Running)
    }
}

#[derive(Debug)]
struct Agent {
    task: String,
    state: AgentState,
    cancel: CancellationToken,
}

/// The sub-agents of this daemon run (see the module docs).
#[derive(Clone, Debug)]
pub struct SubAgents(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    inbox: Arc<Inbox>,
    agents: Mutex<BTreeMap<EventId, Agent>>,
    max_running: usize,
    allow_sending: bool,
    registry: OnceLock<Weak<ToolRegistry>>,
}

impl SubAgents {
    pub fn new(inbox: Arc<Inbox>, max_running: usize, allow_sending: bool) -> Self {
        Self(Arc::new(Shared {
            inbox,
            agents: Mutex::default(),
            max_running,
            allow_sending,
            registry: OnceLock::new(),
        }))
    }

    /// The registry the sub-agents' tools are chosen from (set once it is built).
    pub fn set_registry(&self, registry: &Arc<ToolRegistry>) {
        let _ = self.0.registry.set(Arc::downgrade(registry));
    }

    fn agents(&self) -> std::sync::MutexGuard<'_, BTreeMap<EventId, Agent>> {
        self.0.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A lane starts the sub-agent `id`: the token that stops it (its own, or a new one
    /// after a restart), and its timeout fires it.
    pub fn started(
        &self,
        id: EventId,
        task: &SubAgentTask,
        lane: &CancellationToken,
    ) -> CancellationToken {
        let mut agents = self.agents();
        let agent = agents.entry(id).or_insert_with(|| Agent {
            task: task.task.clone(),
            state: AgentState::Queued,
            cancel: CancellationToken::new(),
        });
        if !agent.state.active() {
            // Cancelled while it waited for a lane: it stops at once.
            return agent.cancel.clone();
        }
        // The lanes' token stops it at shutdown; its own stops it on cancel or timeout.
        agent.cancel = lane.child_token();
        agent.state = AgentState::Running;
        let cancel = agent.cancel.clone();
        let timeout = Duration::from_secs(task.timeout_secs);
        let this = self.clone();
        let token = cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(timeout) => { this.stop(id, AgentState::TimedOut); }
                () = token.cancelled() => {}
            }
        });
        cancel
    }

    /// How the sub-agent `id` ended, once its lane is done.
    pub fn finished(&self, id: EventId) -> AgentState {
        let mut agents = self.agents();
        match agents.get_mut(&id) {
            Some(agent) if agent.state == AgentState::Running => {
                agent.state = AgentState::Done;
                agent.cancel.cancel(); // ends the timeout's wait
                AgentState::Done
            }
            Some(agent) => agent.state,
            None => AgentState::Done,
        }
    }

    fn stop(&self, id: EventId, state: AgentState) -> bool {
        let mut agents = self.agents();
        match agents.get_mut(&id) {
            Some(agent) if agent.state.active() => {
                agent.state = state;
                agent.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    fn tools_for(&self, named: Option<Vec<String>>) -> Result<Vec<String>, String> {
        let registry = self
            .0
            .registry
            .get()
            .and_then(Weak::upgrade)
            .ok_or("the tool registry is not ready")?;
        let allowed = |c: &ToolContract| {
            !registry.is_disabled(&c.name)
                && c.allowed_in_lane
                && (self.0.allow_sending || !SENDING.contains(&c.name.as_str()))
                && !c.name.starts_with("agent_")
        };
        let contracts = registry.contracts();
        match named {
            None => Ok(contracts
                .iter()
                .filter(|c| allowed(c) && c.side_effect == SideEffect::ReadOnly)
                .map(|c| c.name.clone())
                .collect()),
            Some(names) => {
                for name in &names {
                    if !contracts.iter().any(|c| &c.name == name && allowed(c)) {
                        return Err(format!(
                            "a sub-agent cannot be given `{name}` (unknown, disabled, not allowed in a side lane, or one that reaches people)"
                        ));
                    }
                }
                Ok(names)
            }
        }
    }

    async fn spawn(&self, args: SpawnArgs, ctx: &ExecutionContext) -> Result<Value, String> {
        let active = self.agents().values().filter(|a| a.state.active()).count();
        if active >= self.0.max_running {
            return Err(format!(
                "{active} sub-agents are already at work (agents.max_running = {}); wait for one or cancel one",
                self.0.max_running
            ));
        }
        let tools = self.tools_for(args.tools)?;
        let task = SubAgentTask {
            task: args.task,
            tools: tools.clone(),
            max_model_calls: args.max_model_calls.unwrap_or(DEFAULT_MAX_CALLS),
            timeout_secs: args.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
        };
        let mut event = Event::new(
            Source::System,
            "agent",
            Sender {
                identity: format!("agent_spawn in {}", ctx.trajectory),
                authenticated_by: "the assistant".into(),
            },
            // No more trusted than the step that asked for it.
            ctx.step_trust,
            Payload::SubAgent(Box::new(task.clone())),
        );
        event.urgency = Urgency::Parallel;
        event.channel = format!("agent:{}", event.id);
        event.dedupe_key = Some(format!("agent:{}:{}", ctx.trajectory, ctx.call_id));
        let id = event.id;
        self.agents().insert(
            id,
            Agent {
                task: task.task.clone(),
                state: AgentState::Queued,
                cancel: CancellationToken::new(),
            },
        );
        if let Err(e) = self.0.inbox.submit(event).await {
            self.agents().remove(&id);
            return Err(format!("the sub-agent could not be started: {e}"));
        }
        Ok(json!({
            "agent_id": id.to_string(),
            "tools": tools,
            "max_model_calls": task.max_model_calls,
            "timeout_secs": task.timeout_secs,
            "note": "Its result arrives as a new event when it is done.",
        }))
    }

    fn list(&self) -> Value {
        let agents: Vec<Value> = self
            .agents()
            .iter()
            .map(|(id, a)| json!({"agent_id": id.to_string(), "task": a.task, "state": a.state.as_str()}))
            .collect();
        json!({ "agents": agents })
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    /// What the sub-agent should do, with everything it needs to know.
    #[schemars(length(min = 1, max = 20000))]
    task: String,
    /// Its tools (default: every read-only tool).
    tools: Option<Vec<String>>,
    /// Model calls it may make (default 10).
    #[schemars(range(min = 1, max = 100))]
    max_model_calls: Option<u32>,
    /// Seconds before it is stopped (default 300).
    #[schemars(range(min = 1, max = 3600))]
    timeout_secs: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    agent_id: String,
}

#[derive(Clone, Copy)]
enum Op {
    Spawn,
    List,
    Cancel,
}

struct AgentTool {
    agents: SubAgents,
    op: Op,
}

fn contract(name: &str, description: &str, parameters: Value) -> ToolContract {
    ToolContract::read_only(name, description, parameters)
        .group("group:agents")
        .hint("delegate subagent helper parallel background task worker")
        .in_lane(false)
        .budget(16 * 1024)
}

/// Adds `agent_spawn`, `agent_list` and `agent_cancel`.
pub fn register(builder: ToolRegistryBuilder, agents: &SubAgents) -> ToolRegistryBuilder {
    builder
        .register(
            contract(
                "agent_spawn",
                "Hand a self-contained task to a sub-agent that works in parallel with a restricted tool set; its result comes back as a new event.",
                steward_tools::args::schema::<SpawnArgs>(),
            )
            .guidance("Give a sub-agent everything it needs in `task`: it does not see this conversation."),
            AgentTool { agents: agents.clone(), op: Op::Spawn },
        )
        .register(
            contract("agent_list", "List the sub-agents and their states.", steward_tools::args::schema::<NoArgs>()),
            AgentTool { agents: agents.clone(), op: Op::List },
        )
        .register(
            contract("agent_cancel", "Stop a sub-agent.", steward_tools::args::schema::<CancelArgs>()),
            AgentTool { agents: agents.clone(), op: Op::Cancel },
        )
}

impl ToolHandler for AgentTool {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.op {
                Op::Spawn => match steward_tools::args::parse::<SpawnArgs>(args) {
                    Ok(args) => match self.agents.spawn(args, ctx).await {
                        Ok(spawned) => ToolOutcome::ok(spawned),
                        Err(e) => ToolOutcome::error(e),
                    },
                    Err(refused) => refused,
                },
                Op::List => match steward_tools::args::parse::<NoArgs>(args) {
                    Ok(NoArgs {}) => ToolOutcome::ok(self.agents.list()),
                    Err(refused) => refused,
                },
                Op::Cancel => match steward_tools::args::parse::<CancelArgs>(args) {
                    Ok(CancelArgs { agent_id }) => {
                        let stopped = agent_id
                            .parse::<EventId>()
                            .is_ok_and(|id| self.agents.stop(id, AgentState::Cancelled));
                        if stopped {
                            ToolOutcome::ok(json!({"agent_id": agent_id, "state": "cancelled"}))
                        } else {
                            ToolOutcome::error(format!("no sub-agent {agent_id} is at work"))
                        }
                    }
                    Err(refused) => refused,
                },
            }
        })
    }
}

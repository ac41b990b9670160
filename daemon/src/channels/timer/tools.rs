//! The `cron_*` tools (group `schedule`): the model manages jobs through the same
//! [`Scheduler`] as `steward cron …`. Creating, deleting, pausing and resuming are
//! idempotent writes (the same call twice changes nothing more); triggering runs an extra
//! occurrence, so it is not idempotent and asks the owner first. A job's own action is
//! checked again by the pipeline each time it runs.

use serde_json::{Value, json};
use steward_events::ToolOutcome;
use steward_tools::{ExecutionContext, ToolContract, ToolFuture, ToolHandler, ToolRegistryBuilder};

use super::control::Scheduler;
use steward_protocol::NewJob;

/// What every scheduling tool shares: its group, its search words, its result budget.
fn schedule_tool(contract: ToolContract) -> ToolContract {
    contract
        .group("group:schedule")
        .hint("schedule timer cron reminder recurring later every")
        .budget(32 * 1024)
}

fn by_name(description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": description}},
        "required": ["name"],
        "additionalProperties": false
    })
}

/// Adds the six tools, all backed by `scheduler`.
pub fn register(builder: ToolRegistryBuilder, scheduler: &Scheduler) -> ToolRegistryBuilder {
    let create = schedule_tool(ToolContract::write("cron_create", "Schedule a job: a cron expression (5 or 6 fields), `every 10m`, or `at <RFC 3339 time>` / `at +20m`. At each occurrence the job's text comes to you as an event, or its action (a tool call) runs without you.", json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "schedule": {"type": "string"},
                "tz": {"type": "string", "description": "IANA zone, e.g. Europe/Berlin (default: the system's)"},
                "text": {"type": "string", "description": "What the event says when the job fires"},
                "action": {
                    "type": "object",
                    "properties": {"tool": {"type": "string"}, "args": {"type": "object"}},
                    "required": ["tool"],
                    "additionalProperties": false
                },
                "urgency": {"type": "string", "enum": ["parallel", "queue"]},
                "missed": {"type": "string", "enum": ["skip", "once", "all"]}
            },
            "required": ["name", "schedule"],
            "additionalProperties": false
        })).idempotent(true));
    let list = schedule_tool(ToolContract::read_only(
        "cron_list",
        "List the scheduled jobs with their next run and last outcome.",
        json!({"type": "object", "additionalProperties": false}),
    ));
    let delete = schedule_tool(
        ToolContract::write(
            "cron_delete",
            "Delete a scheduled job made at run time.",
            by_name("The job"),
        )
        .idempotent(true),
    );
    let pause = schedule_tool(
        ToolContract::write("cron_pause", "Pause a scheduled job.", by_name("The job"))
            .idempotent(true),
    );
    let resume = schedule_tool(
        ToolContract::write(
            "cron_resume",
            "Resume a paused job (what fell during the pause does not run).",
            by_name("The job"),
        )
        .idempotent(true),
    );
    let trigger = schedule_tool(ToolContract::write(
        "cron_trigger",
        "Run one occurrence of a job now (marked manual).",
        by_name("The job"),
    ));
    let handler = |op| CronTool {
        op,
        scheduler: scheduler.clone(),
    };
    builder
        .register(create, handler(Op::Create))
        .register(list, handler(Op::List))
        .register(delete, handler(Op::Delete))
        .register(pause, handler(Op::Pause))
        .register(resume, handler(Op::Resume))
        .register(trigger, handler(Op::Trigger))
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    List,
    Delete,
    Pause,
    Resume,
    Trigger,
}

struct CronTool {
    op: Op,
    scheduler: Scheduler,
}

impl ToolHandler for CronTool {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let name = args["name"].as_str().unwrap_or_default();
            let result = match self.op {
                Op::Create => match serde_json::from_value::<NewJob>(args.clone()) {
                    Ok(new) => self.scheduler.add(new).map(|row| json!(row)),
                    Err(e) => return ToolOutcome::error(format!("invalid job: {e}")),
                },
                Op::List => self.scheduler.list().map(|rows| json!({"jobs": rows})),
                Op::Delete => self
                    .scheduler
                    .remove(name)
                    .map(|()| json!({"deleted": name})),
                Op::Pause => self.scheduler.set_paused(name, true).map(|row| json!(row)),
                Op::Resume => self.scheduler.set_paused(name, false).map(|row| json!(row)),
                Op::Trigger => self
                    .scheduler
                    .trigger(name)
                    .await
                    .map(|id| json!({"event_id": id})),
            };
            match result {
                Ok(content) => ToolOutcome::ok(content),
                Err(e) => ToolOutcome::error(e.to_string()),
            }
        })
    }
}

//! The `cron_*` tools (group `schedule`): the model manages jobs through the same
//! [`Scheduler`] as `steward cron …`. Creating, deleting, pausing and resuming are
//! idempotent writes (the same call twice changes nothing more); triggering runs an extra
//! occurrence, so it is not idempotent and asks the owner first. A job's own action is
//! checked again by the pipeline each time it runs.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::{ScheduledAction, ToolOutcome, Urgency};
use steward_tools::{ExecutionContext, ToolContract, ToolFuture, ToolHandler, ToolRegistryBuilder};

use super::control::{Scheduler, SchedulerError};
use steward_protocol::{MissedPolicy, NewJob};

/// What every scheduling tool shares: its group, its search words, its result budget.
fn schedule_tool(contract: ToolContract) -> ToolContract {
    contract
        .group("group:schedule")
        .hint("schedule timer cron reminder recurring later every")
        .budget(32 * 1024)
}

/// A job named by the call.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ByName {
    /// The job.
    name: String,
}

/// What `cron_create` takes: a [`NewJob`] as the model may ask for it (no `cancel`
/// urgency: a scheduled job never interrupts the owner's step).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    #[schemars(pattern(r"^[A-Za-z0-9_-]{1,64}$"))]
    name: String,
    schedule: String,
    /// IANA zone, e.g. Europe/Berlin (default: the system's)
    tz: Option<String>,
    /// What the event says when the job fires
    text: Option<String>,
    action: Option<ActionArgs>,
    urgency: Option<JobUrgency>,
    missed: Option<Missed>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActionArgs {
    tool: String,
    args: Option<serde_json::Map<String, Value>>,
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum JobUrgency {
    Parallel,
    Queue,
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Missed {
    Skip,
    Once,
    All,
}

impl From<CreateArgs> for NewJob {
    fn from(args: CreateArgs) -> Self {
        NewJob {
            name: args.name,
            schedule: args.schedule,
            tz: args.tz,
            text: args.text,
            action: args.action.map(|action| ScheduledAction {
                tool: action.tool,
                args: Value::Object(action.args.unwrap_or_default()),
            }),
            urgency: args.urgency.map(|urgency| match urgency {
                JobUrgency::Parallel => Urgency::Parallel,
                JobUrgency::Queue => Urgency::Queue,
            }),
            missed: args.missed.map(|missed| match missed {
                Missed::Skip => MissedPolicy::Skip,
                Missed::Once => MissedPolicy::Once,
                Missed::All => MissedPolicy::All,
            }),
            max_lateness_secs: None,
        }
    }
}

/// Adds the six tools, all backed by `scheduler`.
pub fn register(builder: ToolRegistryBuilder, scheduler: &Scheduler) -> ToolRegistryBuilder {
    let create = schedule_tool(
        ToolContract::write(
            "cron_create",
            "Schedule a job. When: a cron expression (5 or 6 fields), `every 10m`, `in 20m`, `at 09:00`, `tomorrow 9:00`, `at 2026-12-24 18:00` (local times in the owner's zone unless tz is given) or an RFC 3339 time. At each occurrence the job's text comes to you as an event and your answer is sent to the owner — for a reminder, write the text as what the owner should be reminded of — or its action (a tool call) runs without you.",
            steward_tools::args::schema::<CreateArgs>(),
        )
        .idempotent(true),
    );
    let list = schedule_tool(ToolContract::read_only(
        "cron_list",
        "List the scheduled jobs with their next run and last outcome.",
        steward_tools::args::schema::<steward_tools::args::NoArguments>(),
    ));
    let delete = schedule_tool(
        ToolContract::write(
            "cron_delete",
            "Delete a scheduled job made at run time.",
            steward_tools::args::schema::<ByName>(),
        )
        .idempotent(true),
    );
    let pause = schedule_tool(
        ToolContract::write(
            "cron_pause",
            "Pause a scheduled job.",
            steward_tools::args::schema::<ByName>(),
        )
        .idempotent(true),
    );
    let resume = schedule_tool(
        ToolContract::write(
            "cron_resume",
            "Resume a paused job (what fell during the pause does not run).",
            steward_tools::args::schema::<ByName>(),
        )
        .idempotent(true),
    );
    let trigger = schedule_tool(ToolContract::write(
        "cron_trigger",
        "Run one occurrence of a job now (marked manual).",
        steward_tools::args::schema::<ByName>(),
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
            match self.run(args).await {
                Ok(content) => ToolOutcome::ok(content),
                Err(refused) => refused,
            }
        })
    }
}

impl CronTool {
    async fn run(&self, args: &Value) -> Result<Value, ToolOutcome> {
        let failed = |e: SchedulerError| ToolOutcome::error(e.to_string());
        let name = || steward_tools::args::parse::<ByName>(args).map(|by| by.name);
        Ok(match self.op {
            Op::Create => {
                let new: CreateArgs = steward_tools::args::parse(args)?;
                json!(self.scheduler.add(new.into()).await.map_err(failed)?)
            }
            Op::List => json!({"jobs": self.scheduler.list().await.map_err(failed)?}),
            Op::Delete => {
                let name = name()?;
                self.scheduler.remove(&name).await.map_err(failed)?;
                json!({"deleted": name})
            }
            Op::Pause => json!(
                self.scheduler
                    .set_paused(&name()?, true)
                    .await
                    .map_err(failed)?
            ),
            Op::Resume => json!(
                self.scheduler
                    .set_paused(&name()?, false)
                    .await
                    .map_err(failed)?
            ),
            Op::Trigger => {
                let id = self.scheduler.trigger(&name()?).await.map_err(failed)?;
                json!({"event_id": id})
            }
        })
    }
}

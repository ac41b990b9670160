//! `steward cron …`: scheduled jobs, through the daemon (the same checks as the `cron_*`
//! tools).

use std::process::ExitCode;

use steward_events::{ScheduledAction, Urgency};

use super::listing::{json_line, stream};
use super::output::out;
use super::table::Table;
use super::{Context, CronCommandArgs};
use steward_protocol::MissedPolicy;
use steward_protocol::client::ClientError;
use steward_protocol::{CronCommand, Request, Response};
use steward_protocol::{JobRow, NewJob};

pub async fn run(ctx: &Context, command: CronCommandArgs) -> Result<ExitCode, ClientError> {
    let (command, json) = match command {
        CronCommandArgs::List { json } => (CronCommand::List, json),
        CronCommandArgs::Add {
            name,
            schedule,
            tz,
            text,
            action,
            urgency,
            missed,
        } => {
            let action = match action
                .as_deref()
                .map(serde_json::from_str::<ScheduledAction>)
            {
                None => None,
                Some(Ok(action)) => Some(action),
                Some(Err(e)) => {
                    eprintln!("steward: --action must be {{\"tool\": NAME, \"args\": {{…}}}}: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let urgency = match urgency.as_deref() {
                None => None,
                Some("parallel") => Some(Urgency::Parallel),
                Some("queue") => Some(Urgency::Queue),
                Some(other) => {
                    eprintln!("steward: --urgency {other:?}: a job is parallel or queue");
                    return Ok(ExitCode::from(2));
                }
            };
            let missed = match missed.as_deref().map(MissedPolicy::parse) {
                None => None,
                Some(Some(policy)) => Some(policy),
                Some(None) => {
                    eprintln!("steward: --missed is skip, once or all");
                    return Ok(ExitCode::from(2));
                }
            };
            let job = NewJob {
                name,
                schedule,
                tz,
                text,
                action,
                urgency,
                missed,
                max_lateness_secs: None,
            };
            (CronCommand::Add { job }, false)
        }
        CronCommandArgs::Remove { name } => (CronCommand::Remove { name }, false),
        CronCommandArgs::Pause { name } => (CronCommand::Pause { name }, false),
        CronCommandArgs::Resume { name } => (CronCommand::Resume { name }, false),
        CronCommandArgs::Trigger { name } => (CronCommand::Trigger { name }, false),
    };
    let mut jobs = Table::new(
        &[
            ("NAME", 0),
            ("SCHEDULE", 0),
            ("ZONE", 0),
            ("STATE", 0),
            ("NEXT", 0),
            ("LAST", 0),
        ],
        false,
    );
    let code = stream(ctx, Request::Cron { command }, |response| match response {
        Response::Job { job } if json => json_line(&job),
        Response::Job { job } => jobs.row(job_cells(&job)),
        Response::Accepted { event_id, .. } => out!("{event_id}"),
        _ => {}
    })
    .await?;
    jobs.finish();
    Ok(code)
}

/// A job as `cron list` shows it: its next run in the job's own zone, to the minute.
fn job_cells(job: &JobRow) -> Vec<String> {
    let state = match (job.enabled, job.paused) {
        (false, _) => "disabled",
        (true, true) => "paused",
        (true, false) => "active",
    };
    let next = job.next_run.map_or_else(
        || "-".to_owned(),
        |at| match job.tz.parse::<crate::zone::Zone>() {
            Ok(zone) => at
                .with_timezone(&zone)
                .format("%Y-%m-%d %H:%M %a")
                .to_string(),
            Err(_) => at.format("%Y-%m-%d %H:%M UTC").to_string(),
        },
    );
    vec![
        job.name.clone(),
        job.schedule.clone(),
        job.tz.clone(),
        state.to_owned(),
        next,
        job.last_outcome.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

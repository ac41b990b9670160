//! Changing jobs while the daemon runs — for `steward cron …` and the `cron_*` tools alike,
//! so both get the same checks:
//! - jobs made here are `runtime` jobs: they persist and are never touched by the config's
//!   reconciliation; a config job cannot be removed here (it would come back on the next
//!   start) but can be paused;
//! - resuming a paused job does not run what fell during the pause: it goes on from now;
//! - a manual trigger is an extra occurrence at the present instant, marked `manual`; it
//!   does not move the schedule.

use std::sync::Arc;

use chrono::{Timelike, Utc};
use steward_events::{EventId, Urgency};
use tokio::sync::Notify;

use super::config_jobs::{JobsSettled, NotSettled};
use super::job_store::JobStore;
use super::jobs::{Job, JobSpec};
use super::schedule::{parse_schedule, parse_zone};
use crate::store::StoreError;
use steward_protocol::{JobRow, NewJob, Origin};

impl From<&Job> for JobRow {
    fn from(job: &Job) -> Self {
        let next_run = match job.schedule() {
            Ok(schedule) if job.active() => schedule.next_after(job.cursor, job.zone()),
            _ => None,
        };
        Self {
            name: job.spec.name.clone(),
            schedule: job.spec.schedule.clone(),
            tz: job.spec.zone.clone(),
            text: job.spec.text.clone(),
            action: job.spec.action.clone(),
            urgency: job.spec.urgency,
            missed: job.spec.missed,
            origin: job.origin,
            enabled: job.spec.enabled,
            paused: job.paused,
            next_run,
            last_outcome: job.last_outcome.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("no job named {0:?}")]
    Unknown(String),
    #[error("a job named {0:?} exists already")]
    Exists(String),
    #[error("{0:?} is defined in the config file; remove it there (it can be paused here)")]
    FromConfig(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    NotSettled(#[from] NotSettled),
}

#[derive(Clone, Debug)]
pub struct Scheduler {
    pub jobs: JobStore,
    pub submitter: crate::channels::Submitter,
    /// Wakes the timer when jobs change.
    pub changed: Arc<Notify>,
    /// The zone of jobs that name none.
    pub default_zone: String,
    /// Whether the config's jobs are in the store yet: every method waits for it.
    pub settled: JobsSettled,
}

impl Scheduler {
    /// What the timer channel runs on: the same jobs, woken by the same bell.
    pub fn timer_jobs(&self) -> super::TimerJobs {
        super::TimerJobs {
            jobs: self.jobs.clone(),
            changed: self.changed.clone(),
            settled: self.settled.clone(),
        }
    }

    pub async fn list(&self) -> Result<Vec<JobRow>, SchedulerError> {
        self.settled.wait().await?;
        Ok(self.jobs.all()?.iter().map(JobRow::from).collect())
    }

    pub async fn add(&self, new: NewJob) -> Result<JobRow, SchedulerError> {
        self.settled.wait().await?;
        let now = Utc::now();
        if !steward_config::is_plain_name(&new.name) {
            return Err(SchedulerError::Invalid(format!(
                "{:?}: a job name is 1-64 letters, digits, '-' or '_'",
                new.name
            )));
        }
        if self.jobs.get(&new.name)?.is_some() {
            return Err(SchedulerError::Exists(new.name));
        }
        let zone = new.tz.unwrap_or_else(|| self.default_zone.clone());
        let tz = parse_zone(&zone).map_err(|e| SchedulerError::Invalid(e.to_string()))?;
        let schedule = parse_schedule(&new.schedule, now, tz)
            .map_err(|e| SchedulerError::Invalid(e.to_string()))?;
        let text = match (new.text, &new.action) {
            (Some(text), None) => text,
            (None, Some(action)) => super::jobs::action_text(&new.name, action),
            _ => {
                return Err(SchedulerError::Invalid(
                    "give exactly one of a text (for the brain) and an action (a tool call)".into(),
                ));
            }
        };
        let urgency = match new.urgency.unwrap_or(Urgency::Parallel) {
            Urgency::Cancel => {
                return Err(SchedulerError::Invalid(
                    "a job's urgency is parallel or queue".into(),
                ));
            }
            urgency => urgency,
        };
        // A relative `at +20m` is stored as the instant it means, so a restart keeps it;
        // to the second (rounded up: a job never runs before it was asked for).
        let schedule_text = match schedule {
            super::schedule::Schedule::At(at) => {
                let whole = at.with_nanosecond(0).unwrap_or(at);
                let at = if whole < at {
                    whole + chrono::Duration::seconds(1)
                } else {
                    whole
                };
                format!(
                    "at {}",
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            }
            _ => new.schedule,
        };
        let job = Job {
            spec: JobSpec {
                name: new.name,
                schedule: schedule_text,
                zone,
                text,
                action: new.action,
                urgency,
                missed: new.missed.unwrap_or_default(),
                max_lateness_secs: new
                    .max_lateness_secs
                    .unwrap_or(super::jobs::DEFAULT_MAX_LATENESS_SECS),
                enabled: true,
            },
            origin: Origin::Runtime,
            paused: false,
            created_at: now,
            cursor: now,
            last_outcome: None,
        };
        self.jobs.put(&job)?;
        self.changed.notify_one();
        Ok(JobRow::from(&job))
    }

    pub async fn remove(&self, name: &str) -> Result<(), SchedulerError> {
        self.settled.wait().await?;
        let job = self.get(name)?;
        if job.origin == Origin::Config {
            return Err(SchedulerError::FromConfig(name.to_owned()));
        }
        self.jobs.remove(name)?;
        self.changed.notify_one();
        Ok(())
    }

    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<JobRow, SchedulerError> {
        self.settled.wait().await?;
        let mut job = self.get(name)?;
        if job.paused && !paused {
            job.cursor = job.cursor.max(Utc::now());
        }
        job.paused = paused;
        self.jobs.put(&job)?;
        self.changed.notify_one();
        Ok(JobRow::from(&job))
    }

    /// Runs one occurrence now, marked manual.
    pub async fn trigger(&self, name: &str) -> Result<EventId, SchedulerError> {
        self.settled.wait().await?;
        let mut job = self.get(name)?;
        let now = Utc::now();
        let event = super::occurrence_event(&job, now, true);
        let submitted = self.submitter.submit(event).await?;
        job.last_outcome = Some(format!("ran by hand {now} (event {})", submitted.id));
        self.jobs.put(&job)?;
        Ok(submitted.id)
    }

    fn get(&self, name: &str) -> Result<Job, SchedulerError> {
        self.jobs
            .get(name)?
            .ok_or_else(|| SchedulerError::Unknown(name.to_owned()))
    }
}

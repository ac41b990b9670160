//! The timer channel: scheduled jobs become events, each occurrence exactly once.
//!
//! - An occurrence is identified by (job, scheduled instant). Its event carries the dedupe
//!   key `cron:JOB:INSTANT`, and the inbox writes an event and its key as one record (a crash
//!   between the two is repaired when the inbox opens), so the claim and the event are one
//!   write: a crash can neither lose an occurrence nor run it twice. The job's cursor (the
//!   last claimed instant) is saved after; when it is behind after a crash, the claim is
//!   found and the occurrence skipped.
//! - On start, occurrences that fell while the daemon was down go through the job's missed
//!   policy and lateness bound ([`schedule::catch_up`]); the ones that do not run are
//!   recorded as `missed` events. At most `MAX_CATCH_UP` per job are looked at; beyond
//!   that one more `missed` event says how many were skipped.
//! - `at` jobs made at run time are removed once their occurrence is claimed; the config
//!   file's stay, with nothing left to run (`save_or_retire`).
//! - Events: source `timer`, channel `cron:NAME`, payload `scheduled` with the instant, the
//!   job's urgency (default `parallel`); `action` jobs run their tool call through the
//!   pipeline without the model.
//!
//! Decided here: croner and the system's time zone database (`crate::zone`) compute the
//! schedule and the daemon runs its own loop (tokio-cron-scheduler keeps what is running
//! only in memory, which is how other daemons came to run jobs twice); a job's time zone
//! defaults to the system's.

pub mod config_jobs;
pub mod control;
pub mod cron;
pub mod file_jobs;
pub mod job_store;
pub mod jobs;
pub mod schedule;
pub mod tools;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use steward_events::{Event, EventState, Payload, Sender, Source, Trust};
use tokio::sync::Notify;
use tracing::{info, warn};

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};
use crate::store::StoreError;
use job_store::JobStore;
use jobs::Job;
use schedule::catch_up;

/// Occurrences looked at per job when catching up after a stop.
const MAX_CATCH_UP: usize = 1000;
/// The loop wakes at least this often (a changed clock, jobs changed by hand).
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the timer needs besides its context: the jobs and the bell rung when they change.
#[derive(Clone, Debug)]
pub struct TimerJobs {
    pub jobs: JobStore,
    /// Woken when jobs are added, changed or removed.
    pub changed: Arc<Notify>,
    /// The config's jobs are in the store (see [`config_jobs`]); the timer starts after.
    pub settled: config_jobs::JobsSettled,
}

/// Runs the timer channel until it is stopped (see the module docs).
pub async fn run(jobs: TimerJobs, cx: ChannelContext) {
    let timer = Timer { jobs, cx };
    timer.cx.keep_up(MAX_SLEEP, || timer.serve()).await;
}

struct Timer {
    jobs: TimerJobs,
    cx: ChannelContext,
}

/// Every active job's next occurrence, soonest first.
type Queue = BTreeSet<(DateTime<Utc>, String)>;

impl Timer {
    async fn serve(&self) -> Result<(), Down> {
        self.jobs
            .settled
            .wait()
            .await
            .map_err(|e| Down::Failed(e.to_string()))?;
        self.run_jobs()
            .await
            .map_err(|e| Down::Failed(format!("storage error: {e}")))
    }

    async fn run_jobs(&self) -> Result<(), StoreError> {
        let mut queue = self.catch_up(Utc::now()).await?;
        loop {
            let now = Utc::now();
            while let Some((at, name)) = queue.first().cloned() {
                if at > now {
                    break;
                }
                queue.pop_first();
                let Some(job) = self.jobs.jobs.get(&name)? else {
                    continue;
                };
                let active = job.active();
                if let Some(next) = self.fire(job, at).await?
                    && active
                {
                    queue.insert((next, name));
                }
            }
            let next = queue.first().map(|(at, _)| *at);
            self.cx.set_health(ChannelHealth::ready(match next {
                Some(at) => format!(
                    "running ({} active jobs, next {})",
                    queue.len(),
                    at.format("%Y-%m-%d %H:%M:%S UTC")
                ),
                None => "running (no active jobs)".to_owned(),
            }));
            let sleep = next
                .and_then(|at| (at - now).to_std().ok())
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP);
            tokio::select! {
                () = self.jobs.changed.notified() => queue = self.queue()?,
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// Every active job's next occurrence after its cursor, soonest first. Kept in memory
    /// and changed one job at a time, so thousands of idle jobs cost nothing between their
    /// occurrences; rebuilt when jobs are changed by hand.
    fn queue(&self) -> Result<Queue, StoreError> {
        let mut queue = Queue::new();
        for job in self.jobs.jobs.iter() {
            let job = job?;
            if let Some(next) = next_occurrence(&job) {
                queue.insert((next, job.spec.name));
            }
        }
        Ok(queue)
    }

    /// Handles what fell due while the daemon was down (see the module docs), and returns
    /// the queue ([`Self::queue`]) — in the same pass, so that each schedule is parsed once
    /// on start (parsing was most of the start-up work with thousands of jobs).
    async fn catch_up(&self, now: DateTime<Utc>) -> Result<Queue, StoreError> {
        let mut queue = Queue::new();
        for job in self.jobs.jobs.iter() {
            let mut job = job?;
            if !job.active() {
                continue;
            }
            let Ok(schedule) = job.schedule() else {
                warn!(job = %job.spec.name, schedule = %job.spec.schedule, "a stored job has a schedule that no longer parses; it is skipped");
                continue;
            };
            let zone = job.zone();
            let due = schedule.between(job.cursor, now, zone, MAX_CATCH_UP + 1);
            if due.is_empty() {
                if let Some(next) = schedule.next_after(job.cursor, zone) {
                    queue.insert((next, job.spec.name));
                }
                continue;
            }
            let beyond = due.len().saturating_sub(MAX_CATCH_UP);
            let due = due.get(..MAX_CATCH_UP).unwrap_or(&due);
            let plan = catch_up(
                due,
                now,
                job.spec.missed,
                Duration::from_secs(job.spec.max_lateness_secs),
            );
            info!(job = %job.spec.name, run = plan.run.len(), missed = plan.missed.len(), "catching up on occurrences missed while stopped");
            for at in &plan.missed {
                self.record_missed(&job, *at, "the daemon was not running; the job's missed-run policy or lateness bound skipped it")
                    .await?;
            }
            if beyond > 0 {
                self.record_missed(
                    &job,
                    now,
                    &format!("{beyond} more occurrences fell while the daemon was not running"),
                )
                .await?;
            }
            for at in &plan.run {
                job = self.claim(job, *at).await?;
            }
            // Everything due is handled now, run or recorded.
            if let Some(last) = due.last() {
                job.cursor = job.cursor.max(if beyond > 0 { now } else { *last });
            }
            if let Some(next) = self.save_or_retire(&job, &schedule)? {
                queue.insert((next, job.spec.name));
            }
        }
        Ok(queue)
    }

    /// Claims the occurrence; the job's next one, or `None` when it has nothing left.
    async fn fire(&self, job: Job, at: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, StoreError> {
        let Ok(schedule) = job.schedule() else {
            return Ok(None);
        };
        let job = self.claim(job, at).await?;
        self.save_or_retire(&job, &schedule)
    }

    /// Submits the occurrence's event unless it was claimed already, and moves the cursor.
    async fn claim(&self, mut job: Job, at: DateTime<Utc>) -> Result<Job, StoreError> {
        let key = occurrence_key(&job.spec.name, at);
        if self.cx.submitter().inbox().is_claimed(&key)? {
            info!(job = %job.spec.name, at = %at, "occurrence already claimed before a restart");
        } else {
            let mut event = occurrence_event(&job, at, false);
            event.dedupe_key = Some(key);
            let submitted = self.cx.submit(event).await?;
            info!(job = %job.spec.name, at = %at, event_id = %submitted.id, "scheduled job fired");
            job.last_outcome = Some(format!("ran {at} (event {})", submitted.id));
        }
        job.cursor = job.cursor.max(at);
        Ok(job)
    }

    async fn record_missed(
        &self,
        job: &Job,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<(), StoreError> {
        let key = occurrence_key(&job.spec.name, at);
        if self.cx.submitter().inbox().is_claimed(&key)? {
            return Ok(());
        }
        let mut event = occurrence_event(job, at, false);
        event.dedupe_key = Some(key);
        self.cx
            .record_terminal(
                event,
                EventState::Missed {
                    reason: reason.to_owned(),
                },
            )
            .await?;
        Ok(())
    }

    /// Saves the job and returns its next occurrence, or removes it when its schedule has
    /// nothing left (a past `at`) and it was made at run time. A config file's job stays,
    /// its cursor past its last occurrence: the file still names it, and removed it would
    /// come back on the next start as a new job.
    fn save_or_retire(
        &self,
        job: &Job,
        schedule: &schedule::Schedule,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let next = schedule.next_after(job.cursor, job.zone());
        if next.is_none() && job.origin == steward_protocol::Origin::Runtime {
            info!(job = %job.spec.name, "the job has no occurrence left; removed");
            self.jobs.jobs.remove(&job.spec.name)?;
        } else {
            self.jobs.jobs.put(job)?;
        }
        Ok(next)
    }
}

/// The next occurrence of an active job after its cursor.
fn next_occurrence(job: &Job) -> Option<DateTime<Utc>> {
    if !job.active() {
        return None;
    }
    job.schedule().ok()?.next_after(job.cursor, job.zone())
}

/// The dedupe key that claims an occurrence.
fn occurrence_key(job: &str, at: DateTime<Utc>) -> String {
    format!(
        "cron:{job}:{}",
        at.to_rfc3339_opts(SecondsFormat::Millis, true)
    )
}

/// The event of one occurrence.
pub fn occurrence_event(job: &Job, at: DateTime<Utc>, manual: bool) -> Event {
    let mut event = Event::new(
        Source::Timer,
        format!("cron:{}", job.spec.name),
        Sender {
            identity: format!("cron:{}", job.spec.name),
            authenticated_by: match job.origin {
                steward_protocol::Origin::Config => "config".into(),
                steward_protocol::Origin::Runtime => "runtime-job".into(),
            },
        },
        Trust::Owner,
        Payload::Scheduled {
            job: job.spec.name.clone(),
            scheduled: at,
            manual,
            text: job.spec.text.clone(),
            action: job.spec.action.clone(),
        },
    );
    event.occurred_at = at;
    // The job's urgency is its channel's default: a `cron:*` rule overrides it.
    event.channel_urgency = Some(job.spec.urgency);
    event
}

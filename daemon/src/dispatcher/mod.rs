//! The dispatcher: one task that owns the main trajectory. It reads durable pending events in
//! arrival order and routes each by urgency ([`route_event`], a pure function):
//!
//! - QUEUE: buffered while a step runs; at the next boundary all buffered events are merged
//!   as one batch, in arrival order, and a step starts.
//! - CANCEL: fires the running step's cancel token. When the step has stopped (read-only
//!   calls are aborted at once; a side effect in flight finishes and records its outcome),
//!   `step_cancelled` is recorded, then the cancelling event(s) are merged, then anything
//!   buffered before them, and a new step starts.
//! - PARALLEL: handed to a side lane ([`Lanes`]) — unless the event's own tool call is one
//!   a lane may not run; then it is QUEUE (see [`route_event`]). Its result comes back as a QUEUE event
//!   that is merged into the main trajectory as context for the next step, without a step
//!   (and a model call) of its own: the lane's answer already reached the owner through the
//!   owner outbox, so the main conversation only needs to know it.
//!
//! A step's merge and `step_started` are flushed before the step acts (alongside its first
//! model call, see [`MergeFlush`]). A step that was
//! running when the daemon stopped (crash or shutdown) is recorded as `step_cancelled`
//! ("interrupted") on the next start and then run again for the same events, so no message
//! to the owner is silently left unanswered. A step put off for the model or the budget
//! (`step_cancelled` with `runs_again`) is, on the next start, the deferred step again, due
//! at once: the owner was told its events "will be answered", and a restart in between must
//! not break that.
//!
//! While a step is put off, the events that arrive for the main trajectory are merged into
//! it as they come and join the step, instead of waiting in the inbox until its
//! next try (2 s … 60 s away): pending events hold inbox room, and with the model
//! unreachable a burst filled the inbox's 10,000 places between two tries and made webhook
//! senders wait seconds for their 202 (measured 2026-12-04: 1,675 deliveries/s at c=64
//! against 8,900 without a model). Events merged but not yet in a started step are found
//! on the next start (see `Trajectory::unfinished_step`) and join the step that runs then.

mod context;
mod lane;
mod models;
mod step;

use std::sync::Arc;

use steward_events::{
    Event, EventId, ItemKind, LaneFit, Route, Source, TrajectoryItem, route_event,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use context::TokenEstimator;
pub use lane::Lanes;
pub use models::{Model, Models};
pub use step::{MergeFlush, StepReport, StepRunner};

use crate::notify::Heartbeat;
use crate::replies::{Announcement, ReplyHub};
use crate::status::StatusBoard;
use crate::store::{EventRecord, Inbox, StoreError, Trajectory, UnfinishedStep};
use steward_events::StepEnd;

#[derive(Debug)]
pub struct Dispatcher {
    pub inbox: Arc<Inbox>,
    pub trajectory: Arc<Trajectory>,
    pub steps: Arc<StepRunner>,
    pub lanes: Lanes,
    pub status: Arc<StatusBoard>,
    pub replies: ReplyHub,
}

/// What the dispatcher holds between loop turns.
#[derive(Debug, Default)]
struct Boundary {
    /// The last arrival seq read from the inbox.
    cursor: u64,
    next_step: u64,
    /// QUEUE (and idle-time CANCEL) events waiting for the next step boundary.
    buffered: Vec<EventRecord>,
    /// CANCEL events that stopped (or are stopping) the running step.
    cancels: Vec<EventRecord>,
    running: Option<RunningStep>,
    deferred: Option<DeferredStep>,
    /// Lane results merged without a step: the next step's context view gets them.
    context: Vec<TrajectoryItem>,
}

#[derive(Debug)]
struct RunningStep {
    step: u64,
    events: Vec<Event>,
    cancel: CancellationToken,
}

/// A step the model could not answer, waiting to run again.
#[derive(Debug)]
struct DeferredStep {
    events: Vec<Event>,
    failures: u32,
    due: tokio::time::Instant,
    /// Waiting for the daily budget rather than for the model.
    over_budget: bool,
}

/// A step with at least this many events (a backlog after an outage) gives back what it
/// freed when it ends.
const LARGE_STEP_EVENTS: usize = 1000;

/// How many pending events the dispatcher reads and routes before it gives its runtime
/// worker back to the other tasks (a merge yields between its writes the same way, see
/// `store::trajectory`): reading and merging all that waited in one go held one of the two
/// workers for tens of milliseconds, and webhook deliveries queued behind it. As many as
/// one write of a merge holds (16), so that a turn's merge is one write: 16 rather than 64
/// (measured 2026-12-05, model unreachable, c=64) took the deliveries' p99 from 11.9-13.6
/// to 10.2-11.2 ms for a few per cent of their rate (see BENCHMARKS.md).
const EVENTS_PER_TURN: usize = crate::store::EVENTS_PER_WRITE;

/// How often a step waiting for the budget looks again (no model call is made to look).
const BUDGET_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl Dispatcher {
    pub async fn run(
        self,
        mut heartbeat: Heartbeat,
        shutdown: CancellationToken,
    ) -> Result<(), StoreError> {
        let mut at = Boundary {
            next_step: self.trajectory.last_step_on_open() + 1,
            ..Boundary::default()
        };
        let mut task: Option<JoinHandle<StepReport>> = None;
        match self.trajectory.unfinished_step()? {
            Some(UnfinishedStep::Interrupted(events)) => {
                task = Some(self.resume(&mut at, events).await?);
            }
            Some(UnfinishedStep::PutOff(ids)) => {
                // Lane results merged as context alone are not waiting for a step.
                let mut events = self.events_of(ids)?;
                events.retain(|event| !is_context_only(event));
                if !events.is_empty() {
                    info!(
                        events = events.len(),
                        "a step put off before the stop runs again now"
                    );
                    at.deferred = Some(DeferredStep {
                        events,
                        failures: 0,
                        due: tokio::time::Instant::now(),
                        over_budget: false,
                    });
                }
            }
            None => {}
        }
        let mut durable = self.inbox.durable_arrivals();
        loop {
            let more_waiting = self.take_in(&mut at)?;
            // All that waits is read before a step starts, so that it starts with all of it.
            if task.is_none() && !more_waiting {
                task = self.start_step(&mut at).await?;
                if task.is_some() {
                    // A test hook: `STEWARD_FAILPOINTS=dispatcher.step:hang` wedges the
                    // loop here, and the watchdog pings must stop.
                    crate::faults::point("dispatcher.step");
                }
            }
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                report = async { task.as_mut().expect("guarded by the precondition").await }, if task.is_some() => {
                    task = None;
                    let report = report.unwrap_or_else(|e| StepReport {
                        end: StepEnd::Failed { error: format!("the step crashed: {e}") },
                        last_message: None,
                    });
                    let events = at.running.as_ref().map_or(0, |running| running.events.len());
                    self.finish_step(&mut at, report).await?;
                    if events >= LARGE_STEP_EVENTS {
                        // The step's view, prompt and copies of thousands of events were a
                        // burst; what it freed goes back to the system (see `crate::allocator`).
                        crate::allocator::release_freed_memory();
                    }
                }
                changed = durable.changed() => if changed.is_err() { break },
                () = sleep_until_due(&at.deferred), if task.is_none() && at.deferred.is_some() => {}
                () = heartbeat.tick(|| self.status.summary()) => {}
                // Others' turn first, then the rest of what waits (see [`EVENTS_PER_TURN`]).
                () = tokio::task::yield_now(), if more_waiting => {}
            }
        }
        if let (Some(running), Some(task)) = (at.running.take(), task) {
            // Not recorded as ended: the next start resumes it (see the module docs).
            info!(
                step = running.step,
                "stopping the running step for shutdown"
            );
            running.cancel.cancel();
            let _ = task.await;
        }
        self.lanes.shutdown().await;
        self.inbox.store().flush().await
    }

    /// Reads up to [`EVENTS_PER_TURN`] newly durable pending events and routes them;
    /// `true` when more may wait.
    fn take_in(&self, at: &mut Boundary) -> Result<bool, StoreError> {
        let batch = self.inbox.read_pending(at.cursor, EVENTS_PER_TURN)?;
        let more_waiting = batch.len() == EVENTS_PER_TURN;
        for record in batch {
            at.cursor = record.arrival;
            let lane = self.lane_fit(&record.event);
            match route_event(record.event.urgency, at.running.is_some(), lane) {
                Route::StartStep | Route::Buffer => at.buffered.push(record),
                Route::CancelStep => {
                    if let Some(running) = &at.running {
                        info!(event_id = %record.event.id, step = running.step, "cancelling the running step");
                        running.cancel.cancel();
                    }
                    at.cancels.push(record);
                }
                Route::SpawnLane => self.lanes.spawn(record),
            }
        }
        Ok(more_waiting)
    }

    /// Whether a side lane may run the event's own tool call (see [`route_event`]).
    fn lane_fit(&self, event: &Event) -> LaneFit {
        match event.payload.direct_call() {
            Some((tool, _)) if !self.steps.pipeline.registry().allowed_in_lane(tool) => {
                if event.urgency == steward_events::Urgency::Parallel {
                    info!(event_id = %event.id, tool, "a side lane may not run this event's call: it runs in the main trajectory");
                }
                LaneFit::NeedsMainTrajectory
            }
            _ => LaneFit::Fits,
        }
    }

    /// At a boundary: merges what waits (cancels first, then buffered) and starts a step.
    async fn start_step(
        &self,
        at: &mut Boundary,
    ) -> Result<Option<JoinHandle<StepReport>>, StoreError> {
        // A deferred step goes first, when its time has come; new events join it.
        if let Some(deferred) = &mut at.deferred
            && deferred.over_budget
            && deferred.due <= tokio::time::Instant::now()
            && self.steps.ledger.waiting().is_some()
        {
            // Still over budget: look again later, without a step (see `wait_for_budget`).
            deferred.due = tokio::time::Instant::now() + BUDGET_LOOK_EVERY;
        }
        if at
            .deferred
            .as_ref()
            .is_some_and(|d| d.due > tokio::time::Instant::now())
        {
            self.join_deferred(at).await?;
            return Ok(None);
        }
        // Taken, not copied (thousands may have joined it): the retry owns them while it
        // runs, and `defer` gives them back if the model fails again.
        let retry = at
            .deferred
            .as_mut()
            .map(|deferred| std::mem::take(&mut deferred.events))
            .unwrap_or_default();
        if retry.is_empty() && at.cancels.is_empty() && at.buffered.is_empty() {
            return Ok(None);
        }
        let records: Vec<EventRecord> = at.cancels.drain(..).chain(at.buffered.drain(..)).collect();
        let step = at.next_step;
        if retry.is_empty() && records.iter().all(|r| is_context_only(&r.event)) {
            // Only lane results: context for the next step, not a step (see the module docs).
            at.next_step += 1;
            let merged = self
                .trajectory
                .merge_events(&self.inbox, step, records)
                .await?;
            at.context.extend(merged);
            self.inbox.store().flush().await?;
            return Ok(None);
        }
        let mut events = retry;
        events.extend(records.iter().map(|r| r.event.clone()));
        let mut items = std::mem::take(&mut at.context);
        items.extend(
            self.trajectory
                .merge_events(&self.inbox, step, records)
                .await?,
        );
        self.launch(at, events, items).await.map(Some)
    }

    /// While a step waits to run again, what arrives joins it at once (see the module docs):
    /// merged now, answered with it, so the inbox keeps its room for new arrivals however
    /// long the model or the budget keeps the step waiting. CANCEL events stay buffered: they
    /// act when the step runs.
    async fn join_deferred(&self, at: &mut Boundary) -> Result<(), StoreError> {
        let Some(deferred) = &mut at.deferred else {
            return Ok(());
        };
        if at.buffered.is_empty() {
            return Ok(());
        }
        let records: Vec<EventRecord> = at.buffered.drain(..).collect();
        deferred.events.extend(
            records
                .iter()
                .filter(|r| !is_context_only(&r.event))
                .map(|r| r.event.clone()),
        );
        let merged = self
            .trajectory
            .merge_events(&self.inbox, at.next_step, records)
            .await?;
        at.context.extend(merged);
        Ok(())
    }

    /// Re-runs a step the daemon stopped in the middle of.
    async fn resume(
        &self,
        at: &mut Boundary,
        ids: Vec<EventId>,
    ) -> Result<JoinHandle<StepReport>, StoreError> {
        warn!(
            events = ids.len(),
            "the last step was interrupted by a stop; running it again"
        );
        self.trajectory.append(
            at.next_step - 1,
            ItemKind::StepCancelled {
                by: None,
                reason: "interrupted: the daemon stopped during this step".into(),
                runs_again: false,
            },
        )?;
        let events = self.events_of(ids)?;
        self.launch(at, events, Vec::new()).await
    }

    /// The events of an unfinished step, read back from the inbox.
    fn events_of(&self, ids: Vec<EventId>) -> Result<Vec<Event>, StoreError> {
        let records = self.inbox.get_many(&ids)?;
        if records.len() < ids.len() {
            warn!(
                missing = ids.len() - records.len(),
                "events of an unfinished step are missing"
            );
        }
        Ok(records.into_iter().map(|record| record.event).collect())
    }

    async fn launch(
        &self,
        at: &mut Boundary,
        events: Vec<Event>,
        mut items: Vec<TrajectoryItem>,
    ) -> Result<JoinHandle<StepReport>, StoreError> {
        let step = at.next_step;
        at.next_step += 1;
        let ids: Vec<EventId> = events.iter().map(|e| e.id).collect();
        let started = self.trajectory.append(
            step,
            ItemKind::StepStarted {
                events: ids.clone(),
            },
        )?;
        self.status.step_started(step, started.at);
        items.push(started);
        let flush = MergeFlush::start(self.inbox.store().clone());

        let cancel = CancellationToken::new();
        at.running = Some(RunningStep {
            step,
            events: events.clone(),
            cancel: cancel.clone(),
        });
        let steps = self.steps.clone();
        let trajectory = self.trajectory.clone();
        Ok(tokio::spawn(async move {
            steps
                .run(&trajectory, step, &events, items, flush, cancel)
                .await
        }))
    }

    async fn finish_step(&self, at: &mut Boundary, report: StepReport) -> Result<(), StoreError> {
        let Some(running) = at.running.take() else {
            return Ok(());
        };
        let ids: Vec<EventId> = running.events.iter().map(|e| e.id).collect();
        let outcome = match report.end {
            StepEnd::Cancelled { .. } => {
                let by = at.cancels.first().map(|r| r.event.id);
                let reason = match by {
                    Some(id) => format!("cancelled by event {id}"),
                    None => "cancelled".to_owned(),
                };
                self.trajectory.append(
                    running.step,
                    ItemKind::StepCancelled {
                        by,
                        reason: reason.clone(),
                        runs_again: false,
                    },
                )?;
                StepEnd::Cancelled { reason }
            }
            StepEnd::Deferred { error } => {
                return self.defer(at, running, error).await;
            }
            StepEnd::OverBudget { reason } => {
                return self.wait_for_budget(at, running, reason).await;
            }
            end => {
                if end == StepEnd::Completed {
                    self.status.brain_ok();
                }
                self.trajectory
                    .append(running.step, ItemKind::StepCompleted)?;
                end
            }
        };
        at.deferred = None;
        self.status.step_ended();
        self.inbox.store().flush().await?;
        self.replies.announce(Announcement::StepEnded {
            events: ids,
            outcome,
        });
        Ok(())
    }

    /// The model could not answer: the step is recorded as cancelled and runs again later
    /// for the same events (2 s, 4 s … at most a minute apart). The owner is told once, when
    /// the model stops answering; whoever waits for a reply keeps waiting for the real one.
    async fn defer(
        &self,
        at: &mut Boundary,
        running: RunningStep,
        error: String,
    ) -> Result<(), StoreError> {
        self.trajectory.append(
            running.step,
            ItemKind::StepCancelled {
                by: None,
                reason: format!("the model is unavailable ({error}); the step will run again"),
                runs_again: true,
            },
        )?;
        let failures = at.deferred.as_ref().map_or(0, |d| d.failures) + 1;
        let wait = std::time::Duration::from_secs((1u64 << failures.min(6)).min(60));
        warn!(step = running.step, failures, wait_secs = wait.as_secs(), error = %error, "deferring the step");
        if self.status.brain_degraded(&error) {
            // The deferred step's own events, and what arrived and waits behind them.
            let waiting = running.events.len() as u64 + self.inbox.pending_count();
            let message = crate::owner::outbox::NewMessage {
                text: format!(
                    "The model is unavailable ({error}); {waiting} {} answered when it is back.",
                    if waiting == 1 {
                        "event waits and will be"
                    } else {
                        "events wait and will be"
                    }
                ),
                origin: running.events.first().map(|e| e.id),
                ..Default::default()
            };
            self.steps
                .outbox
                .queue(crate::owner::outbox::MessageKind::Problem, message)
                .await?;
        }
        at.deferred = Some(DeferredStep {
            events: running.events,
            failures,
            due: tokio::time::Instant::now() + wait,
            over_budget: false,
        });
        self.status.step_ended();
        self.inbox.store().flush().await
    }
}

impl Dispatcher {
    /// The daily budget is used up: the step is recorded as cancelled and runs again for
    /// the same events once the budget allows (a cap raised by a reload, or the next day);
    /// meanwhile the dispatcher looks every few seconds without running a step, and new
    /// events wait behind it. The owner is told once a day.
    async fn wait_for_budget(
        &self,
        at: &mut Boundary,
        running: RunningStep,
        reason: String,
    ) -> Result<(), StoreError> {
        self.trajectory.append(
            running.step,
            ItemKind::StepCancelled {
                by: None,
                reason: format!("{reason}; the step will run again when the budget allows"),
                runs_again: true,
            },
        )?;
        warn!(step = running.step, %reason, "model work waits for the budget");
        let waiting = running.events.len() as u64 + self.inbox.pending_count();
        tell_budget_reached(&self.steps, &reason, waiting, running.events.first()).await?;
        at.deferred = Some(DeferredStep {
            events: running.events,
            failures: 0,
            due: tokio::time::Instant::now() + BUDGET_LOOK_EVERY,
            over_budget: true,
        });
        self.status.step_ended();
        self.inbox.store().flush().await
    }
}

/// Tells the owner, once a day, that model work waits for the budget.
pub(crate) async fn tell_budget_reached(
    steps: &StepRunner,
    reason: &str,
    waiting: u64,
    origin: Option<&Event>,
) -> Result<(), StoreError> {
    if !steps.ledger.tell_once_today() {
        return Ok(());
    }
    let message = crate::owner::outbox::NewMessage {
        text: format!(
            "Model work is paused: {reason}. {waiting} {} wait and run when the budget allows: raise the cap in the config and reload (SIGHUP), or wait for the next day. Slash commands still work.",
            if waiting == 1 { "event" } else { "events" }
        ),
        origin: origin.map(|e| e.id),
        ..Default::default()
    };
    steps
        .outbox
        .queue(crate::owner::outbox::MessageKind::Problem, message)
        .await?;
    Ok(())
}

/// A lane's result nobody asked for: context for the next step, not a step of its own (a
/// sub-agent's result was asked for, and starts one).
fn is_context_only(event: &Event) -> bool {
    event.source == Source::Lane
        && !matches!(
            event.payload,
            steward_events::Payload::LaneResult {
                requested: true,
                ..
            }
        )
}

async fn sleep_until_due(deferred: &Option<DeferredStep>) {
    match deferred {
        Some(d) => tokio::time::sleep_until(d.due).await,
        None => std::future::pending().await,
    }
}

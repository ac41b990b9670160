//! Side lanes: PARALLEL events run here, each in its own short trajectory
//! (`lane:<event id>`), with only lane-allowed tools, at most `lanes.max_parallel` at once.
//! When a lane ends, its summary goes back to the inbox as a QUEUE event from source `lane`
//! (dedupe key `lane-result:<id>`, trust inherited from the origin), and only then is the
//! origin marked `merged` into its lane. A lane interrupted by shutdown or a crash leaves its
//! origin pending, so it runs again on the next start; a re-run's summary is then recorded
//! as a duplicate rather than merged twice. A lane whose turn meets the daily budget
//! records `step_cancelled` in its trajectory, keeps its origin pending and runs again once
//! the budget allows (the owner is told once a day).

use std::sync::Arc;

use steward_events::{Event, EventState, ItemKind, Payload, Source, Urgency};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use super::step::{MergeFlush, StepRunner};
use crate::replies::{Announcement, ReplyHub};
use crate::status::StatusBoard;
use crate::store::{EventRecord, Inbox, StoreError, Trajectory, event_item};
use steward_events::StepEnd;

#[derive(Clone, Debug)]
pub struct Lanes(Arc<LaneShared>);

#[derive(Debug)]
struct LaneShared {
    inbox: Arc<Inbox>,
    steps: Arc<StepRunner>,
    status: Arc<StatusBoard>,
    replies: ReplyHub,
    slots: Semaphore,
    tracker: TaskTracker,
    cancel: CancellationToken,
    agents: crate::agents::SubAgents,
}

#[derive(Debug, thiserror::Error)]
enum LaneError {
    #[error("interrupted by shutdown")]
    Interrupted,
    #[error("waiting for the budget: {0}")]
    OverBudget(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Lanes {
    pub fn new(
        inbox: Arc<Inbox>,
        steps: Arc<StepRunner>,
        status: Arc<StatusBoard>,
        replies: ReplyHub,
        max_parallel: usize,
        agents: crate::agents::SubAgents,
    ) -> Self {
        Self(Arc::new(LaneShared {
            inbox,
            steps,
            status,
            replies,
            slots: Semaphore::new(max_parallel),
            tracker: TaskTracker::new(),
            cancel: CancellationToken::new(),
            agents,
        }))
    }

    pub fn spawn(&self, record: EventRecord) {
        let lanes = self.clone();
        self.0.tracker.spawn(async move { lanes.run(record).await });
    }

    /// Cancels running lanes and waits for them (lanes with side effects in flight finish
    /// them first); their origins stay pending for the next start.
    pub async fn shutdown(&self) {
        self.0.cancel.cancel();
        self.0.tracker.close();
        self.0.tracker.wait().await;
    }

    async fn run(&self, record: EventRecord) {
        let lane = &self.0;
        let _slot = tokio::select! {
            slot = lane.slots.acquire() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
            () = lane.cancel.cancelled() => return,
        };
        lane.status.lanes_changed(1);
        let id = record.event.id;
        let mut ran = self.run_lane(&record).await;
        while let Err(LaneError::OverBudget(reason)) = &ran {
            // The origin stays pending; the lane runs again once the budget allows.
            let told =
                super::tell_budget_reached(&lane.steps, reason, 1, Some(&record.event)).await;
            if let Err(e) = told {
                warn!(event_id = %id, error = %e, "could not tell the owner the budget is reached");
            }
            if !self.budget_allows().await {
                ran = Err(LaneError::Interrupted);
                break;
            }
            ran = self.run_lane(&record).await;
        }
        match ran {
            // (Over budget is waited out above; either way the origin stays pending.)
            Ok(()) | Err(LaneError::Interrupted | LaneError::OverBudget(_)) => {}
            Err(LaneError::Store(e)) => {
                warn!(event_id = %id, error = %e, "side lane failed; marking its event dead");
                if let Err(e) = lane.inbox.finish(
                    record,
                    EventState::Dead {
                        error: e.to_string(),
                    },
                ) {
                    warn!(event_id = %id, error = %e, "could not record the dead lane event");
                }
                lane.replies.announce(Announcement::StepEnded {
                    events: vec![id],
                    outcome: StepEnd::Failed {
                        error: e.to_string(),
                    },
                });
            }
        }
        lane.status.lanes_changed(-1);
    }

    async fn run_lane(&self, record: &EventRecord) -> Result<(), LaneError> {
        let lane = &self.0;
        let origin = &record.event;
        let trajectory = Trajectory::lane(lane.inbox.store(), origin.id)?;
        let step = trajectory.last_step_on_open() + 1;
        let event = trajectory.append(step, event_item(record))?;
        let started = trajectory.append(
            step,
            ItemKind::StepStarted {
                events: vec![origin.id],
            },
        )?;
        info!(event_id = %origin.id, lane = %trajectory.id(), "side lane started");
        let task = origin.payload.sub_agent();
        let cancel = match task {
            Some(task) => lane.agents.started(origin.id, task, &lane.cancel),
            None => lane.cancel.child_token(),
        };
        let report = lane
            .steps
            .run(
                &trajectory,
                step,
                std::slice::from_ref(origin),
                vec![event.clone(), started],
                // The lane's origin stays pending until the lane is done: a crash replays it.
                MergeFlush::default(),
                cancel,
            )
            .await;
        if lane.cancel.is_cancelled() && matches!(report.end, StepEnd::Cancelled { .. }) {
            return Err(LaneError::Interrupted);
        }
        if let StepEnd::OverBudget { reason } = report.end {
            trajectory.append(
                step,
                ItemKind::StepCancelled {
                    by: None,
                    reason: format!("{reason}; the lane will run again when the budget allows"),
                    runs_again: true,
                },
            )?;
            return Err(LaneError::OverBudget(reason));
        }
        trajectory.append(step, ItemKind::StepCompleted)?;
        let ended = task.map(|task| (task, lane.agents.finished(origin.id)));
        let summary = match (&report.end, ended) {
            (_, Some((task, crate::agents::AgentState::TimedOut))) => format!(
                "The sub-agent stopped: its {} s were up. {}",
                task.timeout_secs,
                report.last_message.clone().unwrap_or_default()
            ),
            (_, Some((_, crate::agents::AgentState::Cancelled))) => {
                "The sub-agent was cancelled.".to_owned()
            }
            (end, _) => lane_summary(end, &report),
        };
        self.submit_result(origin, &trajectory, summary).await?;
        lane.inbox.finish(
            record.clone(),
            EventState::Merged {
                trajectory: trajectory.id().clone(),
                seq: event.seq,
            },
        )?;
        lane.inbox.store().flush().await?;
        lane.replies.announce(Announcement::StepEnded {
            events: vec![origin.id],
            outcome: report.end,
        });
        Ok(())
    }

    /// Waits until the daily budget allows model work again; `false` on shutdown.
    async fn budget_allows(&self) -> bool {
        let lane = &self.0;
        while lane.steps.ledger.waiting().is_some() {
            tokio::select! {
                () = tokio::time::sleep(super::BUDGET_LOOK_EVERY) => {}
                () = lane.cancel.cancelled() => return false,
            }
        }
        true
    }

    async fn submit_result(
        &self,
        origin: &Event,
        trajectory: &Trajectory,
        summary: String,
    ) -> Result<(), LaneError> {
        let lane = &self.0;
        let mut result = Event::new(
            Source::Lane,
            trajectory.id().as_str(),
            origin.sender.clone(),
            origin.trust,
            Payload::LaneResult {
                origin: origin.id,
                summary,
                requested: origin.payload.sub_agent().is_some(),
            },
        );
        result.thread = origin.thread.clone();
        result.dedupe_key = Some(format!("lane-result:{}", origin.id));
        result.urgency = Urgency::Queue;
        tokio::select! {
            submitted = lane.inbox.submit(result) => { submitted?; Ok(()) }
            () = lane.cancel.cancelled() => Err(LaneError::Interrupted),
        }
    }
}

/// What a lane that ran to its end concluded.
fn lane_summary(end: &StepEnd, report: &super::StepReport) -> String {
    match end {
        StepEnd::Failed { error } => format!("The side lane failed: {error}"),
        StepEnd::Deferred { error } => {
            format!("The side lane could not reach the model ({error}).")
        }
        _ => report
            .last_message
            .clone()
            .unwrap_or_else(|| "(the side lane finished without a message)".to_owned()),
    }
}

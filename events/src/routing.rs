//! Step routing: what the dispatcher does with an event of a given urgency, depending on
//! whether a step is in flight. Kept pure so the dispatcher's arms stay one call each.
//!
//! A PARALLEL event whose own tool call (a job's `action`, named by the owner) is one a
//! side lane may not run is not parallel work: it goes to the main trajectory as if it
//! were QUEUE, where its call runs (or asks the owner) as the owner configured it, rather
//! than being refused by the lane's tool set.

use crate::urgency::Urgency;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// No step is running: merge now (with anything buffered) and start a step.
    StartStep,
    /// A step is running: hold until its boundary, then merge in arrival order.
    Buffer,
    /// A step is running: fire its cancel token; once it has stopped, record
    /// `step_cancelled`, merge this event and start a new step.
    CancelStep,
    /// Run in a side lane; the summary comes back later as a QUEUE event.
    SpawnLane,
}

/// Whether a side lane can do what an event asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneFit {
    Fits,
    /// The event's own tool call is not allowed in a side lane.
    NeedsMainTrajectory,
}

pub fn route_event(urgency: Urgency, step_running: bool, lane: LaneFit) -> Route {
    let urgency = match (urgency, lane) {
        (Urgency::Parallel, LaneFit::NeedsMainTrajectory) => Urgency::Queue,
        (urgency, _) => urgency,
    };
    match (urgency, step_running) {
        (Urgency::Parallel, _) => Route::SpawnLane,
        (Urgency::Cancel, true) => Route::CancelStep,
        (Urgency::Queue, true) => Route::Buffer,
        (Urgency::Cancel | Urgency::Queue, false) => Route::StartStep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_table() {
        use LaneFit::{Fits, NeedsMainTrajectory as Main};
        let table = [
            (Urgency::Queue, false, Fits, Route::StartStep),
            (Urgency::Queue, true, Fits, Route::Buffer),
            (Urgency::Cancel, false, Fits, Route::StartStep),
            (Urgency::Cancel, true, Fits, Route::CancelStep),
            (Urgency::Parallel, false, Fits, Route::SpawnLane),
            (Urgency::Parallel, true, Fits, Route::SpawnLane),
            (Urgency::Parallel, false, Main, Route::StartStep),
            (Urgency::Parallel, true, Main, Route::Buffer),
            (Urgency::Queue, true, Main, Route::Buffer),
            (Urgency::Cancel, true, Main, Route::CancelStep),
        ];
        for (urgency, running, lane, expected) in table {
            assert_eq!(
                route_event(urgency, running, lane),
                expected,
                "{urgency:?} running={running} {lane:?}"
            );
        }
    }
}

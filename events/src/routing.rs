//! Step routing: what the dispatcher does with an event of a given urgency, depending on
//! whether a step is in flight. Kept pure so the dispatcher's arms stay one call each.

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

pub fn route_event(urgency: Urgency, step_running: bool) -> Route {
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
        let table = [
            (Urgency::Queue, false, Route::StartStep),
            (Urgency::Queue, true, Route::Buffer),
            (Urgency::Cancel, false, Route::StartStep),
            (Urgency::Cancel, true, Route::CancelStep),
            (Urgency::Parallel, false, Route::SpawnLane),
            (Urgency::Parallel, true, Route::SpawnLane),
        ];
        for (urgency, running, expected) in table {
            assert_eq!(
                route_event(urgency, running),
                expected,
                "{urgency:?} running={running}"
            );
        }
    }
}

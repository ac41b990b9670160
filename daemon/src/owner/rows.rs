//! The owner's rows of the daemon's own records: an inbox record as an [`EventRow`], a
//! pending action as a [`PendingRow`] (the wire types are `steward-protocol`'s).

use steward_events::EventState;
use steward_protocol::{EventRow, PendingRow};
use steward_tools::confirm::PendingAction;

use crate::store::EventRecord;

/// An inbox record as `steward events` shows it.
impl From<&EventRecord> for EventRow {
    fn from(record: &EventRecord) -> Self {
        let e = &record.event;
        let (trajectory, trajectory_seq, detail) = match &record.state {
            EventState::Merged { trajectory, seq } => {
                (Some(trajectory.to_string()), Some(*seq), None)
            }
            EventState::Duplicate { of } => (None, None, Some(format!("duplicate of {of}"))),
            EventState::Rejected { reason }
            | EventState::Missed { reason }
            | EventState::Handled { outcome: reason } => (None, None, Some(reason.clone())),
            EventState::Dead { error } => (None, None, Some(error.clone())),
            EventState::Pending => (None, None, None),
        };
        EventRow {
            id: e.id,
            source: e.source,
            channel: e.channel.clone(),
            urgency: e.urgency,
            state: record.state.name().to_owned(),
            received_at: e.received_at,
            occurred_at: e.occurred_at,
            trajectory,
            trajectory_seq,
            detail,
            text: e.payload.text().to_owned(),
            sender: e.sender.identity.clone(),
            trust: e.trust,
        }
    }
}

/// A pending action as the owner sees it.
pub fn pending_row(a: &PendingAction) -> PendingRow {
    PendingRow {
        id: a.id.clone(),
        tool: a.tool.clone(),
        args: a.args.clone(),
        preview: a.preview.clone(),
        reason: a.reason.clone(),
        origin_event: a.origin_event,
        requested_at: a.requested_at,
        expires_at: a.expires_at,
        state: serde_json::to_value(a.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        state_reason: a.state_reason.clone(),
        result: a.result.clone(),
    }
}

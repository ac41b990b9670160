//! The one way a channel's input gets into the inbox. [`Submitter`] decides the event's
//! urgency with the configured `[[urgency.rules]]` (the pure classifier of
//! `steward_events::urgency`), then hands the event to the inbox. Every channel — the socket,
//! the HTTP API, email, webhooks, the timer, file watches — submits through it, so a rule
//! for any channel (`cron:*`, `watch:*`, `webhook:*`) takes effect, and a channel's own
//! configured urgency is only a default that rules override.

use std::sync::Arc;

use steward_events::{Event, EventState, UrgencyRule, classify_urgency};

use tracing::info;

use crate::store::{Inbox, StoreError, Submitted};

#[derive(Clone, Debug)]
pub struct Submitter {
    inbox: Arc<Inbox>,
    rules: Arc<Vec<UrgencyRule>>,
}

impl Submitter {
    pub fn new(inbox: Arc<Inbox>, rules: Vec<UrgencyRule>) -> Self {
        Self {
            inbox,
            rules: Arc::new(rules),
        }
    }

    /// The inbox, for what channels read of it (claims, listings, changes).
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    fn classified(&self, mut event: Event) -> Event {
        event.urgency = classify_urgency(&event, &self.rules);
        event
    }

    /// Classifies and stores `event` for processing (see [`Inbox::submit`]).
    pub async fn submit(&self, event: Event) -> Result<Submitted, StoreError> {
        let event = self.classified(event);
        let (channel, urgency) = (event.channel.clone(), event.urgency);
        let submitted = self.inbox.submit(event).await?;
        info!(event_id = %submitted.id, %channel, urgency = urgency.as_str(), duplicate_of = ?submitted.duplicate_of, "event stored");
        Ok(submitted)
    }

    /// Classifies and records `event` as `rejected` (see [`Inbox::reject`]).
    pub async fn reject(&self, event: Event, reason: String) -> Result<Submitted, StoreError> {
        self.inbox.reject(self.classified(event), reason).await
    }

    /// Classifies and records `event` straight into `state` (see [`Inbox::record_terminal`]).
    pub async fn record_terminal(
        &self,
        event: Event,
        state: EventState,
    ) -> Result<Submitted, StoreError> {
        self.inbox
            .record_terminal(self.classified(event), state)
            .await
    }
}

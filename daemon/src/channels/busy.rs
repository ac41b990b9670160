//! Which chats have a message in work, for the chat channels' typing notices (Matrix rooms,
//! Telegram chats): a chat is busy from the moment one of its messages is durable until
//! the step that merged it ends, however it ends. A message is given up on after
//! [`GIVE_UP`] (the model may be down for hours): a notice must never stay on for ever.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use steward_events::EventId;
use tokio::sync::Notify;
use tokio::time::Instant;

pub const GIVE_UP: Duration = Duration::from_secs(120);

/// The busy chats, keyed by the platform's chat id. Cheap to clone.
#[derive(Debug)]
pub struct Busy<K> {
    chats: Arc<Mutex<HashMap<K, HashMap<EventId, Instant>>>>,
    changed: Arc<Notify>,
}

impl<K> Clone for Busy<K> {
    fn clone(&self) -> Self {
        Self {
            chats: self.chats.clone(),
            changed: self.changed.clone(),
        }
    }
}

impl<K> Default for Busy<K> {
    fn default() -> Self {
        Self {
            chats: Arc::default(),
            changed: Arc::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> Busy<K> {
    fn lock(&self) -> MutexGuard<'_, HashMap<K, HashMap<EventId, Instant>>> {
        self.chats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `event`, from `chat`, is durable and waits for a step.
    pub fn start(&self, chat: K, event: EventId) {
        self.lock()
            .entry(chat)
            .or_default()
            .insert(event, Instant::now());
        self.changed.notify_one();
    }

    /// Forgets ended (and given-up) events; the chats left with none.
    pub fn finish(&self, ended: &[EventId]) -> Vec<K> {
        let now = Instant::now();
        let mut idle = Vec::new();
        self.lock().retain(|chat, events| {
            events.retain(|id, since| !ended.contains(id) && now - *since < GIVE_UP);
            if events.is_empty() {
                idle.push(chat.clone());
            }
            !events.is_empty()
        });
        idle
    }

    pub fn chats(&self) -> Vec<K> {
        self.lock().keys().cloned().collect()
    }

    /// Every busy chat, forgotten (the channel stops).
    pub fn drain(&self) -> Vec<K> {
        self.lock().drain().map(|(chat, _)| chat).collect()
    }

    /// Resolves when a chat became busy.
    pub async fn started(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_chat_is_busy_until_its_events_end_or_are_given_up() {
        let busy: Busy<i64> = Busy::default();
        let (a, b, c) = (
            EventId::generate(),
            EventId::generate(),
            EventId::generate(),
        );
        busy.start(1, a);
        busy.start(1, b);
        busy.start(2, c);
        assert_eq!(busy.finish(&[a]), Vec::<i64>::new(), "chat 1 still has b");
        let mut chats = busy.chats();
        chats.sort_unstable();
        assert_eq!(chats, [1, 2]);
        assert_eq!(busy.finish(&[b]), [1]);
        tokio::time::advance(GIVE_UP).await;
        assert_eq!(busy.finish(&[]), [2], "given up");
        assert!(busy.chats().is_empty());
    }
}

//! Event identifiers: ULIDs, so that ids sort by creation time and can be read in logs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// The identity of one event, unique across the daemon's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(Ulid);

impl EventId {
    /// A fresh id for an event being created now.
    pub fn generate() -> Self {
        Self(Ulid::generate())
    }

    /// The 16 bytes used as a storage key.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_bytes()
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(Ulid::from_bytes(bytes))
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Text that is not a valid event id.
#[derive(Debug, thiserror::Error)]
#[error("not an event id (expected a 26-character ULID): {0:?}")]
pub struct ParseIdError(String);

impl FromStr for EventId {
    type Err = ParseIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ulid::from_string(s)
            .map(Self)
            .map_err(|_| ParseIdError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_bytes() {
        let id = EventId::generate();
        assert_eq!(id.to_string().parse::<EventId>().unwrap(), id);
        assert_eq!(EventId::from_bytes(id.to_bytes()), id);
        assert!("not-an-id".parse::<EventId>().is_err());
    }
}

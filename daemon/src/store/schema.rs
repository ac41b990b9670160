//! The data dir's schema version, and the migrations that bring an older data dir up to
//! date. The version lives in the store itself (`m/schema`), so it moves with the data.
//!
//! - A fresh data dir gets [`CURRENT`].
//! - A data dir without a version was written before versions were recorded: schema 1.
//! - Older versions are migrated in order at start, each step recorded as it completes (a
//!   crash mid-way resumes from the last completed step; every step is idempotent).
//! - A newer version is refused with a clear message: this binary would misread it.
//!
//! History: 1 → 2 — terminal events (rejected, dead) keep their dedupe key, so a channel
//! that reads the same input again (a mailbox rescanned) sees it was recorded; the
//! migration restores the missing entries.

use super::{Store, StoreError, inbox, keys};

/// The schema this binary writes.
pub const CURRENT: u32 = 2;
const KEY: &[u8] = b"m/schema";

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the data dir was written by a newer steward (data schema {found}; this binary reads up to {CURRENT}): upgrade steward, or point --data-dir elsewhere"
    )]
    Newer { found: u32 },
    #[error("unreadable data schema version {0:?}")]
    Unreadable(Vec<u8>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sled::Error> for SchemaError {
    fn from(e: sled::Error) -> Self {
        SchemaError::Store(e.into())
    }
}

/// The recorded version (1 when none is recorded but the store has data).
pub fn version(store: &Store) -> Result<Option<u32>, SchemaError> {
    match store.log.get(KEY)? {
        Some(bytes) => {
            let raw: [u8; 4] = bytes
                .as_ref()
                .try_into()
                .map_err(|_| SchemaError::Unreadable(bytes.to_vec()))?;
            Ok(Some(u32::from_be_bytes(raw)))
        }
        None if store.log.is_empty() => Ok(None),
        None => Ok(Some(1)),
    }
}

/// Brings the store to [`CURRENT`]; returns the version it was migrated from, if any.
pub fn migrate(store: &Store) -> Result<Option<u32>, SchemaError> {
    let Some(found) = version(store)? else {
        store.log.insert(KEY, &CURRENT.to_be_bytes())?;
        return Ok(None);
    };
    if found > CURRENT {
        return Err(SchemaError::Newer { found });
    }
    for from in found..CURRENT {
        match from {
            1 => keep_terminal_dedupe_keys(store)?,
            _ => unreachable!("a migration for every version below CURRENT"),
        }
        store.log.insert(KEY, &(from + 1).to_be_bytes())?;
        store.db.flush()?;
    }
    Ok((found < CURRENT).then_some(found))
}

/// 1 → 2: dedupe entries for terminal records that carry a key.
fn keep_terminal_dedupe_keys(store: &Store) -> Result<(), SchemaError> {
    for entry in store.log.scan_prefix([keys::EVENT]) {
        let (_, bytes) = entry?;
        let Ok(record) = super::decode::<inbox::EventRecord>("events", &bytes) else {
            continue;
        };
        if !matches!(record.state, steward_events::EventState::Duplicate { .. }) {
            inbox::restore_dedupe_entry(store, &record)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_older_and_newer_data_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(migrate(&store).unwrap(), None, "fresh: nothing to migrate");
        assert_eq!(version(&store).unwrap(), Some(CURRENT));

        store.log.remove(KEY).unwrap();
        store
            .log
            .insert(keys::SETTLED, &0u64.to_be_bytes())
            .unwrap();
        assert_eq!(
            version(&store).unwrap(),
            Some(1),
            "data without a version is schema 1"
        );
        assert_eq!(migrate(&store).unwrap(), Some(1));
        assert_eq!(version(&store).unwrap(), Some(CURRENT));
        assert_eq!(
            migrate(&store).unwrap(),
            None,
            "migrating twice does nothing"
        );

        store.log.insert(KEY, &(CURRENT + 1).to_be_bytes()).unwrap();
        let refused = migrate(&store).unwrap_err().to_string();
        assert!(refused.contains("newer steward"), "{refused}");
    }
}

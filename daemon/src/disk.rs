//! The free-space guard: below `daemon.min_free_mb` on the data dir's file system, new
//! input is refused before it is written, with a reason the channel passes on (a socket
//! error, HTTP 503, an email left on the server for later).
//!
//! Why refuse early instead of writing until ENOSPC: sled treats an I/O error during a
//! flush as fatal for the open database, so the daemon would have to stop and could lose
//! the unflushed tail of what it acknowledged. Refusing while there is still room keeps what
//! was acknowledged safe and lets everything already inside finish; once space returns, the
//! next input passes the check — no restart needed. The answer is cached for a moment so
//! that the check costs nothing on the ingest path.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

const FRESH_FOR: Duration = Duration::from_millis(200);

/// Why input was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the disk is nearly full: {available_mb} MB free under {dir}, and input is refused below {needed_mb} MB (daemon.min_free_mb); free some space and send again"
)]
pub struct DiskFull {
    pub dir: String,
    pub available_mb: u64,
    pub needed_mb: u64,
}

#[derive(Debug)]
pub struct DiskGuard {
    dir: PathBuf,
    min_free: u64,
    last: Mutex<Option<(Instant, u64)>>,
}

impl DiskGuard {
    pub fn new(dir: PathBuf, min_free: u64) -> Self {
        Self {
            dir,
            min_free,
            last: Mutex::new(None),
        }
    }

    /// Free bytes on the data dir's file system (cached briefly); `None` when unknown.
    fn available(&self) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, bytes)) = *last
            && at.elapsed() < FRESH_FOR
        {
            return Some(bytes);
        }
        let bytes = fs2::available_space(&self.dir).ok()?;
        *last = Some((Instant::now(), bytes));
        Some(bytes)
    }

    /// `Err` when new input should be refused.
    pub fn check(&self) -> Result<(), DiskFull> {
        if self.min_free == 0 {
            return Ok(());
        }
        match self.available() {
            Some(available) if available < self.min_free => Err(DiskFull {
                dir: self.dir.display().to_string(),
                available_mb: available / (1024 * 1024),
                needed_mb: self.min_free / (1024 * 1024),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_turns_it_off_and_an_impossible_minimum_refuses() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DiskGuard::new(dir.path().to_owned(), 0).check().is_ok());
        assert!(DiskGuard::new(dir.path().to_owned(), 1).check().is_ok());
        let refused = DiskGuard::new(dir.path().to_owned(), u64::MAX)
            .check()
            .unwrap_err();
        assert!(
            refused.to_string().contains("daemon.min_free_mb"),
            "{refused}"
        );
    }
}

//! The cross-signing identities of the people the assistant hears from, as first seen.
//!
//! With `require_verified_devices`, a message counts as coming from a verified device when
//! the device is signed by its user's cross-signing identity and that identity is the one
//! the assistant saw for the user the first time (trust on first use, what Element calls
//! pinning). The assistant cannot verify anyone interactively, so this is what makes the
//! option usable at all; and it still tells apart what a stolen password alone gives — a new
//! device the identity did not sign, or a reset of the identity — from the owner's own
//! devices.
//!
//! Decided here:
//! - The pins live in `DATA/matrix/pinned-identities.json` (mode 0600): a JSON object from
//!   user id to the base64 ed25519 master key first seen. It is a file, not a sled tree, so
//!   that the owner can accept an identity they reset themselves: delete their line (or the
//!   file) and the next message pins the new identity. The warning the daemon logs when a
//!   pinned identity changes says so, and so does the notice an owner gets through the
//!   outbox, once per new identity of theirs.
//! - Only owners and trusted contacts are pinned: strangers are refused before their
//!   devices matter, and must not be able to grow the file.
//! - A file that cannot be read or parsed pins nothing and vouches for no one (every device
//!   counts as unverified) until it is fixed; the error is logged each time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;

use super::session::{Account, write_private};

/// What a user's current identity is, against the pins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pin {
    /// Never seen before: pinned now.
    FirstSeen,
    /// The identity pinned.
    Same,
    /// Another identity than the one pinned.
    Changed { pinned: String },
}

/// The pins file of one account.
#[derive(Clone, Debug)]
pub struct Pins {
    path: PathBuf,
}

impl Pins {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The account's pins file, `DATA/matrix/pinned-identities.json`.
    pub fn of(account: &Account) -> Self {
        Self::new(account.dir().join("pinned-identities.json"))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Checks `user`'s identity `master_key` against the pins, pinning it when the user has
    /// none yet.
    pub fn check(&self, user: &str, master_key: &str) -> anyhow::Result<Pin> {
        let mut pins = self.read()?;
        match pins.get(user) {
            Some(pinned) if pinned == master_key => Ok(Pin::Same),
            Some(pinned) => Ok(Pin::Changed {
                pinned: pinned.clone(),
            }),
            None => {
                pins.insert(user.to_owned(), master_key.to_owned());
                let text = serde_json::to_vec_pretty(&pins)?;
                write_private(&self.path, &text)
                    .with_context(|| format!("cannot write {}", self.path.display()))?;
                Ok(Pin::FirstSeen)
            }
        }
    }

    fn read(&self) -> anyhow::Result<BTreeMap<String, String>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not a JSON object of user ids to master keys",
                    self.path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", self.path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_identity_is_pinned_and_a_different_one_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path().join("pinned-identities.json"));
        assert_eq!(pins.check("@me:x", "KEY1").unwrap(), Pin::FirstSeen);
        assert_eq!(pins.check("@me:x", "KEY1").unwrap(), Pin::Same);
        assert_eq!(
            pins.check("@me:x", "KEY2").unwrap(),
            Pin::Changed {
                pinned: "KEY1".into()
            }
        );
        assert_eq!(pins.check("@friend:x", "KEY3").unwrap(), Pin::FirstSeen);
        // Deleting the file accepts whatever identity comes next.
        std::fs::remove_file(pins.path()).unwrap();
        assert_eq!(pins.check("@me:x", "KEY2").unwrap(), Pin::FirstSeen);
    }

    #[test]
    fn a_broken_file_vouches_for_no_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pinned-identities.json");
        std::fs::write(&path, "not json").unwrap();
        let error = Pins::new(path).check("@me:x", "KEY1").unwrap_err();
        assert!(
            format!("{error:#}").contains("not a JSON object"),
            "{error:#}"
        );
    }
}

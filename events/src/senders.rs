//! Who may speak to the assistant: one policy for every channel (webhooks now; email and
//! chat later). An authenticated sender identity (`me@example.com`, `webhook:github`) is
//! the owner, a trusted contact, or anyone else; anyone else is either let in as untrusted
//! content or refused, and a refused input is recorded as `rejected` (never dropped).
//!
//! Entries match an identity exactly, case-insensitively; a leading `*` matches any prefix
//! (`*@example.com`). The owner list wins over the trusted list.

use crate::event::Trust;

/// `[senders]` of the config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderPolicy {
    pub owner: Vec<String>,
    pub trusted: Vec<String>,
    /// What happens to everyone else.
    pub unknown: Unknown,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unknown {
    /// Let in, as untrusted content (taints the step).
    #[default]
    Untrusted,
    /// Refused: recorded as `rejected`.
    Reject,
}

/// The policy's answer for one sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderDecision {
    Accept(Trust),
    Reject,
}

impl SenderPolicy {
    pub fn decide(&self, identity: &str) -> SenderDecision {
        let listed = |list: &[String]| list.iter().any(|entry| matches(entry, identity));
        if listed(&self.owner) {
            SenderDecision::Accept(Trust::Owner)
        } else if listed(&self.trusted) {
            SenderDecision::Accept(Trust::Trusted)
        } else {
            match self.unknown {
                Unknown::Untrusted => SenderDecision::Accept(Trust::Untrusted),
                Unknown::Reject => SenderDecision::Reject,
            }
        }
    }
}

fn matches(entry: &str, identity: &str) -> bool {
    let (entry, identity) = (entry.to_ascii_lowercase(), identity.to_ascii_lowercase());
    match entry.strip_prefix('*') {
        Some(suffix) => identity.ends_with(suffix),
        None => entry == identity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_are_owner_trusted_or_anyone_else() {
        let policy = |unknown| SenderPolicy {
            owner: vec!["me@example.com".into()],
            trusted: vec![
                "*@family.example".into(),
                "webhook:github".into(),
                "me@example.com".into(),
            ],
            unknown,
        };
        let table = [
            (
                "me@example.com",
                Unknown::Reject,
                SenderDecision::Accept(Trust::Owner),
            ),
            (
                "ME@Example.com",
                Unknown::Reject,
                SenderDecision::Accept(Trust::Owner),
            ),
            (
                "mum@family.example",
                Unknown::Reject,
                SenderDecision::Accept(Trust::Trusted),
            ),
            (
                "webhook:github",
                Unknown::Reject,
                SenderDecision::Accept(Trust::Trusted),
            ),
            (
                "spam@elsewhere.example",
                Unknown::Untrusted,
                SenderDecision::Accept(Trust::Untrusted),
            ),
            (
                "spam@elsewhere.example",
                Unknown::Reject,
                SenderDecision::Reject,
            ),
            ("family.example", Unknown::Reject, SenderDecision::Reject),
        ];
        for (identity, unknown, decision) in table {
            assert_eq!(policy(unknown).decide(identity), decision, "{identity}");
        }
    }
}

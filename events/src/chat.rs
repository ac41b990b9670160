//! Which chat messages the assistant takes, and with what trust: one pure decision for a
//! chat platform's channel (Matrix now, Telegram later), table-tested.
//!
//! Decided here:
//! - The sender policy ([`crate::SenderPolicy`]) speaks first: anyone who is neither an
//!   owner nor trusted is refused (recorded `rejected`), in a direct chat or a group.
//! - A direct chat is a room of at most two members (the assistant and the sender); any
//!   other room is a group, and a group must be one the owner listed (`rooms`), else the
//!   message is refused naming why.
//! - In a listed group, a message that does not mention the assistant is chatter between
//!   people, not a request: ignored (not an event) when mentions are required.
//! - An encrypted room with encryption turned off is refused: the message cannot be read,
//!   and an answer must never go back in plaintext.
//! - With `require_verified_devices`, an owner's or trusted contact's message from a device
//!   that is not verified is taken as untrusted content (it taints the step), not refused:
//!   the owner still sees it was received. What counts as verified is the channel's to say
//!   (Matrix: verified, or signed by the sender's cross-signing identity as first seen).

use crate::event::Trust;
use crate::senders::SenderDecision;

/// What the channel knows of the room and the message when it decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomFacts {
    /// The room is one of the configured `rooms`.
    pub listed: bool,
    /// Joined (and invited) members, the assistant included.
    pub members: u64,
    /// The message mentions the assistant (by id in its mentions, or in its text).
    pub mentioned: bool,
    pub encrypted: bool,
    /// Whether the sending device is verified; `None` for an unencrypted message.
    pub device_verified: Option<bool>,
}

/// The channel's configured rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatRules {
    pub e2ee: bool,
    pub mention_required_in_groups: bool,
    pub require_verified_devices: bool,
}

/// What becomes of one chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// An event with this trust.
    Take(Trust),
    /// Recorded as `rejected`, with the reason.
    Reject(String),
    /// Not addressed to the assistant: no event.
    Ignore,
}

/// Decides one message (see the module docs).
pub fn admit(sender: SenderDecision, room: RoomFacts, rules: ChatRules) -> Admission {
    let trust = match sender {
        SenderDecision::Accept(Trust::Untrusted) | SenderDecision::Reject => {
            return Admission::Reject("the sender is neither an owner nor trusted".into());
        }
        SenderDecision::Accept(trust) => trust,
    };
    if room.encrypted && !rules.e2ee {
        return Admission::Reject("the room is encrypted and matrix.e2ee is off".into());
    }
    let direct = room.members <= 2;
    if !direct && !room.listed {
        return Admission::Reject("a group room that is not in the configured rooms".into());
    }
    if !direct && rules.mention_required_in_groups && !room.mentioned {
        return Admission::Ignore;
    }
    if rules.require_verified_devices && room.device_verified != Some(true) {
        return Admission::Take(Trust::Untrusted);
    }
    Admission::Take(trust)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: ChatRules = ChatRules {
        e2ee: true,
        mention_required_in_groups: true,
        require_verified_devices: false,
    };
    const DM: RoomFacts = RoomFacts {
        listed: false,
        members: 2,
        mentioned: false,
        encrypted: true,
        device_verified: Some(false),
    };

    #[test]
    fn messages_are_taken_refused_or_ignored_by_sender_room_and_mention() {
        let owner = SenderDecision::Accept(Trust::Owner);
        let trusted = SenderDecision::Accept(Trust::Trusted);
        let group = RoomFacts { members: 3, ..DM };
        let listed_group = RoomFacts {
            listed: true,
            ..group
        };
        let verified = ChatRules {
            require_verified_devices: true,
            ..RULES
        };
        let table = [
            ("owner dm", owner, DM, RULES, Admission::Take(Trust::Owner)),
            (
                "trusted dm",
                trusted,
                DM,
                RULES,
                Admission::Take(Trust::Trusted),
            ),
            (
                "stranger",
                SenderDecision::Reject,
                DM,
                RULES,
                Admission::Reject("the sender is neither an owner nor trusted".into()),
            ),
            (
                "let-in stranger",
                SenderDecision::Accept(Trust::Untrusted),
                DM,
                RULES,
                Admission::Reject("the sender is neither an owner nor trusted".into()),
            ),
            (
                "unlisted group",
                owner,
                group,
                RULES,
                Admission::Reject("a group room that is not in the configured rooms".into()),
            ),
            (
                "listed group, no mention",
                owner,
                listed_group,
                RULES,
                Admission::Ignore,
            ),
            (
                "listed group, mention",
                owner,
                RoomFacts {
                    mentioned: true,
                    ..listed_group
                },
                RULES,
                Admission::Take(Trust::Owner),
            ),
            (
                "listed group, mentions optional",
                owner,
                listed_group,
                ChatRules {
                    mention_required_in_groups: false,
                    ..RULES
                },
                Admission::Take(Trust::Owner),
            ),
            (
                "encrypted, e2ee off",
                owner,
                DM,
                ChatRules {
                    e2ee: false,
                    ..RULES
                },
                Admission::Reject("the room is encrypted and matrix.e2ee is off".into()),
            ),
            (
                "plain room, e2ee off",
                owner,
                RoomFacts {
                    encrypted: false,
                    device_verified: None,
                    ..DM
                },
                ChatRules {
                    e2ee: false,
                    ..RULES
                },
                Admission::Take(Trust::Owner),
            ),
            (
                "unverified device, required",
                owner,
                DM,
                verified,
                Admission::Take(Trust::Untrusted),
            ),
            (
                "plaintext, verification required",
                owner,
                RoomFacts {
                    encrypted: false,
                    device_verified: None,
                    ..DM
                },
                verified,
                Admission::Take(Trust::Untrusted),
            ),
            (
                "verified device, required",
                owner,
                RoomFacts {
                    device_verified: Some(true),
                    ..DM
                },
                verified,
                Admission::Take(Trust::Owner),
            ),
            (
                "the assistant alone with the sender",
                owner,
                RoomFacts { members: 1, ..DM },
                RULES,
                Admission::Take(Trust::Owner),
            ),
        ];
        for (name, sender, room, rules, expected) in table {
            assert_eq!(admit(sender, room, rules), expected, "{name}");
        }
    }
}

//! Which senders' devices count as verified, for `matrix.require_verified_devices`.
//!
//! The assistant has no interactive verification, so a device counts when the assistant
//! verified it some other way, or when its user's cross-signing identity signed it and that
//! identity is still the one first seen for them ([`super::pins`]: trust on first use, like
//! Element's pinning). A login made with the password alone (a device the identity did not
//! sign) does not count; nor does any device of a user whose identity changed since it was
//! pinned. When that user is an owner, they are told once per new identity, through the
//! owner outbox, that their Matrix messages are taken as untrusted content and how to accept
//! an identity they reset themselves. Only owners and trusted contacts are looked up.

use matrix_sdk::deserialized_responses::{VerificationLevel, VerificationState};
use matrix_sdk::ruma::UserId;
use steward_events::{SenderDecision, Trust};
use tracing::{info, warn};

use super::inbound::Inbound;
use super::pins::Pin;
use crate::owner::outbox::{MessageKind, NewMessage};

impl Inbound<'_> {
    /// Whether the sending device counts as verified for `require_verified_devices`:
    /// verified by the assistant, or signed by its user's cross-signing identity while that
    /// identity is the one first seen for them (see [`super::pins`]). Only owners and
    /// trusted contacts are vouched for.
    pub(super) async fn vouched_for(&self, state: &VerificationState, sender: &UserId) -> bool {
        match state {
            VerificationState::Verified => true,
            VerificationState::Unverified(VerificationLevel::UnverifiedIdentity)
                if matches!(
                    self.policy().decide(sender.as_str()),
                    SenderDecision::Accept(Trust::Owner | Trust::Trusted)
                ) =>
            {
                self.identity_pinned(sender).await
            }
            VerificationState::Unverified(_) => false,
        }
    }

    /// Whether `sender`'s cross-signing identity is the one pinned for them (pinning it when
    /// none is).
    async fn identity_pinned(&self, sender: &UserId) -> bool {
        let identity = match self.client.encryption().get_user_identity(sender).await {
            Ok(Some(identity)) => identity,
            Ok(None) => return false,
            Err(e) => {
                warn!(error = %e, %sender, "cannot read a sender's identity; their device counts as unverified");
                return false;
            }
        };
        let Some(key) = identity.master_key().get_first_key().map(|k| k.to_base64()) else {
            return false;
        };
        match self.pins.check(sender.as_str(), &key) {
            Ok(Pin::FirstSeen) => {
                info!(%sender, master_key = %key, "pinned a sender's cross-signing identity, first seen now");
                true
            }
            Ok(Pin::Same) => true,
            Ok(Pin::Changed { pinned }) => {
                warn!(%sender, %pinned, now = %key, file = %self.pins.path().display(), "a sender's cross-signing identity changed since it was pinned: their devices count as unverified; if they reset it themselves, delete their line from the file to pin the new one");
                if self.is_owner(sender.as_str())
                    && let Err(e) = self.tell_identity_changed(sender, &key).await
                {
                    warn!(error = %e, "cannot tell the owner that their identity changed");
                }
                false
            }
            Err(e) => {
                warn!(error = %format!("{e:#}"), "cannot check the pinned identities; every device counts as unverified until this is fixed");
                false
            }
        }
    }

    /// Tells the owner, once per new identity, that their messages from Matrix are taken as
    /// untrusted and how to accept the identity if they reset it themselves. Queued before
    /// it is noted as told: a crash between tells twice rather than never.
    async fn tell_identity_changed(
        &self,
        owner: &UserId,
        master_key: &str,
    ) -> Result<(), crate::store::StoreError> {
        if self
            .state
            .identity_change_told(owner.as_str(), master_key)?
        {
            return Ok(());
        }
        let notice = NewMessage {
            text: format!(
                "The Matrix cross-signing identity of {owner} changed since I first saw it (its master key is now {master_key}). Until you accept it, your Matrix messages are taken as untrusted content: anything they ask that changes something waits for your confirmation. If you reset it yourself, delete the line for {owner} from {} on the assistant's machine.",
                self.pins.path().display()
            ),
            ..NewMessage::default()
        };
        self.cx.outbox().queue(MessageKind::Problem, notice).await?;
        self.state
            .note_identity_change_told(owner.as_str(), master_key)
            .await
    }
}

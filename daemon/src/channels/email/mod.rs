//! The email channel: the owner writes to the assistant's mailbox and gets answers in the
//! same thread; the assistant sends mail only through the tool pipeline (two-phase
//! confirmation) or as the answer to an email turn.
//!
//! - [`account`]: credentials, TLS (system roots plus `email.ca_file`), IMAP login.
//! - [`inbound`]: the IMAP IDLE actor, watermark, one event per message.
//! - [`parse`] and [`auth`]: what a message says, and whether its sender is who it claims.
//! - [`outbound`]: SMTP submission and the Sent copy, under a Message-ID fixed in advance.
//! - [`replies`]: answers to email turns, requests for confirmation by mail, and the
//!   owner's `CONFIRM` / `DENY` answers.
//! - [`tools`]: `email_search`, `email_read`, `email_send`, `email_reply`.
//! - [`reconcile`]: settles sends a crash left unknown by looking in Sent.
// Everything here reads outside input (mail): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod account;
pub mod auth;
pub mod inbound;
pub mod outbound;
pub mod parse;
pub mod reconcile;
pub mod replies;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use steward_tools::ToolPipeline;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::confirmations::Confirmations;
use crate::replies::ReplyHub;
use crate::status::StatusBoard;
use crate::store::Store;

/// The parts of the email channel built with the tool registry (the tools need them).
#[derive(Clone, Debug)]
pub struct EmailParts {
    pub account: account::Account,
    pub mailer: outbound::Mailer,
}

/// The account the email tools use, replaced as a whole when a reload changes `[email]`.
#[derive(Clone, Debug)]
pub struct EmailHandle(Arc<std::sync::RwLock<EmailParts>>);

impl EmailHandle {
    pub fn new(parts: EmailParts) -> Self {
        Self(Arc::new(std::sync::RwLock::new(parts)))
    }

    pub fn get(&self) -> EmailParts {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, parts: EmailParts) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = parts;
    }
}

/// What the running channel needs from the rest of the daemon.
#[derive(Clone, Debug)]
pub struct Wiring {
    pub store: Store,
    pub data_dir: PathBuf,
    pub submitter: crate::channels::Submitter,
    pub status: Arc<StatusBoard>,
    pub replies: ReplyHub,
    pub confirmations: Arc<Confirmations>,
    pub pipeline: ToolPipeline,
}

/// Spawns the inbound actor, the replier and the reconciliation.
pub fn start(
    parts: EmailParts,
    wiring: Wiring,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let config = parts.account.config.clone();
    let tree = wiring.store.email_tree()?;
    let commands = replies::MailCommands {
        confirmations: wiring.confirmations.clone(),
        mailer: parts.mailer.clone(),
    };
    let inbound = inbound::Inbound {
        auth: auth::SenderAuth::new(
            config.trusted_authserv_ids.clone(),
            config.dns_servers.clone(),
        ),
        account: parts.account.clone(),
        submitter: wiring.submitter.clone(),
        status: wiring.status.clone(),
        watermarks: inbound::Watermarks(tree.clone()),
        attachments_dir: config
            .attachments_dir
            .clone()
            .unwrap_or_else(|| wiring.data_dir.join("attachments")),
        commands,
    };
    let replier = replies::Replier {
        mailer: parts.mailer.clone(),
        inbox: wiring.submitter.inbox().clone(),
        replies: wiring.replies,
        confirmations: wiring.confirmations.clone(),
        tree,
        owners: config.senders.owner.clone(),
        confirm_by_email: config.confirm_by_email,
    };
    tasks.spawn(reconcile::run(
        wiring.pipeline,
        wiring.confirmations.pending.clone(),
        parts.mailer,
        wiring.submitter.inbox().clone(),
        shutdown.clone(),
    ));
    tasks.spawn(replier.run(shutdown.clone()));
    tasks.spawn(inbound.run(shutdown));
    Ok(())
}

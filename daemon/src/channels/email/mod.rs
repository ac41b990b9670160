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
mod owner_mail;
pub mod parse;
pub mod reconcile;
pub mod replies;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use crate::channels::context::ChannelContext;
use crate::store::Store;
use crate::supervisor::Supervisor;
use steward_tools::ToolPipeline;

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

/// What the email channel runs with besides its context: the account, the store's email
/// tree, where attachments go, and the pipeline (its ledger settles unknown sends).
#[derive(Clone, Debug)]
pub struct EmailChannel {
    parts: EmailParts,
    tree: sled::Tree,
    attachments_dir: PathBuf,
    pipeline: ToolPipeline,
    /// `owner.email_after_secs`: owner messages nobody saw are mailed after this.
    email_after: Option<std::time::Duration>,
}

impl EmailChannel {
    pub fn new(
        parts: EmailParts,
        store: &Store,
        data_dir: &std::path::Path,
        pipeline: ToolPipeline,
        email_after: Option<std::time::Duration>,
    ) -> Result<Self, crate::store::StoreError> {
        let attachments_dir = parts
            .account
            .config
            .attachments_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("attachments"));
        Ok(Self {
            parts,
            tree: store.email_tree()?,
            attachments_dir,
            pipeline,
            email_after,
        })
    }
}

/// Runs the channel until it is stopped: the reconciliation of unknown sends and the
/// replier as tasks of the channel, and the inbound actor (see the module docs).
pub async fn run(channel: EmailChannel, cx: ChannelContext) {
    let EmailChannel {
        parts,
        tree,
        attachments_dir,
        pipeline,
        email_after,
    } = channel;
    let config = parts.account.config.clone();
    let confirmations = cx.confirmations().clone();
    let inbox = cx.submitter().inbox().clone();
    let replier = replies::Replier {
        mailer: parts.mailer.clone(),
        inbox: inbox.clone(),
        replies: cx.replies().clone(),
        confirmations: confirmations.clone(),
        tree: tree.clone(),
        owners: config.senders.owner.clone(),
        confirm_by_email: config.confirm_by_email,
    };
    cx.spawn(reconcile::run(
        pipeline,
        confirmations.pending.clone(),
        parts.mailer.clone(),
        inbox,
        cx.shutdown().clone(),
    ));
    cx.spawn(replier.run(cx.shutdown().clone()));
    let owner = config.senders.owner.iter().find(|o| !o.starts_with('*'));
    match (email_after, owner) {
        (Some(after), Some(owner)) => cx.spawn(owner_mail::run(
            parts.mailer.clone(),
            owner.clone(),
            after,
            cx.clone(),
        )),
        (Some(_), None) => {
            tracing::warn!(
                "owner.email_after_secs is set but email.owners names no address to mail"
            )
        }
        (None, _) => {}
    }
    let inbound = inbound::Inbound {
        auth: auth::SenderAuth::new(
            config.trusted_authserv_ids.clone(),
            config.dns_servers.clone(),
        ),
        account: parts.account.clone(),
        watermarks: inbound::Watermarks(tree),
        attachments_dir,
        commands: replies::MailCommands {
            confirmations,
            mailer: parts.mailer,
        },
        cx,
    };
    inbound.run().await;
}

/// Starts the email channel on the account `handle` holds now.
pub fn start(
    handle: &EmailHandle,
    supervisor: &Supervisor,
    store: &Store,
    data_dir: &std::path::Path,
    pipeline: &ToolPipeline,
    email_after: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let channel = EmailChannel::new(handle.get(), store, data_dir, pipeline.clone(), email_after)?;
    supervisor.start(inbound::CHANNEL, move |cx| run(channel, cx));
    Ok(())
}

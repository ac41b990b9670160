//! The Telegram channel: the owner (and trusted contacts) talk to the assistant through a
//! bot, and owner messages reach each owner's private chat.
//!
//! - [`api`]: the Bot API client, whose errors say whether a request can have been done.
//! - [`inbound`]: `getUpdates` long polling, the offset advanced only after the updates
//!   are durable; pairing, button presses and replies that answer requests.
//! - [`outbound`]: owner outbox messages, each sent at most once (`unknown` when Telegram's
//!   answer was lost), paced per chat.
//! - [`typing`]: "typing…" while a step works on a chat's message.
//! - [`parse`], [`html`]: what an update says, and Markdown as Telegram HTML (pure).
//! - [`state`]: what the channel keeps in sled, the paired owners among it.
//!
//! Who is taken, and how trusted, is the pure [`steward_events::admit`], as for Matrix: the
//! owners are `telegram.owners` plus those paired with `steward telegram pair`. The session
//! starts with `getMe`: when the token now belongs to another bot than the one the offset
//! was kept for, the offset starts over (update ids are per bot) and the log and the status
//! say so.
// Everything here reads outside input (Bot API answers): no slicing that can panic.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod api;
pub mod html;
pub mod inbound;
pub mod outbound;
pub mod parse;
pub mod state;
pub mod typing;

use std::sync::OnceLock;
use std::time::Duration;

use steward_config::TelegramConfig;
use tracing::{info, warn};

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};
use crate::owner::OwnerApi;
use crate::supervisor::Supervisor;
use api::BotApi;
use state::TelegramState;

/// The channel's name in `steward status` and in the outbox's deliveries.
pub const CHANNEL: &str = "telegram";
/// The longest wait between attempts to reach the Bot API.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long a `409 Conflict` is shown before polling is tried again.
const CONFLICT_WAIT: Duration = Duration::from_secs(10);

/// What the channel runs with besides its context.
#[derive(Clone, Debug)]
pub struct TelegramChannel {
    pub config: TelegramConfig,
    pub state: TelegramState,
    pub owner: OwnerApi,
}

/// Starts the channel (see the module docs).
pub fn start(config: &TelegramConfig, supervisor: &Supervisor, owner: &OwnerApi) {
    owner.telegram.set_configured(Some(config.owners.clone()));
    let channel = TelegramChannel {
        config: config.clone(),
        state: owner.telegram.clone(),
        owner: owner.clone(),
    };
    supervisor.start(CHANNEL, move |cx| run(channel, cx));
}

/// Runs the channel until it is stopped; each session is retried after the backoff.
/// Its sessions share one HTTP client ([`api::http_client`]), built by the first.
pub async fn run(channel: TelegramChannel, cx: ChannelContext) {
    let http = OnceLock::new();
    cx.keep_up(MAX_WAIT, || session(&channel, &cx, &http)).await;
}

/// The bot behind the token: `getMe` (for `steward doctor` too). The token is read anew each
/// time, so a session started again after a failure uses a token the owner replaced.
pub async fn connect(
    config: &TelegramConfig,
    http: reqwest::Client,
) -> Result<(BotApi, api::Me), String> {
    let token = config
        .token
        .read()
        .map_err(|e| format!("{}: {e}", config.token_key()))?;
    let api = BotApi::new(http, &config.api_url, &token);
    let me = api.get_me().await.map_err(|e| {
        if e.is_bad_token() {
            format!("{} is not a bot's token ({e})", config.token_key())
        } else {
            e.to_string()
        }
    })?;
    Ok((api, me))
}

fn stored(e: crate::store::StoreError) -> Down {
    Down::Failed(format!("the store: {e}"))
}

async fn session(
    channel: &TelegramChannel,
    cx: &ChannelContext,
    http: &OnceLock<reqwest::Client>,
) -> Result<(), Down> {
    cx.set_health(ChannelHealth::starting("asking the Bot API who the bot is"));
    let http = match http.get() {
        Some(http) => http.clone(),
        None => {
            let built = api::http_client().map_err(|e| Down::Failed(e.to_string()))?;
            http.get_or_init(|| built).clone()
        }
    };
    let (api, me) = connect(&channel.config, http).await.map_err(Down::Failed)?;
    let mut note = None;
    match channel.state.bot().map_err(stored)? {
        Some(bot) if bot == me.id => {}
        previous => {
            if let Some(previous) = previous {
                warn!(
                    previous,
                    bot = me.id,
                    "the token now belongs to another bot: its update offset starts over"
                );
                note = Some(format!(
                    "offset reset: the bot changed from {previous} to {}",
                    me.id
                ));
            }
            channel.state.switch_bot(me.id).await.map_err(stored)?;
        }
    }
    info!(bot = me.id, username = ?me.username, "Telegram bot connected");
    let unknown = channel
        .state
        .settle_interrupted_sends()
        .await
        .map_err(stored)?;
    let stop = cx.shutdown().child_token();
    let _stop_on_return = stop.clone().drop_guard();
    let typing = typing::Typing::default();
    cx.spawn(typing::run(
        typing.clone(),
        api.clone(),
        cx.replies().clone(),
        stop.clone(),
    ));
    let outbound = outbound::Outbound {
        api: api.clone(),
        config: channel.config.clone(),
        state: channel.state.clone(),
        cx: cx.clone(),
        pacing: outbound::Pacing::default(),
    };
    outbound.tell_unknown(&unknown).await;
    cx.spawn(outbound.run(stop.clone()));
    inbound::Inbound {
        api: &api,
        me: &me,
        config: &channel.config,
        state: &channel.state,
        owner: &channel.owner,
        cx,
        typing: &typing,
        note,
    }
    .run()
    .await
}

/// Every owner: those in the config and those paired.
pub fn owners(config: &TelegramConfig, state: &TelegramState) -> Vec<i64> {
    let mut owners = config.owners.clone();
    match state.paired_owners() {
        Ok(paired) => owners.extend(paired.iter().map(|p| p.user_id)),
        Err(e) => warn!(error = %e, "cannot read the paired Telegram owners"),
    }
    owners.sort_unstable();
    owners.dedup();
    owners
}

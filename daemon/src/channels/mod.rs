//! Channel actors, one folder each: `user` (the control socket), `http` (webhooks, the owner
//! API, health and metrics), `email`, `matrix`, `telegram`, `timer`,
//! `watch`. Each turns one kind of outside input
//! into events, acknowledging upstream only once the inbox has them.
//!
//! A channel is one room with one door: `run(config, cx: ChannelContext)`. The
//! `crate::supervisor::Supervisor` alone starts it, tracks its tasks and stops it (at
//! shutdown, or to restart it with a new config on SIGHUP). Through the
//! [`context::ChannelContext`] — and nothing else — it reaches the daemon: `cx.submit(event)`
//! (the urgency rules are applied there, a channel's own default urgency being only an input
//! to them), `cx.set_health(..)` (a typed [`ChannelHealth`] that `steward status`,
//! `/metrics` and `/readyz` read), the reply hub, the pending confirmations, its shutdown
//! token and `cx.spawn(..)` for tasks of its own. It restarts after a failure with
//! `cx.keep_up(max_wait, attempt)`, the one [`Backoff`] policy. Each listens for shutdown at
//! every await on outside input.
//!
//! # How to add a channel
//!
//! 1. Config: a section in `steward-config` (raw type, validation naming the key, default
//!    in `default.toml`), or a list of them.
//! 2. A folder `channels/NAME/` whose `mod.rs` has `pub async fn run(config, cx)`: `config`
//!    is the checked section plus whatever the channel alone needs (a bound listener, a
//!    store tree). Inside: call `cx.keep_up(MAX_WAIT, || async { one_session().await })`
//!    where a session returns `Err(Down::Failed(why))` to be retried, say `cx.set_health`
//!    as it connects and becomes ready, and submit each input with `cx.submit(event)`
//!    (dedupe key = the upstream id, so a redelivery is recorded once) before
//!    acknowledging it upstream. A channel the owner talks through answers via
//!    [`crate::owner::OwnerApi`], the same service the socket and HTTP use.
//! 3. Starting: one line in `daemon::start_channels` — `supervisor.start("NAME", move |cx|
//!    NAME::run(config, cx))` — or a `start` function in the folder when starting can fail
//!    in a way the caller must see (HTTP binds first). On SIGHUP, `reload.rs` compares the
//!    section and calls `supervisor.stop("NAME")` then starts it again.
//! 4. A cargo feature when it brings dependencies a user may not want (`email`, `http`,
//!    `mcp`, `matrix`), with `core::check_features` refusing the section in a build without it.
//! 5. Tests: an end-to-end test against the real other side (a real server on 127.0.0.1),
//!    and the `kill -9` torture for whatever it acknowledges.
// Everything here reads outside input (the socket, HTTP, mail, files, schedules): no slicing
// that can panic; where an index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod answers;
pub mod busy;
pub mod context;
#[cfg(feature = "email")]
pub mod email;
pub mod health;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "matrix")]
pub mod matrix;
pub mod submit;
pub mod telegram;
pub mod timer;
pub mod user;
pub mod watch;

pub use health::{Backoff, ChannelHealth};
pub use submit::Submitter;

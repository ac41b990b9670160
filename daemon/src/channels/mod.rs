//! Channel actors, one folder each: `user` (the control socket), `http` (webhooks, the owner
//! API, health and metrics), `email`, `timer`, `watch`. Each turns one kind of outside input
//! into events and submits them to the inbox through the one [`Submitter`] (which applies the
//! urgency rules), acknowledging upstream only once the inbox has them, reports how it is
//! doing as a [`ChannelHealth`], and restarts after a failure with the one [`Backoff`]
//! policy. Each listens for shutdown at every await on outside input.
// Everything here reads outside input (the socket, HTTP, mail, files, schedules): no slicing
// that can panic; where an index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod context;
pub mod email;
pub mod health;
pub mod http;
pub mod submit;
pub mod timer;
pub mod user;
pub mod watch;

pub use health::{Backoff, ChannelHealth};
pub use submit::Submitter;

//! Channel actors: each turns one kind of outside input into events and submits them to the
//! inbox through the one [`Submitter`] (which applies the urgency rules), acknowledging
//! upstream only once the inbox has them. Only the supervisor spawns
//! them; each listens for shutdown at every await on outside input.
// Everything here reads outside input (the control socket): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod health;
pub mod owner_message;
pub mod submit;
pub mod user;

pub use health::{Backoff, ChannelHealth};
pub use submit::Submitter;

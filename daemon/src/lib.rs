//! The Steward daemon: the inbox and trajectories ([`store`]), the dispatcher that turns
//! events into steps ([`dispatcher`]), the brain ([`brain`]), channel actors ([`channels`]),
//! the owner API ([`owner`]) that the control socket (protocol and client: the
//! `steward-protocol` crate) and HTTP serve, the parts wired
//! together ([`core`]), the supervisor of the channels ([`supervisor`]) and the running daemon
//! ([`daemon`]).
//! The `steward` binary is a thin CLI over this library.

pub mod brain;
pub mod channels;
pub mod cli;
pub mod confirmations;
pub mod core;
pub mod daemon;
pub mod disk;
pub mod dispatcher;
pub mod faults;
pub mod instance_lock;
pub mod logging;
pub mod mcp;
pub mod notify;
pub mod owner;
pub mod paths;
pub mod reload;
pub mod replies;
pub mod retention;
pub mod status;
pub mod store;
pub mod supervisor;

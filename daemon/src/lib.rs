//! The Steward daemon: the inbox and trajectories ([`store`]), the dispatcher that turns
//! events into steps (`dispatcher`), the brain (`brain`), channel actors ([`channels`]),
//! the owner API ([`owner`]) that the control socket (protocol and client: the
//! `steward-protocol` crate) and HTTP serve, the parts wired
//! together ([`core`]), the supervisor of the channels (`supervisor`) and the running daemon
//! (`daemon`).
//! The `steward` binary is a thin CLI over this library.

pub(crate) mod agents;
pub(crate) mod allocator;
pub(crate) mod brain;
pub mod channels;
pub mod cli;
pub(crate) mod confirmations;
pub mod core;
pub(crate) mod daemon;
pub(crate) mod disk;
pub(crate) mod dispatcher;
pub(crate) mod faults;
pub(crate) mod instance_lock;
pub(crate) mod logging;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod notify;
pub mod owner;
pub(crate) mod paths;
pub(crate) mod reload;
pub(crate) mod replies;
pub(crate) mod retention;
pub(crate) mod status;
pub mod store;
pub(crate) mod supervisor;
pub(crate) mod text;
pub(crate) mod usage;
pub mod zone;

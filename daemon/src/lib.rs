//! The Steward daemon: the inbox and trajectories ([`store`]), the dispatcher that turns
//! events into steps ([`dispatcher`]), the brain ([`brain`]), channel actors ([`channels`]),
//! the control-socket protocol and its client, and the supervisor that wires them ([`daemon`]).
//! The `steward` binary is a thin CLI over this library.

pub mod brain;
pub mod channels;
pub mod cli;
pub mod client;
pub mod confirmations;
pub mod daemon;
pub mod disk;
pub mod dispatcher;
pub mod faults;
pub mod instance_lock;
pub mod logging;
pub mod mcp;
pub mod notify;
pub mod paths;
pub mod protocol;
pub mod reload;
pub mod replies;
pub mod retention;
pub mod status;
pub mod store;

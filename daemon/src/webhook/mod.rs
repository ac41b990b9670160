//! The webhook channel and the HTTP server it lives in.

pub mod server;
pub mod verify;

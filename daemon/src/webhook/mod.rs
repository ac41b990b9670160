//! The webhook channel and the HTTP server it lives in (webhooks, the owner API, health).

pub mod api;
pub mod metrics;
pub mod server;
pub mod template;
pub mod verify;

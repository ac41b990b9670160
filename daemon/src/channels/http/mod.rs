//! The webhook channel and the HTTP server it lives in (webhooks, the owner API, health).
// Everything here reads outside input (HTTP requests): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod api;
pub mod metrics;
pub mod server;
pub mod template;
pub mod verify;

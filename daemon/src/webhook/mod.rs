//! The webhook channel (in progress): signature verification.

pub mod verify;

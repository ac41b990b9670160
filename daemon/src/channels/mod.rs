//! Channel actors: each turns one kind of outside input into events and submits them to the
//! inbox, acknowledging upstream only once the inbox has them. Only the supervisor spawns
//! them; each listens for shutdown at every await on outside input.

pub mod user;

//! End-to-end tests: the real `steward` binary, a real control socket, temp data dirs.
#![recursion_limit = "256"] // matrix-sdk's sync future is deep
#![allow(clippy::disallowed_types)] // deadlines on real processes are wall-clock time
#![allow(clippy::unwrap_used)] // helpers of tests: a panic is the failure report

mod agents;
mod anthropic;
mod bot_api;
mod budget;
mod chat;
mod cli;
mod confirm;
mod delivery;
mod disk;
mod email;
mod files;
mod http;
mod idle;
mod interop;
mod lifecycle;
mod logs;
mod mail;
mod mail_corpus;
mod matrix;
mod mcp;
mod model;
mod outbox;
mod sandbox;
mod scripted_model;
mod service;
mod shell;
mod skills;
mod steps;
mod support;
mod taint;
mod telegram;
mod timer;
mod todo;
mod tool_search;
mod torture;
mod urgency;
mod watch;
mod web;
mod web_search;
mod webdriver;
mod webhook;

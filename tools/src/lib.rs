//! Steward's tool layer. A tool is a contract declared once, as data ([`ToolContract`]),
//! plus a handler; the [`ToolRegistry`] built from them yields both what the model is shown
//! ([`ToolSpec`]) and what runs. Every call, whoever made it (model, rule, slash command,
//! CLI), goes through the one [`ToolPipeline`], and the runtime — not the caller — decides
//! what runs in parallel ([`partition_batches`]).
//!
//! What exists today: lookup with the disabled check at execution time, argument validation
//! against the JSON Schema (arguments are never rewritten), execution with an
//! [`ExecutionContext`] that carries the step's cancel token and the file roots, the batch
//! scheduler, file tools confined to the roots with read-before-write ([`files`]), the
//! shell command classifier ([`safety`]) and the policy decision ([`policy`]). Wiring safety
//! and policy into the pipeline, the idempotency ledger, confirmation and the result budget
//! are the next stages of the same pipeline.

pub mod args;
mod batch;
pub mod budget;
pub mod builtin;
pub mod confirm;
mod context;
mod contract;
mod error;
pub mod files;
pub mod glob;
mod handler;
pub mod https;
pub mod ledger;
mod pipeline;
pub mod policy;
mod registry;
pub mod safety;
pub mod sandbox;
pub mod search;
pub mod search_usage;
pub mod selection;
pub mod skills;

pub use batch::{MAX_PARALLEL_CALLS, partition_batches};
pub use context::{ExecutionContext, OwnerChannel, OwnerFuture};
pub use contract::{Applies, Concurrency, SideEffect, Tier, ToolContract, ToolSource, ToolSpec};
pub use error::ToolError;
pub use handler::{Safety, ToolFuture, ToolHandler};
pub use pipeline::{Authorization, ToolPipeline};
pub use registry::{Deferral, SearchSetup, ToolRegistry, ToolRegistryBuilder};

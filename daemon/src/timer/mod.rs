//! The timer channel (in progress): schedules and missed-run decisions.

pub mod schedule;

//! This module exists because `lazy_static` causes TSAN to
//! be very unhappy. We rely heavily on TSAN for finding
//! races, so we don't use `lazy_static`.

// Steward's change (see STEWARD.md): built on `std::sync::OnceLock`. sled's own version
// made every thread that found the value being initialised spin on an atomic flag until it
// was done. The thread pool's queue is such a value, and its initialisation starts the pool's
// seven threads, each of which asks for the queue at once: on two cores they spun for ~10 ms
// of the daemon's start, taking the CPU from the thread that was starting them. `OnceLock`
// puts them to sleep until the value is there.
use std::sync::OnceLock;

/// A lazily initialized value
pub struct Lazy<T, F> {
    value: OnceLock<T>,
    init: F,
}

impl<T, F> Lazy<T, F> {
    /// Create a new Lazy
    pub const fn new(init: F) -> Self
    where
        F: Sized,
    {
        Self { value: OnceLock::new(), init }
    }
}

impl<T, F> std::ops::Deref for Lazy<T, F>
where
    F: Fn() -> T,
{
    type Target = T;

    fn deref(&self) -> &T {
        self.value.get_or_init(|| (self.init)())
    }
}

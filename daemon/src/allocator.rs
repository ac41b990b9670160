//! Giving back to the system the memory a burst of work freed.
//!
//! glibc's allocator keeps what the program frees for reuse, and returns pages only from
//! the top of a heap, so after a burst — reading a config of 10,000 jobs, writing them into
//! the store, the timer's first pass over them — the freed pages stay resident for the
//! life of the daemon. Measured on 2026-12-03 (release build, 10,000 `[[cron]]` jobs, 4 s
//! after start): 49.7 MB resident, 34.2 MB after one `malloc_trim(0)`, against 23.4 MB with
//! an empty config. [`release_freed_memory`] asks for those pages back once such a burst is
//! over; it costs a walk of glibc's free lists (about a millisecond), so it is called after
//! bursts, not on a timer. Other C libraries have no such call, and it does nothing there.
//!
//! glibc also gives every thread that allocates while the others hold their arenas an
//! arena of its own, up to eight per core; each keeps its freed pages, so a daemon whose
//! blocking threads come and go (the Matrix store's SQLite calls, the timer's writes)
//! carries a dozen part-filled heaps. [`cap_arenas`] keeps two, one per runtime worker.
//! Measured on 2026-12-04 (release build, `MALLOC_ARENA_MAX` in the environment, which is
//! what the call sets): idle with every channel 38.0 → 37.1–37.5 MB (anonymous 9.7 → 8.8);
//! 10,000 config jobs 32.8 → 30.6 MB (anonymous 15.4 → 14.0); see BENCHMARKS.md for the
//! webhook load with it. A user's own `MALLOC_ARENA_MAX` wins.
//!
//! The workspace denies `unsafe`; this module holds its only exceptions (see the SAFETY notes).

/// Caps the number of allocator arenas at `arenas` — one per runtime worker thread (see the
/// module docs) — unless the environment sets it. Called once, first thing in `steward run`,
/// before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "glibc's mallopt has no safe binding")]
pub(crate) fn cap_arenas(arenas: usize) {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: `mallopt` takes two integers and changes a glibc tunable under its own lock;
    // `M_ARENA_MAX` only bounds how many arenas later allocations may create. Its answer
    // (whether the value was accepted) changes nothing here: the default stays.
    unsafe {
        libc::mallopt(
            libc::M_ARENA_MAX,
            libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX),
        );
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn cap_arenas(_arenas: usize) {}

/// Returns to the system the free pages of every allocator arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "glibc's malloc_trim has no safe binding")]
pub(crate) fn release_freed_memory() {
    // SAFETY: `malloc_trim` takes no pointer and touches only glibc's own free lists, which
    // it locks like any other allocator call; it is safe to call from any thread at any time.
    // Its answer (whether anything was returned) changes nothing here.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_freed_memory() {}

//! Giving back to the system the memory a burst of work freed, and the pages of the
//! daemon's own binary and of its shared libraries that only its start used.
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
//! Most of an idle daemon's resident memory is pages of its own binary, and most of those
//! were mapped by the start: reading the config, setting up TLS, logging in, the first pass
//! over the jobs — code that does not run again. The kernel keeps a page mapped once a
//! process has touched it (and 64 KB around it), so they stayed in the daemon's resident set
//! for its whole life. [`release_code_pages`] unmaps every page of the binary's read-only
//! mappings that was never written; whatever runs afterwards is mapped again on its first
//! use, from the page cache (a minor fault, no disk read while the file is cached). It is
//! called when the start is over — every channel logged in, synced or down, the config's
//! jobs written and passed over (see `daemon.rs`) — and then once a minute, so that what
//! stays resident is the code of the last minute's work; signed webhook deliveries at
//! full load across the minute's release ran as fast as without it. The pages are not freed
//! by this: they stay in the page cache, shared and clean, where the kernel reclaims them
//! before anything a process holds mapped when it needs room. Measured on 2026-12-06
//! (release build, `scripts/ready_and_rss.py`, 3 s after READY, median of 3, two alternated
//! rounds): empty config 16.4 / 16.6 MB resident before, 12.2 / 12.4 MB after; 10,000
//! config jobs 23.4 → 21.2 MB; every channel, after the first minute, 21.6-21.9 → 20.1-20.6
//! MB (its idle loops map most of the code again), and 18.3-18.7 MB with the code laid out
//! idle-first (`scripts/code_layout.py`; see BENCHMARKS.md). Released at the timer's first
//! pass, the start's code stayed mapped through the logins that came after it; released once
//! every channel is up instead, every channel 10 s after READY is 17.9-18.3 MB, not
//! 22.7-22.9 (2026-12-06, thirteenth session). A mapping with any page
//! written (the relocated `.data.rel.ro`, which the loader patched and then made read-only)
//! is left alone: dropping it would bring back the file's unpatched bytes.
//!
//! The shared libraries' code and read-only data (libc, libm, the dynamic loader) are
//! released the same way, for the same reason: the start ran their name lookups, locale,
//! TLS and number-formatting code once, and the kernel kept 64 KB around each page it used.
//! Their pages are shared with every other process that maps those files, so dropping them
//! from this process frees nothing in the page cache; it only stops counting them as the
//! daemon's. Measured on 2026-12-07 (release build, every channel, the mappings dropped from
//! outside with gdb 3 s after READY): the libraries' resident pages 2.2 MB before, 0.3 MB
//! right after, 1.1 MB 10 s and 1.4 MB 30 s later. Any mapping of a file that is private,
//! read-only and holds no written page is dropped by the same rule — what the kernel itself
//! does to such pages under memory pressure — and nothing else: not the loader's relocated
//! data, not shared mappings (the Matrix store's SQLite `-shm` files), not the kernel's
//! `[vdso]`.
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

/// Unmaps the pages of the daemon's binary and shared libraries that nothing wrote (see the
/// module docs); a mapping it cannot read about is left as it is.
#[cfg(target_os = "linux")]
#[expect(unsafe_code, reason = "madvise has no safe binding")]
pub(crate) fn release_code_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for region in unwritten_file_mappings(&smaps) {
        // SAFETY: the range is one whole mapping of a file (the executable, a shared library),
        // private, not writable and with no page written (`Anonymous: 0 kB`), so every page
        // of it is the file's bytes as the page cache holds them. MADV_DONTNEED on such a
        // mapping only removes the page table entries: the next access faults the same bytes
        // back in from the file, so no thread running or reading this code can see anything
        // different — it is what the kernel's own reclaim does to these pages at any time. A
        // file changed in place while mapped would be read the same way by either. A page a
        // debugger or a uprobe patched is a written page, so its mapping is not in the list.
        // The answer (whether the kernel accepted) changes nothing: refused, the pages stay.
        unsafe {
            libc::madvise(
                region.start as *mut libc::c_void,
                region.end - region.start,
                libc::MADV_DONTNEED,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn release_code_pages() {}

/// The address ranges in `smaps` (the text of `/proc/self/smaps`) that map a file privately
/// and read-only with no page written: the ones [`release_code_pages`] may unmap. A file is a
/// path (it starts with `/`); the kernel's own mappings (`[vdso]`, `[heap]`) are not files.
#[cfg(any(target_os = "linux", test))]
fn unwritten_file_mappings(smaps: &str) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    // The mapping whose fields are being read, if it is a read-only private file mapping.
    let mut current: Option<std::ops::Range<usize>> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_header(line) {
            current = range.and_then(|(range, perms, path)| {
                let read_only_private =
                    perms.starts_with('r') && perms.get(1..2) == Some("-") && perms.ends_with('p');
                (read_only_private && path.starts_with('/')).then_some(range)
            });
        } else if let Some(kb) = line.strip_prefix("Anonymous:")
            && let Some(range) = current.take()
            && kb.trim() == "0 kB"
        {
            found.push(range);
        }
    }
    found
}

/// A mapping's header line of smaps (`start-end perms offset dev inode [path]`): `None` for
/// any other line; `Some(None)` for a header whose addresses do not parse.
#[cfg(any(target_os = "linux", test))]
fn mapping_header(line: &str) -> Option<Option<(std::ops::Range<usize>, &str, &str)>> {
    let mut fields = line.splitn(6, ' ');
    let (addresses, perms) = (fields.next()?, fields.next()?);
    let (start, end) = addresses.split_once('-')?;
    if perms.len() != 4 || !start.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let path = fields.nth(3).map_or("", str::trim_start);
    let parsed = usize::from_str_radix(start, 16)
        .ok()
        .zip(usize::from_str_radix(end, 16).ok())
        .filter(|(start, end)| start < end);
    Some(parsed.map(|(start, end)| (start..end, perms, path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shortened smaps of a running daemon: its binary's four mappings (read-only data,
    /// code, the relocated data made read-only, writable data), the heap, libraries' code,
    /// read-only data and written data, a shared file, the kernel's vDSO.
    const SMAPS: &str = "\
55d0c0000000-55d0c03ce000 r--p 00000000 fd:01 1234                       /usr/bin/steward
Rss:                1800 kB
Anonymous:             0 kB
55d0c03ce000-55d0c1f00000 r-xp 003ce000 fd:01 1234                       /usr/bin/steward
Rss:                8600 kB
Anonymous:             0 kB
55d0c1f00000-55d0c2200000 r--p 01f00000 fd:01 1234                       /usr/bin/steward
Rss:                2164 kB
Anonymous:          2164 kB
55d0c2200000-55d0c2210000 rw-p 02200000 fd:01 1234                       /usr/bin/steward
Rss:                  64 kB
Anonymous:            64 kB
55d0c3000000-55d0c3400000 rw-p 00000000 00:00 0                          [heap]
Anonymous:          1284 kB
7f0000000000-7f0000100000 r-xp 00028000 fd:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000100000-7f0000140000 r--p 00128000 fd:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:            16 kB
7f0000140000-7f0000148000 rw-p 00168000 fd:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             8 kB
7f0000150000-7f0000160000 r--p 00000000 fd:01 98                         /usr/lib/x86_64-linux-gnu/libm.so.6
Anonymous:             0 kB
7f0000200000-7f0000208000 rw-s 00000000 fd:01 77                         /data/matrix/state.sqlite3-shm
Anonymous:             0 kB
7f0000300000-7f0000302000 r--s 00000000 fd:01 78                         /data/readonly-shared
Anonymous:             0 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
";

    #[test]
    fn only_unwritten_read_only_private_file_mappings_are_released() {
        assert_eq!(
            unwritten_file_mappings(SMAPS),
            vec![
                // The binary's read-only data and code, not its relocated data.
                0x55d0_c000_0000..0x55d0_c03c_e000,
                0x55d0_c03c_e000..0x55d0_c1f0_0000,
                // libc's code (its partly written read-only data stays), libm's data.
                0x7f00_0000_0000..0x7f00_0010_0000,
                0x7f00_0015_0000..0x7f00_0016_0000,
            ]
        );
        // A path with spaces, and one the binary was replaced under, are files too.
        let spaced =
            "1000-2000 r-xp 00000000 fd:01 7 /opt/my apps/steward (deleted)\nAnonymous: 0 kB\n";
        assert_eq!(unwritten_file_mappings(spaced), vec![0x1000..0x2000]);
    }

    #[test]
    fn lines_that_are_not_mappings_are_no_mappings() {
        for line in [
            "Rss:                1800 kB",
            "VmFlags: rd ex mr mw me dw sd",
            "",
            "zzzz-1000 r-xp 0 fd:01 7 /usr/bin/steward",
        ] {
            assert!(mapping_header(line).is_none(), "{line}");
        }
        assert!(matches!(
            mapping_header("2000-1000 r-xp 0 fd:01 7 /usr/bin/steward"),
            Some(None)
        ));
        let odd = "1000-2000 r-xp 0 fd:01 7 /usr/bin/steward\nAnonymous: 4 kB\n";
        assert!(unwritten_file_mappings(odd).is_empty());
    }

    /// The test binary releases its own code and its libraries' and keeps running them: the
    /// pages come back as they are used, with the same bytes.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_runs_on_after_releasing_its_code() {
        fn file_resident_kb() -> u64 {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let ranges = unwritten_file_mappings(&smaps);
            let mut resident = 0;
            let mut counting = false;
            for line in smaps.lines() {
                if let Some(header) = mapping_header(line) {
                    counting = header.is_some_and(|(range, _, _)| ranges.contains(&range));
                } else if counting && let Some(kb) = line.strip_prefix("Rss:") {
                    resident += kb.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            }
            resident
        }
        let before = file_resident_kb();
        let checksum = |text: &str| {
            text.bytes()
                .fold(0u64, |sum, b| sum.wrapping_mul(31) + u64::from(b))
        };
        let expected = checksum(SMAPS);
        release_code_pages();
        let after = file_resident_kb();
        assert!(
            before > 0,
            "the test binary's code and libraries were resident"
        );
        assert!(
            after < before,
            "released: {before} kB resident before, {after} kB after"
        );
        assert_eq!(
            checksum(SMAPS),
            expected,
            "the binary's bytes read back the same"
        );
        assert_eq!(
            unwritten_file_mappings(SMAPS).len(),
            4,
            "its code and libc's still run"
        );
    }
}

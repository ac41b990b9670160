//! Batch partitioning, a pure function: of the calls one step makes, each run of consecutive
//! concurrency-safe calls forms one parallel batch; every other call is a batch of its own.
//! Order is never changed, so an unsafe call sees the effects of every call before it.

use std::ops::Range;

/// At most this many calls of one batch run at the same time.
pub const MAX_PARALLEL_CALLS: usize = 10;

/// `safe[i]` says whether call `i` may share a batch. Returns the batches as index ranges.
pub fn partition_batches(safe: &[bool]) -> Vec<Range<usize>> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < safe.len() {
        let end = if safe[start] {
            start + safe[start..].iter().take_while(|s| **s).count()
        } else {
            start + 1
        };
        batches.push(start..end);
        start = end;
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one batch is one range, on purpose
    fn partition_table() {
        let (s, u) = (true, false);
        let table: &[(&[bool], &[Range<usize>])] = &[
            (&[], &[]),
            (&[s], &[0..1]),
            (&[u], &[0..1]),
            (&[s, s, s], &[0..3]),
            (&[u, u], &[0..1, 1..2]),
            (&[s, s, u, s, s], &[0..2, 2..3, 3..5]),
            (&[u, s, s, u], &[0..1, 1..3, 3..4]),
            (&[s, u, s], &[0..1, 1..2, 2..3]),
        ];
        for (safe, expected) in table {
            assert_eq!(partition_batches(safe), expected.to_vec(), "{safe:?}");
        }
    }
}

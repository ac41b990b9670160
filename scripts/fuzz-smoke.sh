#!/usr/bin/env bash
# Runs every fuzz target for a while (default 20 s each) from its seed corpus in
# fuzz/corpus/, on a copy so the seeds stay as they are, and prints the executions.
#   scripts/fuzz-smoke.sh            # CI: 20 s per target
#   FUZZ_SECS=600 scripts/fuzz-smoke.sh
# Works on stable Rust through RUSTC_BOOTSTRAP (cargo-fuzz needs -Z flags); without a
# sanitizer (ASan needs nightly's runtime on some machines); panics are what it hunts.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${FUZZ_SECS:-20}
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
cargo fuzz build --sanitizer none -O
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in $(cargo fuzz list); do
    mkdir -p "$work/$target"
    cp -r "corpus/$target/." "$work/$target/"
    log="$work/$target.log"
    if ! cargo fuzz run --sanitizer none -O "$target" "$work/$target" -- \
        -max_total_time="$secs" -max_len=65536 -timeout=10 >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "fuzz target $target failed (artifacts in fuzz/artifacts/$target)" >&2
        exit 1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || true)
    [ -z "$runs" ] && runs=$(grep -oE '#[0-9]+' "$log" | tail -n 1 | tr -d '#')
    echo "$target: ${runs:-?} executions in ${secs}s, no crash"
done

#!/usr/bin/env bash
# Regenerates daemon/code-layout.order, the order in which the linker places the functions a
# running daemon uses (see `order_code_by_use` in daemon/build.rs): builds the release binary,
# starts the loopback mail stack and Synapse, and runs scripts/code_layout.py, which profiles
# the daemon under valgrind with every channel configured. Run it after large changes; a
# stale file costs resident memory, never correctness. Commit the file it writes.
#
#   scripts/code-layout.sh [IDLE_SECS]      # idle time under the profiler, default 30
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
# CARGO_TARGET_DIR is exported so that tests/matrix/synapse.sh finds its venv beside the build.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p steward-daemon --bin steward
tests/mail/stack.sh start
tests/matrix/synapse.sh start
python3 scripts/code_layout.py "$CARGO_TARGET_DIR/release/steward" daemon/code-layout.order "${1:-30}"
echo "rebuild (cargo build --release) to link with the new order"

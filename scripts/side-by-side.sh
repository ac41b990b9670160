#!/usr/bin/env bash
# Steward and ZeroClaw side by side in one run (issue 25): builds ZeroClaw from its public
# repository with its own release profile (fat LTO, opt-level "z", as its Cargo.toml says),
# builds Steward's release binary and the webhook load generator, starts the loopback mail
# stack and Synapse, and runs scripts/side_by_side.py, which prints the table with ratios.
#
#   scripts/side-by-side.sh [RUNS]            # RUNS defaults to 3
#
# ZEROCLAW_SRC: a ZeroClaw checkout (default: cloned into /var/cache/steward-zeroclaw);
# ZEROCLAW_REV: the commit measured (default below: the last one whose declared toolchain,
# Rust 1.87+, this machine's 1.95 satisfies — the next commit raised it to 1.96.1).
# ZeroClaw's lock file pins one git dependency (whatsapp-rust, an optional channel). Where
# github.com is unreachable, clone ZeroClaw from a mirror into ZEROCLAW_SRC first and point
# git at a mirror of that dependency through the environment, for example:
#   GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=url./mirrors/whatsapp-rust.insteadOf \
#   GIT_CONFIG_VALUE_0=https://github.com/oxidezap/whatsapp-rust scripts/side-by-side.sh
# (cargo fetches it with the git command line here, which honours `insteadOf`).
# The ZeroClaw build takes 20–60 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
src=${ZEROCLAW_SRC:-/var/cache/steward-zeroclaw}
rev=${ZEROCLAW_REV:-1bd152cc52}
if [ ! -d "$src/.git" ]; then
    git clone https://github.com/zeroclaw-labs/zeroclaw "$src"
fi
git -C "$src" checkout -q "$rev"
(cd "$src" && CARGO_NET_GIT_FETCH_WITH_CLI=true CARGO_TARGET_DIR="$src/target" \
    cargo build --release --locked --bin zeroclaw)
work=$(mktemp -d)
trap 'rm -r -- "$work"' EXIT
# The daemon as a user builds it, copied before the load generator's build (the bench profile
# with dev-dependency features links its own steward into target/release/steward).
# CARGO_TARGET_DIR is exported so that tests/matrix/synapse.sh finds its venv beside the build.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p steward-daemon
cp "$CARGO_TARGET_DIR/release/steward" "$work/steward"
loadgen=$(cargo bench --no-run -q -p steward-daemon --bench webhook --message-format=json |
    python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "webhook"][-1])')
tests/mail/stack.sh start
tests/matrix/synapse.sh start
python3 scripts/side_by_side.py "$work/steward" "$src/target/release/zeroclaw" "$loadgen" "$runs"

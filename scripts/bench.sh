#!/usr/bin/env bash
# Regenerates the measured part at the top of BENCHMARKS.md: every benchmark run several times
# on this machine (each figure the median of the runs, the range in brackets) with the command
# that produced it, Steward and ZeroClaw side by side with their ratios, and the soak once.
# Everything from the line KEPT (below) to the end of BENCHMARKS.md — what each session
# measured and found, in the order it was found — is kept as it is, so a regeneration never
# loses a finding; the script stops before measuring anything if that line is missing.
#   scripts/bench.sh          # 3 runs of each, the side by side, one soak (~2 h on 2 cores)
#   scripts/bench.sh quick    # one short run of each, the side by side once, a short soak
#   RUNS=5 scripts/bench.sh
# The side by side and the email and matrix benches start the loopback mail stack and Synapse
# themselves; the side by side builds ZeroClaw through scripts/side-by-side.sh (see there
# where github.com is unreachable). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
runs=${RUNS:-3}
args=()
if [ "$mode" = quick ]; then
    runs=1
    args=(-- quick)
fi
KEPT='<!-- Kept by scripts/bench.sh: everything below is the record of what was measured and found, session by session. -->'
if ! grep -qxF -- "$KEPT" BENCHMARKS.md; then
    echo "bench.sh: BENCHMARKS.md has no line '$KEPT'; it would lose the record below the figures" >&2
    exit 1
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p steward-daemon
binary_bytes=$(stat -c %s "$CARGO_TARGET_DIR/release/steward")
work=$(mktemp -d)
trap 'rm -r -- "$work"' EXIT

benches=(
    "steward-daemon foundation ingest throughput and latency, cancel latency, start-up, RSS"
    "steward-daemon brain Steward's own time per model call, peak RSS of a long turn"
    "steward-daemon channels 10,000 scheduled jobs; a burst of 10,000 file changes"
    "steward-daemon webhook signed deliveries/s and latency"
    "steward-daemon email arrival to event, a burst and a backlog of mail, RSS with IMAP idle"
    "steward-daemon matrix message in to event, owner message out to the owner's client, RSS"
    "steward-daemon web the owner's page with 10,000 items, idle RSS with it on and off, SSE fan-out"
    "steward-daemon sandbox what the Landlock sandbox costs per command"
    "steward-tools pipeline tool pipeline overhead, batch speed-up"
    "steward-tools classify shell-command classification speed on the safety corpus"
    "steward-tools search tool search quality (R@k, MRR) and latency on the dev corpora"
)
{
    echo "# Benchmarks"
    echo
    echo "Produced by \`scripts/bench.sh ${mode}\` on $(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD) ($(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(rustc --version))."
    echo "Each figure is the median of ${runs} run(s); [low–high] is the range over the runs (a number"
    echo "without a range was the same in every run). The load generators share the machine's two"
    echo "cores with the daemon. Bench binaries are built with the \`bench\` profile (the release"
    echo "profile with symbols and line tables), so their RSS figures sit a little above the release"
    echo "binary's in the side by side. The record of what each session measured and changed follows"
    echo "the figures."
    echo
    echo "## Side by side with ZeroClaw — start, idle memory with every channel, webhook deliveries"
    echo
    echo "Command: \`scripts/side-by-side.sh ${runs}\` (release binaries; Steward's is ${binary_bytes} bytes)."
    echo "Both daemons run the channels both can run here, the model provider pointed at a closed"
    echo "loopback port (see \`scripts/side_by_side.py\` for each one's configuration). Start to ready"
    echo "is spawn until the webhook port accepts; idle RSS is the daemon's own process 10 s later,"
    echo "and the median of samples every 5 s from 10 s to 130 s (an idle daemon's periodic work moves"
    echo "it: Steward's Matrix sync every 30 s maps code that its once-a-minute release unmapped);"
    echo "the load is the webhook bench's generator at concurrency 64 for 10 s. Steward answers 202"
    echo "once a delivery is durable in its inbox; ZeroClaw answers 200 once it is queued in memory."
    echo
} >"$work/report.md"
echo "running the side by side ($runs run(s))" >&2
scripts/side-by-side.sh "$runs" >>"$work/report.md"

for entry in "${benches[@]}"; do
    read -r package bench what <<<"$entry"
    echo "running $bench ($runs run(s))" >&2
    for i in $(seq "$runs"); do
        cargo bench -q -p "$package" --bench "$bench" "${args[@]}" 2>/dev/null | grep -v '^$' >"$work/$bench.$i.txt"
    done
    {
        echo
        echo "## $bench — $what"
        echo
        echo "Command: \`cargo bench -p $package --bench $bench ${args[*]}\`"
        echo
        echo '```'
        python3 scripts/median_lines.py "$work/$bench".*.txt
        echo '```'
    } >>"$work/report.md"
done
# The soak runs once (it is long, and its figures are a curve, not a point).
echo "running soak (1 run)" >&2
cargo bench -q -p steward-daemon --bench soak "${args[@]}" 2>/dev/null | grep -v '^$' >"$work/soak.txt"
{
    echo
    echo "## soak — a million events through the socket and webhooks with tool calls: RSS and data dir over the run"
    echo
    echo "Command: \`cargo bench -p steward-daemon --bench soak ${args[*]}\` (one run; the per-second curve is in target/soak.csv)"
    echo
    echo '```'
    cat "$work/soak.txt"
    echo '```'
    echo
    awk -v kept="$KEPT" '$0 == kept { found = 1 } found' BENCHMARKS.md
} >>"$work/report.md"
mv "$work/report.md" BENCHMARKS.md

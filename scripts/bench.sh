#!/usr/bin/env bash
# Writes BENCHMARKS.md: every benchmark run several times on this machine, each result the
# median of the runs (the range in brackets), with the command that produced it.
#   scripts/bench.sh          # 3 full runs of each, then one soak (about an hour on 2 cores)
#   scripts/bench.sh quick    # one short run of each (a few minutes)
#   RUNS=5 scripts/bench.sh
# Needs the mail stack (tests/mail/stack.sh; the email benchmark and the idle measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
runs=${RUNS:-3}
args=()
if [ "$mode" = quick ]; then
    runs=1
    args=(-- quick)
fi
tests/mail/stack.sh start
cargo build --release -q -p steward-daemon
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

benches=(
    "steward-daemon foundation ingest throughput and latency, cancel latency, start-up, RSS"
    "steward-daemon brain Steward's own time per model call, peak RSS of a long turn"
    "steward-daemon channels 10,000 scheduled jobs; a burst of 10,000 file changes"
    "steward-daemon webhook signed deliveries/s and latency"
    "steward-daemon email arrival to event, a burst and a backlog of mail, RSS with IMAP idle"
    "steward-tools pipeline tool pipeline overhead, batch speed-up, command classification"
    "steward-tools search tool search quality (R@k, MRR) and latency on the dev corpora"
)
{
    echo "# Benchmarks"
    echo
    echo "Produced by \`scripts/bench.sh ${mode}\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(rustc --version))."
    echo "Each figure is the median of ${runs} run(s); [low–high] is the range over the runs."
    echo "The load generators share the machine's cores with the daemon."
    echo
    echo "## Binary, start-up, idle memory"
    echo
    echo "Command: \`cargo build --release\`, then \`scripts/idle_and_startup.py target/release/steward ${runs}\`."
    echo
    echo '```'
    echo "release binary: $(stat -c %s target/release/steward) bytes"
} >"$work/report.md"
for i in $(seq "$runs"); do
    python3 scripts/idle_and_startup.py target/release/steward 1 >"$work/idle.$i.txt"
done
python3 scripts/median_lines.py "$work"/idle.*.txt >>"$work/report.md"
echo '```' >>"$work/report.md"

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
} >>"$work/report.md"
cp "$work/report.md" BENCHMARKS.md
echo "wrote BENCHMARKS.md" >&2

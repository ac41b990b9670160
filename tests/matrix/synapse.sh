#!/usr/bin/env bash
# A real Matrix homeserver (Synapse, from PyPI) on loopback for the Matrix tests.
#
#   tests/matrix/synapse.sh start            # idempotent: nothing when it already answers
#   tests/matrix/synapse.sh stop
#   tests/matrix/synapse.sh status           # exit 0 when the client API answers
#   tests/matrix/synapse.sh register NAME PASSWORD
#
# Synapse is installed into ${CARGO_TARGET_DIR:-target}/synapse-venv (about 60 s the first
# time), serves the client API at http://127.0.0.1:${STEWARD_SYNAPSE_PORT:-18008} with server name `localhost`, keeps
# its SQLite database in $STEWARD_SYNAPSE_DIR (default /tmp/steward-synapse-PORT), and has its
# rate limits raised so that tests may send bursts. Each test registers its own users.
# STEWARD_SYNAPSE_PORT and STEWARD_SYNAPSE_DIR run a second one (the restart test's own).
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${STEWARD_SYNAPSE_VENV:-${CARGO_TARGET_DIR:-$PWD/target}/synapse-venv}
PORT=${STEWARD_SYNAPSE_PORT:-18008}
DIR=${STEWARD_SYNAPSE_DIR:-/tmp/steward-synapse-$PORT}
URL="http://127.0.0.1:$PORT"

status() { curl -fsS -o /dev/null "$URL/_matrix/client/versions" 2>/dev/null; }

install() {
    if [ -x "$VENV/bin/synctl" ] || [ -x "$VENV/bin/register_new_matrix_user" ]; then
        return 0
    fi
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check matrix-synapse
}

configure() {
    rm -rf "$DIR"
    mkdir -p "$DIR"
    "$VENV/bin/python" -m synapse.app.homeserver --server-name localhost \
        --config-path "$DIR/homeserver.yaml" --data-directory "$DIR" \
        --generate-config --report-stats=no >/dev/null
    "$VENV/bin/python" - "$DIR/homeserver.yaml" "$PORT" <<'PY'
import sys, yaml
path, port = sys.argv[1], int(sys.argv[2])
config = yaml.safe_load(open(path))
config["listeners"] = [{
    "port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
    "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}],
}]
config["trusted_key_servers"] = []
config["suppress_key_server_warning"] = True
burst = {"per_second": 1000, "burst_count": 1000}
for key in ["rc_message", "rc_login", "rc_registration", "rc_joins", "rc_invites",
            "rc_3pid_validation", "rc_admin_redaction", "rc_key_requests"]:
    config[key] = burst if key not in ("rc_login", "rc_joins", "rc_invites") else {
        "address": burst, "account": burst, "failed_attempts": burst,
        "local": burst, "remote": burst, "per_room": burst, "per_user": burst,
        "per_issuer": burst,
    }
config["rc_login"] = {"address": burst, "account": burst, "failed_attempts": burst}
config["rc_joins"] = {"local": burst, "remote": burst}
config["rc_invites"] = {"per_room": burst, "per_user": burst, "per_issuer": burst}
config["log_config"] = None
yaml.safe_dump(config, open(path, "w"))
PY
    sed -i '/^log_config:/d' "$DIR/homeserver.yaml"
}

start() {
    exec 9>"${DIR}.lock"
    flock -w 300 9 || { echo "waited 300 s for ${DIR}.lock" >&2; exit 1; }
    if status; then return 0; fi
    install
    # A stopped instance starts again with its data (the restart test); a new one is set up.
    if [ ! -f "$DIR/homeserver.yaml" ]; then configure; fi
    # Holding none of this shell's descriptors: not the lock (fd 9), or every later start
    # would wait for it, and not the caller's pipes, or a caller reading this script's
    # output would wait for Synapse to exit.
    (
        cd "$DIR"
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        exec setsid "$VENV/bin/python" -m synapse.app.homeserver \
            -c "$DIR/homeserver.yaml" </dev/null >"$DIR/synapse.out" 2>&1
    ) &
    for _ in $(seq 1 300); do
        if status; then return 0; fi
        sleep 0.1
    done
    echo "Synapse did not answer at $URL within 30 s; see $DIR/synapse.out" >&2
    tail -20 "$DIR/synapse.out" >&2
    exit 1
}

stop() {
    pkill -f "synapse.app.homeserver -c $DIR/homeserver.yaml" 2>/dev/null || true
}

register() {
    "$VENV/bin/register_new_matrix_user" -c "$DIR/homeserver.yaml" -u "$1" -p "$2" \
        --no-admin "$URL" >/dev/null
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    register) register "$2" "$3" ;;
    *) echo "usage: $0 start|stop|status|register NAME PASSWORD" >&2; exit 2 ;;
esac

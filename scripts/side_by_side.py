#!/usr/bin/env python3
"""Steward and ZeroClaw side by side, in one run, under the same load scripts.

For each daemon, RUNS times: start it with the channels both can run here configured
(Steward: control socket, HTTP with the web page, a signed webhook route, a cron job, a file
watch, an MCP server over stdio, email IMAP IDLE on the loopback mail stack, Matrix on the
loopback Synapse, Telegram against an unreachable Bot API; ZeroClaw: its gateway, a signed
webhook channel, a cron job, its filesystem channel, the same MCP server, email on the same
mail stack, Telegram — ZeroClaw's Bot API address is fixed, unreachable here — and no
Matrix, which its default build leaves out, and no web dashboard, whose assets its release
build does not contain without its npm build), with the model provider pointed at a closed
loopback port; measure
  - start to ready: spawn until READY=1 (Steward) / until the webhook port accepts (both);
  - idle RSS 10 s after ready (the daemon's own process; MCP children are not counted for
    either), and the median of samples every 5 s from 10 s to 130 s after ready: an idle
    daemon's periodic work (Steward's Matrix sync every 30 s, its code pages released once a
    minute) moves its RSS, and one sample can fall anywhere in that cycle;
  - signed webhook deliveries at concurrency 64 for 10 s, by the load generator of
    `cargo bench -p steward-daemon --bench webhook` in its `external` mode: deliveries/s,
    p50/p99 latency. Steward answers 202 once a delivery is durable in its inbox; ZeroClaw
    answers 200 once the message is queued in memory.
Then print one table of medians (range in brackets) and the ratios Steward / ZeroClaw.

    side_by_side.py STEWARD_BIN ZEROCLAW_BIN LOADGEN_BIN [RUNS]

Needs the loopback mail stack (tests/mail/stack.sh start) and Synapse
(tests/matrix/synapse.sh start). scripts/side-by-side.sh builds both daemons and runs this.
"""
import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STACK = os.environ.get("STEWARD_MAIL_STACK_DIR", "/tmp/steward-mail-stack")
SYNAPSE = "http://127.0.0.1:18008"
SECRET = "side-by-side secret"
CONCURRENCY, LOAD_SECS, IDLE_SECS = 64, 10, 10
IDLE_TRACE_SECS, IDLE_SAMPLE_SECS = 130, 5
CLOSED_PORT = 9  # discard: nothing listens on loopback


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, child, deadline_s=60):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if child.poll() is not None:
            raise RuntimeError(f"daemon exited with {child.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.002)
    raise RuntimeError(f"nothing listened on {port} within {deadline_s}s")


def load(loadgen, url, scheme):
    out = subprocess.run([loadgen, "external", url, scheme, SECRET, str(CONCURRENCY), str(LOAD_SECS)],
                         check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("rate=")][-1]
    return {k: float(v) for k, v in (f.split("=") for f in line.split())}


def idle_rss(pid):
    """RSS IDLE_SECS after ready, then the median of samples every IDLE_SAMPLE_SECS until
    IDLE_TRACE_SECS after ready (the first sample included); the caller has waited IDLE_SECS."""
    first = rss_mb(pid)
    samples = [first]
    for _ in range((IDLE_TRACE_SECS - IDLE_SECS) // IDLE_SAMPLE_SECS):
        time.sleep(IDLE_SAMPLE_SECS)
        samples.append(rss_mb(pid))
    return {"idle_mb": first, "idle_median_mb": statistics.median(samples)}


def stop(child):
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def matrix_user(name):
    subprocess.run([f"{ROOT}/tests/matrix/synapse.sh", "register", name, "side-by-side-pw"],
                   check=True, capture_output=True)
    return f"@{name}:localhost"


def steward_config(watched, user, bot):
    """Steward's config with every channel (see the module docs); the secrets come from the
    environment of `steward_env`."""
    return f"""
[model]
provider = "openai"
base_url = "http://127.0.0.1:{CLOSED_PORT}/v1"
model = "unreachable"

[http]
listen = "127.0.0.1:0"
web = true

[[webhook.routes]]
name = "gh"
auth = "github"
secret_env = "SBS_SECRET"
rate_per_min = 1000000

[[cron]]
name = "brief"
schedule = "0 7 * * *"
text = "brief"

[[watch]]
name = "w"
path = "{watched}"

[[mcp.servers]]
name = "notes"
command = "python3"
args = ["{ROOT}/tests/e2e/mcp_server.py"]

[email]
imap_host = "127.0.0.1"
imap_port = 10993
imap_tls = "implicit"
smtp_host = "127.0.0.1"
smtp_port = 10587
username = "{user}"
password_env = "SBS_MAIL_PASSWORD"
address = "{user}"
ca_file = "{STACK}/cert.pem"

[matrix]
homeserver = "{SYNAPSE}"
user_id = "{bot}"
password_env = "SBS_MATRIX_PASSWORD"
owners = ["@owner:localhost"]
e2ee = true

[telegram]
token_env = "SBS_TELEGRAM_TOKEN"
api_url = "http://127.0.0.1:{CLOSED_PORT}"
owners = [1]
"""


def steward_env(notify_path):
    """The environment `steward_config` expects, with READY=1 sent to `notify_path`."""
    return dict(os.environ, NOTIFY_SOCKET=notify_path, RUST_LOG="error", SBS_SECRET=SECRET,
                SBS_MAIL_PASSWORD="secret", SBS_MATRIX_PASSWORD="side-by-side-pw",
                SBS_TELEGRAM_TOKEN="123:side-by-side")


def steward(binary, loadgen, run):
    """One run of Steward; returns its figures."""
    data = tempfile.mkdtemp(prefix="sbs-steward-")
    watched = tempfile.mkdtemp(prefix="sbs-watched-")
    try:
        user = f"sbs-{os.getpid()}-{run}@example.test"
        bot = matrix_user(f"sbs-steward-{os.getpid()}-{run}")
        config = steward_config(watched, user, bot)
        path = os.path.join(data, "config.toml")
        with open(path, "w") as f:
            f.write(config)
        notify_path = os.path.join(data, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(60)
        env = steward_env(notify_path)
        started = time.monotonic()
        child = subprocess.Popen([binary, "--data-dir", data, "--config", path, "run"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            ready_ms = (time.monotonic() - started) * 1000
            addr_file = os.path.join(data, "http.addr")
            while not os.path.exists(addr_file):
                time.sleep(0.001)
            port = int(open(addr_file).read().rsplit(":", 1)[1])
            wait_port(port, child)
            listening_ms = (time.monotonic() - started) * 1000
            time.sleep(IDLE_SECS)
            idle = idle_rss(child.pid)
            figures = load(loadgen, f"http://127.0.0.1:{port}/hooks/gh", "github")
            return {"ready_ms": ready_ms, "listening_ms": listening_ms, **idle, **figures}
        finally:
            stop(child)
            notify.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(watched, ignore_errors=True)


def zeroclaw(binary, loadgen, run):
    """One run of ZeroClaw; returns its figures."""
    home = tempfile.mkdtemp(prefix="sbs-zeroclaw-")
    watched = tempfile.mkdtemp(prefix="sbs-watched-")
    try:
        user = f"sbs-zc-{os.getpid()}-{run}@example.test"
        gateway, hook = free_port(), free_port()
        config_dir = os.path.join(home, ".zeroclaw")
        os.makedirs(config_dir)
        with open(os.path.join(config_dir, "config.toml"), "w") as f:
            f.write(ZEROCLAW_CONFIG.format(gateway=gateway, hook=hook, secret=SECRET, root=ROOT,
                                           watched=watched, user=user, closed=CLOSED_PORT))
        env = dict(os.environ, HOME=home, ZEROCLAW_CONFIG_DIR=config_dir, RUST_LOG="error",
                   SSL_CERT_FILE=f"{STACK}/cert.pem")
        started = time.monotonic()
        child = subprocess.Popen([binary, "daemon", "--host", "127.0.0.1", "-p", str(gateway)],
                                 env=env, cwd=home, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(home, "stderr.log"), "w"))
        try:
            wait_port(hook, child)
            listening_ms = (time.monotonic() - started) * 1000
            time.sleep(IDLE_SECS)
            idle = idle_rss(child.pid)
            figures = load(loadgen, f"http://127.0.0.1:{hook}/webhook", "zeroclaw")
            return {"ready_ms": float("nan"), "listening_ms": listening_ms, **idle, **figures}
        finally:
            stop(child)
    finally:
        if os.environ.get("SBS_KEEP"):
            print(f"kept {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(watched, ignore_errors=True)


# ZeroClaw's schema (version 3) at the measured commit: a provider, a risk profile, an agent
# that owns the channels, then the channels, a cron job and the MCP server.
ZEROCLAW_CONFIG = """schema_version = 3

[gateway]
host = "127.0.0.1"
port = {gateway}

[providers.models.custom.local]
uri = "http://127.0.0.1:{closed}/v1"
model = "unreachable"
api_key = "none"

[risk_profiles.default]
level = "supervised"

[agents.main]
model_provider = "custom.local"
risk_profile = "default"
channels = ["webhook.bench", "telegram.bot", "email.mail", "filesystem.w"]

[channels.webhook.bench]
enabled = true
port = {hook}
secret = "{secret}"

[channels.telegram.bot]
enabled = true
bot_token = "123:side-by-side"
api_base_url = "http://127.0.0.1:{closed}"

[channels.email.mail]
enabled = true
imap_host = "127.0.0.1"
imap_port = 10993
smtp_host = "127.0.0.1"
smtp_port = 10587
username = "{user}"
password = "secret"
from_address = "{user}"

[channels.filesystem.w]
enabled = true
paths = ["{watched}"]

[cron.brief]
schedule = {{ kind = "cron", expr = "0 7 * * *" }}
prompt = "brief"

[mcp]
enabled = true

[[mcp.servers]]
name = "notes"
command = "python3"
args = ["{root}/tests/e2e/mcp_server.py"]
"""


def median(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def main():
    steward_bin, zeroclaw_bin, loadgen = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    results = {"steward": [], "zeroclaw": []}
    for run in range(runs):
        results["steward"].append(steward(steward_bin, loadgen, run))
        results["zeroclaw"].append(zeroclaw(zeroclaw_bin, loadgen, run))
        print(f"run {run + 1}: {results['steward'][-1]} | {results['zeroclaw'][-1]}", file=sys.stderr)
    rows = [
        ("start to ready (ms)", "listening_ms", "lower"),
        ("idle RSS after 10 s (MB)", "idle_mb", "lower"),
        ("idle RSS, median of 10-130 s (MB)", "idle_median_mb", "lower"),
        ("signed webhook deliveries/s at c=64", "rate", "higher"),
        ("webhook latency p50 (ms)", "p50_ms", "lower"),
        ("webhook latency p99 (ms)", "p99_ms", "lower"),
        ("deliveries not accepted", "errors", "lower"),
    ]
    print(f"| measure ({runs} runs, median [range]) | Steward | ZeroClaw | Steward / ZeroClaw |")
    print("| --- | --- | --- | --- |")
    for label, key, _ in rows:
        cells = []
        for name in ("steward", "zeroclaw"):
            values = [r[key] for r in results[name]]
            cells.append(f"{median(values):.1f} [{min(values):.1f}–{max(values):.1f}]")
        a = median([r[key] for r in results["steward"]])
        b = median([r[key] for r in results["zeroclaw"]])
        ratio = f"{a / b:.2f}" if b else "—"
        print(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    ready = [r["ready_ms"] for r in results["steward"]]
    print(f"\nSteward's READY=1 (every channel started, watches armed): median {median(ready):.1f} ms.")


if __name__ == "__main__":
    main()

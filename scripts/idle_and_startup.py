#!/usr/bin/env python3
"""Start-up time (spawn -> READY=1) and idle RSS of the release binary with every channel
on: the control socket, HTTP with a webhook route, a cron job, a file watch, an MCP server
(tests/e2e/mcp_server.py) and email (the loopback mail stack). Prints one line per run.

    idle_and_startup.py BINARY RUNS
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

binary, runs = sys.argv[1], int(sys.argv[2])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
stack = os.environ.get("STEWARD_MAIL_STACK_DIR", "/tmp/steward-mail-stack")


def rss_kb(pid, field="VmRSS:"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


for run in range(runs):
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as watched:
        user = f"idle-{os.getpid()}-{run}@example.test"
        config = f"""
[http]
listen = "127.0.0.1:0"

[[webhook.routes]]
name = "gh"
auth = "github"
secret_env = "BENCH_SECRET"

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
args = ["{root}/tests/e2e/mcp_server.py"]

[email]
imap_host = "127.0.0.1"
imap_port = 10993
imap_tls = "implicit"
smtp_host = "127.0.0.1"
smtp_port = 10587
username = "{user}"
password_env = "BENCH_MAIL_PASSWORD"
address = "{user}"
ca_file = "{stack}/cert.pem"
"""
        with open(os.path.join(data, "config.toml"), "w") as f:
            f.write(config)
        notify_path = os.path.join(data, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path, RUST_LOG="error",
                   BENCH_SECRET="s", BENCH_MAIL_PASSWORD="secret")
        started = time.monotonic()
        child = subprocess.Popen([binary, "--data-dir", data, "--config", os.path.join(data, "config.toml"), "run"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while b"READY=1" not in notify.recv(4096):
            pass
        ready_ms = (time.monotonic() - started) * 1000
        time.sleep(10)
        idle = rss_kb(child.pid) / 1024
        child.terminate()
        child.wait(timeout=30)
        notify.close()
        print(f"start-up to READY=1: {ready_ms:.1f} ms; idle RSS with every channel on (socket, HTTP+webhook, cron, watch, MCP, email IDLE): {idle:.1f} MB")

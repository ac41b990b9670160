#!/usr/bin/env python3
"""Start to READY=1 and memory of a steward binary with a given config: each run starts it on
a fresh data dir with NOTIFY_SOCKET set, times spawn -> READY=1, reads /proc/PID/smaps_rollup
3 s later, and stops it. Prints one line per run and the medians. Used for the 10,000 config
jobs figure in BENCHMARKS.md and for A/B comparisons of two binaries.

    ready_and_rss.py BINARY CONFIG RUNS [NAME=VALUE ...]   # extra environment for the daemon
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

binary, config, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
extra = dict(arg.split("=", 1) for arg in sys.argv[4:])


def rollup(pid):
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("Rss:", "Anonymous:"):
                fields[parts[0]] = int(parts[1]) / 1024
    return fields


rows = []
for _ in range(runs):
    with tempfile.TemporaryDirectory() as work:
        notify_path = os.path.join(work, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path, RUST_LOG="error", **extra)
        started = time.monotonic()
        child = subprocess.Popen([binary, "--data-dir", os.path.join(work, "data"), "--config", config, "run"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while b"READY=1" not in notify.recv(4096):
            pass
        ready_ms = (time.monotonic() - started) * 1000
        time.sleep(3)
        memory = rollup(child.pid)
        child.terminate()
        child.wait(timeout=30)
        rows.append((ready_ms, memory["Rss:"], memory["Anonymous:"]))
        print("start to READY %.1f ms; RSS %.1f MB (anonymous %.1f MB)" % rows[-1])
print("median of %d: start to READY %.1f ms; RSS %.1f MB (anonymous %.1f MB)"
      % ((len(rows),) + tuple(statistics.median(column) for column in zip(*rows))))

#!/usr/bin/env python3
"""Writes daemon/code-layout.order: the functions a running Steward uses, for the linker to
place together (see `order_code_by_use` in daemon/build.rs for why).

It runs the release binary under valgrind's callgrind with every channel configured (the
config of scripts/side_by_side.py: socket, HTTP with the web page, a signed webhook route,
cron, a watch, an MCP server, email IMAP IDLE, Matrix E2EE, Telegram) and profiles it in
three phases, each dumped on its own: the start (until no channel is starting, and a settling
time after it), idle (before any work, as scripts/side_by_side.py measures idle), and work
(`steward status`, the owner's message over the socket — the model is unreachable, so the
turn fails and says so — and signed webhook deliveries). It keeps the functions
that ran and the binary's symbol table has, in phase order: what idle runs first, then what
work adds, then what only the start ran (most instructions first within each). The daemon
unmaps its code pages once a minute (`release_code_pages` in daemon/src/allocator.rs), so
what an idle daemon maps back is the first part only, not every page the start touched.

    code_layout.py BINARY OUTPUT [IDLE_SECS]

Needs valgrind, the loopback mail stack (tests/mail/stack.sh start) and Synapse
(tests/matrix/synapse.sh start); scripts/code-layout.sh builds the binary and runs this.
"""
import collections
import glob
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side  # noqa: E402  (the every-channel config lives there)

DELIVERIES = 20
# After every channel is up, what the logins leave running (the Matrix channel's first
# exchanges after its first sync) takes seconds under valgrind.
SETTLE_SECS = 30


def deliver(port, n):
    body = ('{"zen": "code layout %d"}' % n).encode()
    signature = hmac.new(side_by_side.SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/gh", data=body, headers={
        "Content-Type": "application/json",
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": f"code-layout-{os.getpid()}-{n}",
        "X-Hub-Signature-256": f"sha256={signature}",
    })
    with urllib.request.urlopen(request, timeout=60) as response:
        if response.status != 202:
            raise RuntimeError(f"webhook delivery answered {response.status}")


def dump(child, profile_path, phase):
    """Writes the counts so far to PROFILE_PATH.N (callgrind numbers its dumps) and zeroes
    them; returns the file written."""
    before = set(glob.glob(profile_path + ".*"))
    subprocess.run(["callgrind_control", "--dump=" + phase, str(child.pid)], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        new = set(glob.glob(profile_path + ".*")) - before
        if new:
            time.sleep(1)  # let callgrind finish writing it
            return new.pop()
        time.sleep(0.2)
    raise RuntimeError(f"callgrind wrote no dump for the {phase} phase")


def wait_settled(binary, data, deadline_s=600):
    """Waits until no channel is starting (under valgrind Matrix's login and first sync take
    a minute or more after READY); Telegram, whose API is unreachable, is in backoff."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        out = subprocess.run([binary, "--data-dir", data, "status", "--json"],
                             capture_output=True, text=True, timeout=600)
        if out.returncode == 0:
            channels = json.loads(out.stdout).get("channels", [])
            if channels and all(c.get("health") != "starting" for c in channels):
                return
        time.sleep(1)
    raise RuntimeError("a channel was still starting after %d s" % deadline_s)


def profile(binary, idle_secs, profile_path):
    """Runs the daemon through its phases; returns their profiles: start, work, idle."""
    data = tempfile.mkdtemp(prefix="layout-steward-")
    watched = tempfile.mkdtemp(prefix="layout-watched-")
    try:
        user = f"layout-{os.getpid()}@example.test"
        bot = side_by_side.matrix_user(f"layout-{os.getpid()}")
        config = os.path.join(data, "config.toml")
        with open(config, "w") as f:
            f.write(side_by_side.steward_config(watched, user, bot))
        notify_path = os.path.join(data, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(600)
        child = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile_path}",
             "--dump-instr=no", "--demangle=no", "--compress-strings=no", "--compress-pos=no",
             binary, "--data-dir", data, "--config", config, "run"],
            env=side_by_side.steward_env(notify_path),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            addr_file = os.path.join(data, "http.addr")
            while not os.path.exists(addr_file):
                time.sleep(0.05)
            port = int(open(addr_file).read().rsplit(":", 1)[1])
            side_by_side.wait_port(port, child, deadline_s=600)
            wait_settled(binary, data)
            time.sleep(SETTLE_SECS)
            start = dump(child, profile_path, "start")
            # Idle before any work, as the side by side measures it: after work the failed
            # turn's retries and the owner's notices of it would be profiled as idle.
            time.sleep(idle_secs)
            idle = dump(child, profile_path, "idle")
            for command in (["status"], ["send", "what is on my calendar today?"]):
                subprocess.run([binary, "--data-dir", data, *command], check=True,
                               stdout=subprocess.DEVNULL, timeout=600)
            for n in range(DELIVERIES):
                deliver(port, n)
            return [start, dump(child, profile_path, "work"), idle]
        finally:
            child.terminate()
            child.wait(timeout=600)
            notify.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(watched, ignore_errors=True)


def instructions_per_function(profile_path):
    """Exclusive instruction counts by (mangled) function name. With --dump-instr=no a cost
    line is `LINE COUNT`; the line after `calls=` is the call's inclusive cost, not counted."""
    cost = collections.Counter()
    function, after_call = None, False
    with open(profile_path) as f:
        for line in f:
            if line.startswith("fn="):
                function = line[3:].strip().split("'")[0]  # `'2`: callgrind's recursion depth
                cost[function] += 0
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if not after_call and function is not None:
                    fields = line.split()
                    if len(fields) >= 2 and fields[1].isdigit():
                        cost[function] += int(fields[1])
                after_call = False
    return cost


def code_symbols(binary):
    out = subprocess.run(["nm", "--defined-only", binary], check=True, capture_output=True,
                         text=True).stdout
    return {fields[2] for fields in (l.split() for l in out.splitlines())
            if len(fields) == 3 and fields[1] in "tTwW"}


def main():
    binary, output = sys.argv[1], sys.argv[2]
    idle_secs = float(sys.argv[3]) if len(sys.argv) > 3 else 30
    with tempfile.TemporaryDirectory() as work:
        profile_path = os.path.join(work, "callgrind.out")
        start, work_phase, idle = (instructions_per_function(path)
                                   for path in profile(binary, idle_secs, profile_path))
    symbols = code_symbols(binary)
    used, placed = [], set()
    for name, phase in (("idle", idle), ("work", work_phase), ("start", start)):
        ran = sorted((f for f in phase if f in symbols and f not in placed),
                     key=lambda f: (-phase[f], f))
        placed.update(ran)
        used.extend(ran)
        print(f"{name}: {len(ran)} functions")
    if not used:
        sys.exit("no function of the profile is in the binary's symbol table (stripped?)")
    with open(output, "w") as f:
        f.write("# The functions a running Steward used with every channel: what idle runs, then\n"
                "# what `steward status`, an owner's message and webhook deliveries add, then what\n"
                "# only the start ran; most instructions first within each.\n"
                "# Written by scripts/code-layout.sh; read by the linker (see daemon/build.rs).\n")
        f.write("".join(name + "\n" for name in used))
    print(f"{len(used)} functions written to {output}")


if __name__ == "__main__":
    main()

"""Bytes written to audit.sqlite3 by N unauthenticated calls to a real daemon.

    .venv/bin/python bench/audit_denials.py                  # 10,000 calls
    .venv/bin/python bench/audit_denials.py --calls 1000

Starts `gpufleet daemon` as its own process under `strace -f -y`, with one user
configured (so every call without a token is denied), sends N `GetInventory`
calls without a token over one channel, stops the daemon (SIGTERM: a clean
stop, so what it writes on the way out is counted too), and sums the bytes of
every write to a file named audit.sqlite3* (the database, its WAL and its
shared-memory file). Prints one JSON object: calls, seconds, audit records,
bytes written to the audit files, bytes per call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from gpufleet.v1 import node_pb2_grpc as pb_grpc  # noqa: E402

# `1234 pwrite64(7</tmp/x/state/audit.sqlite3-wal>, ""..., 4096, 8192) = 4096`
WRITE = re.compile(r"^(?:\[pid\s+\d+\] |\d+\s+)?p?write(?:64|v)?\(\d+<([^>]*)>.*\)\s+=\s+(\d+)$")
CONFIG = """
[[auth.users]]
name = "ada"
role = "admin"
token_sha256 = "{digest}"
"""


def audit_bytes(trace: Path) -> int:
    """Bytes the traced process wrote to audit.sqlite3 and its -wal / -shm files."""
    total = 0
    for line in trace.read_text(errors="replace").splitlines():
        match = WRITE.match(line)
        if match and Path(match.group(1)).name.startswith("audit.sqlite3"):
            total += int(match.group(2))
    return total


def start(workdir: Path) -> subprocess.Popen[bytes]:
    (workdir / "daemon.toml").write_text(CONFIG.format(digest="0" * 64), encoding="utf-8")
    ready = workdir / "ready"
    argv = ["strace", "-f", "-y", "-qq", "-s", "0", "-e", "trace=write,pwrite64,pwritev",
            "-o", str(workdir / "trace"), sys.executable, "-m", "node_daemon", "daemon",
            "--backend", "simulated", "--gpus", "1", "--listen", "127.0.0.1:0",
            "--config", str(workdir / "daemon.toml"), "--state-dir", str(workdir / "state"),
            "--ready-file", str(ready)]  # fmt: skip
    with open(workdir / "daemon.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit((workdir / "daemon.log").read_text())
        time.sleep(0.05)  # another process: nothing to wait on
    return proc


def traced_child(strace_pid: int) -> int:
    """The daemon's pid: the one child of strace."""
    children = Path(f"/proc/{strace_pid}/task/{strace_pid}/children").read_text().split()
    return int(children[0])


def deny(address: str, calls: int) -> float:
    began = time.monotonic()
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        for _ in range(calls):
            try:
                stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc
    return time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufleet-audit-bench-") as tmp:
        workdir = Path(tmp)
        proc = start(workdir)
        address = (workdir / "ready").read_text().strip()
        seconds = deny(address, args.calls)
        os.kill(traced_child(proc.pid), signal.SIGTERM)  # strace would only detach
        proc.wait(60)
        with sqlite3.connect(workdir / "state" / "audit.sqlite3") as db:
            records = db.execute("SELECT COUNT(*) FROM audit").fetchone()[0]
        written = audit_bytes(workdir / "trace")
    result = {
        "calls": args.calls,
        "seconds": round(seconds, 2),
        "audit_records": records,
        "audit_bytes_written": written,
        "bytes_per_call": round(written / args.calls, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

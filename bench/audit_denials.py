"""What N refused calls cost the audit log of a real daemon with JWKS auth.

    .venv/bin/python bench/audit_denials.py                   # 10,000 forged JWTs, new kid/alg each
    .venv/bin/python bench/audit_denials.py --mode none       # no token at all
    .venv/bin/python bench/audit_denials.py --mode nested     # a header nested 2,000 levels deep
    .venv/bin/python bench/audit_denials.py --tree /tmp/before --out before.json
    .venv/bin/python bench/audit_denials.py --smoke           # 200 calls: does it still run?

Starts `gpufleet daemon` as its own process (simulated backend; [auth] with a
JWKS of one Ed25519 key and one static user), under `strace -f -y` where strace
is installed, and sends N `WhoAmI` calls over one channel, each refused:

- `kid-alg`: a JWT whose header names a kid (even calls) or an alg (odd calls)
  never sent before, as an attacker sweeping names would (issue #28, defect 2);
- `nested`: a JWT whose header nests 2,000 arrays (defect 9);
- `none`: no token.

Then one call with a valid JWT (it must still be served), and SIGTERM (a clean
stop: the summaries written on the way out count too). Reports the audit
records added, the growth of audit.sqlite3 and its -wal/-shm on disk from ready
to the end of the calls (and their size once stopped), the bytes of every
write(2) to them (strace), and the growth of the daemon's log; with the machine
and code (bench/machine.py). Prints one JSON
object; `--out FILE` writes it too. `--tree DIR` runs the daemon from another
checkout (e.g. `git worktree add /tmp/before <commit>`), for a before/after.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
from machine import code_version, run_header
from results import print_report

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from gpufleet.v1 import node_pb2_grpc as pb_grpc  # noqa: E402
from tests.node_daemon.jwt_mint import Issuer, b64, claims, forged_kid_or_alg, part  # noqa: E402

# `1234 pwrite64(7</tmp/x/state/audit.sqlite3-wal>, ""..., 4096, 8192) = 4096`
WRITE = re.compile(r"^(?:\[pid\s+\d+\] |\d+\s+)?p?write(?:64|v)?\(\d+<([^>]*)>.*\)\s+=\s+(\d+)$")
CONFIG = """[auth]
jwks_file = "{jwks}"

[[auth.users]]
name = "ada"
role = "admin"
token_sha256 = "{digest}"
"""
FAKE_SIGNATURE = b64(b"x" * 64)


def forged_kid_alg(n: int) -> str:
    """A kid (even n) or an alg (odd n) no one has sent before: each a new refusal text."""
    return forged_kid_or_alg(n, claims("mallory", "admin"))


def forged_nested(_n: int) -> str:
    header = b'{"alg": "EdDSA", "x": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    return f"{b64(header)}.{part(claims('mallory', 'admin'))}.{FAKE_SIGNATURE}"


MODES: dict[str, Callable[[int], str] | None] = {
    "kid-alg": forged_kid_alg,
    "nested": forged_nested,
    "none": None,
}


def audit_files(state: Path) -> int:
    """Bytes on disk of audit.sqlite3 and its -wal / -shm files."""
    return sum(p.stat().st_size for p in state.glob("audit.sqlite3*"))


def written_to_audit(trace: Path) -> int:
    """Bytes the traced process wrote to audit.sqlite3 and its -wal / -shm files."""
    total = 0
    for line in trace.read_text(errors="replace").splitlines():
        match = WRITE.match(line)
        if match and Path(match.group(1)).name.startswith("audit.sqlite3"):
            total += int(match.group(2))
    return total


def start(workdir: Path, tree: Path, issuer: Issuer, traced: bool) -> subprocess.Popen[bytes]:
    jwks = issuer.write_jwks(workdir / "jwks.json")
    config = CONFIG.format(jwks=jwks, digest="0" * 64)
    (workdir / "daemon.toml").write_text(config, encoding="utf-8")
    daemon = [sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
              "--gpus", "1", "--listen", "127.0.0.1:0", "--config", str(workdir / "daemon.toml"),
              "--state-dir", str(workdir / "state"),
              "--ready-file", str(workdir / "ready")]  # fmt: skip
    strace = ["strace", "-f", "-y", "-qq", "-s", "0", "-e", "trace=write,pwrite64,pwritev",
              "-o", str(workdir / "trace")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with open(workdir / "daemon.log", "ab") as log:
        # A session of its own: whatever goes wrong, its process group is ours to end.
        proc = subprocess.Popen((strace if traced else []) + daemon, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tree, env=env,
                                start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (workdir / "ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc, traced)
            raise SystemExit((workdir / "daemon.log").read_text())
        time.sleep(0.05)  # another process: nothing to wait on but its ready file
    return proc


def stop(proc: subprocess.Popen[bytes], traced: bool) -> None:
    """SIGTERM to the daemon (a clean stop; strace itself would only detach); past a
    minute, or if it never got that far, SIGKILL to the process group it leads."""
    if proc.poll() is not None:
        return
    tasks = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    daemon = tasks.read_text().split()[:1] if traced else [str(proc.pid)]
    if daemon:
        os.kill(int(daemon[0]), signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)


def refuse(
    stub: pb_grpc.NodeServiceStub, calls: int, token_for: Callable[[int], str] | None
) -> tuple[float, dict[str, int]]:
    """Seconds for the calls, and how many got each status (UNAUTHENTICATED, we hope)."""
    answers: Counter[str] = Counter()
    began = time.monotonic()
    for n in range(calls):
        metadata = () if token_for is None else (("authorization", f"Bearer {token_for(n)}"),)
        try:
            stub.WhoAmI(pb.WhoAmIRequest(), timeout=10, metadata=metadata)
        except grpc.RpcError as exc:
            answers[exc.code().name] += 1
        else:
            raise AssertionError(f"refused call {n} was served")
    return time.monotonic() - began, dict(answers)


def audit_records(state: Path) -> int:
    with sqlite3.connect(state / "audit.sqlite3") as db:
        return int(db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def run(calls: int, mode: str, tree: Path, traced: bool) -> dict[str, object]:
    issuer = Issuer()
    with tempfile.TemporaryDirectory(prefix="gpufleet-audit-bench-") as tmp:
        workdir = Path(tmp)
        state, log = workdir / "state", workdir / "daemon.log"
        proc = start(workdir, tree, issuer, traced)
        try:
            records_at_ready, bytes_at_ready = audit_records(state), audit_files(state)
            log_at_ready = log.stat().st_size
            with grpc.insecure_channel((workdir / "ready").read_text().strip()) as channel:
                stub = pb_grpc.NodeServiceStub(channel)
                seconds, answers = refuse(stub, calls, MODES[mode])
                bytes_after_calls = audit_files(state)
                valid = (("authorization", f"Bearer {issuer.mint(claims('alice', 'viewer'))}"),)
                reply = stub.WhoAmI(pb.WhoAmIRequest(), timeout=10, metadata=valid)
        finally:
            stop(proc, traced)
        return {
            "mode": mode,
            "calls": calls,
            "seconds": round(seconds, 2),
            "answers": answers,
            "valid_call_served_after": reply.user == "alice",
            "audit_records_added": audit_records(state) - records_at_ready,
            # While it ran (the WAL included), and once stopped (checkpointed: the
            # database alone, with the summaries written at stop).
            "audit_growth_bytes": bytes_after_calls - bytes_at_ready,
            "audit_on_disk_bytes": {
                "ready": bytes_at_ready,
                "after_calls": bytes_after_calls,
                "stopped": audit_files(state),
            },
            "audit_bytes_written": written_to_audit(workdir / "trace") if traced else None,
            "daemon_log_growth_bytes": log.stat().st_size - log_at_ready,
            "traced_with_strace": traced,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--mode", choices=sorted(MODES), default="kid-alg")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout the daemon runs from")
    parser.add_argument("--no-strace", action="store_true", help="skip counting write(2) bytes")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="200 calls: does it still run?")
    args = parser.parse_args()
    traced = not args.no_strace and shutil.which("strace") is not None
    tree = args.tree.resolve()
    result = run(200 if args.smoke else args.calls, args.mode, tree, traced)
    report = {**run_header(sys.argv), "code": code_version(tree), "result": result}
    print_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

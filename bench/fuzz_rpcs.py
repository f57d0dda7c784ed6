"""Fuzz every RPC of a real daemon with N hostile requests and count the answers.

    .venv/bin/python bench/fuzz_rpcs.py                    # 10,000 requests
    .venv/bin/python bench/fuzz_rpcs.py --requests 50000   # more
    .venv/bin/python bench/fuzz_rpcs.py --smoke            # 200: does it still run?

The generators and the rules are those of tests/node_daemon/test_fuzz.py: hypothesis
builds each request with hostile values, or garbage bytes, or hostile credentials, and
sends it to an in-process daemon (simulated backend, 2 GPUs, tokens for an admin, an
operator and a viewer). Every answer must be a clear status (never UNKNOWN or INTERNAL;
undecodable bytes get INVALID_ARGUMENT), a rejected call must change nothing but the audit log,
and after the run the daemon must still serve, sweep, log no error and hold an intact
audit chain. One open daemon bug is tolerated, and counted apart: the client losing an
error message too long once percent-encoded (LOST_DETAILS in tests/node_daemon/test_fuzz.py).

Prints a table of status codes per RPC and writes it, with the machine, to
bench/results/fuzz.md (`--out`; --smoke writes nothing unless given --out).
Exit status 1 when a rule broke.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the generators live in tests/node_daemon/test_fuzz.py

import grpc  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from machine import code_version, describe_machine  # noqa: E402

from tests.node_daemon.test_fuzz import (  # noqa: E402
    BEARERS,
    DECODE_FAILED,
    METHODS,
    REQUESTS,
    STREAM_REFUSED,
    STREAMS,
    FuzzTarget,
    Outcome,
    lost_details,
    parse,
    raw_payloads,
    safe_to_send,
    start_fuzz_daemon,
)

# Who sends what, as shares of each RPC's requests.
MODES: dict[str, float] = {
    "admin": 0.55,  # typed, past every role check
    "operator": 0.10,  # typed, ownership checks
    "viewer": 0.10,  # typed, role checks
    "raw": 0.20,  # garbage bytes as the serialized request (admin token)
    "credentials": 0.05,  # hostile authorization metadata
}
USERS = {"admin": "ada", "operator": "otto", "viewer": "vera"}
SMOKE_REQUESTS = 200
LOST_LABEL = "RESOURCE_EXHAUSTED (long details, open bug)"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "fuzz.md"


@dataclass
class Tally:
    codes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    modes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    violations: Counter[str] = field(default_factory=Counter)
    violation_example: dict[str, str] = field(default_factory=dict)
    sent: int = 0

    def violation(self, what: str, example: str) -> None:
        self.violations[what] += 1
        self.violation_example.setdefault(what, example)

    def add(self, method: str, mode: str, outcome: Outcome, label: str) -> None:
        self.codes[method][label] += 1
        self.modes[mode][label] += 1
        self.sent += 1


def label_of(method: str, outcome: Outcome) -> str:
    undecodable = outcome.details.startswith(DECODE_FAILED)
    if outcome.code == grpc.StatusCode.INVALID_ARGUMENT and undecodable:
        return "INVALID_ARGUMENT (undecodable)"
    if outcome.code == grpc.StatusCode.DEADLINE_EXCEEDED and method in STREAMS:
        return "DEADLINE (stream waiting)"
    if outcome.details.startswith(STREAM_REFUSED):
        return "RESOURCE_EXHAUSTED (max_streams)"
    if outcome.details.startswith("received metadata size exceeds"):
        return "RESOURCE_EXHAUSTED (metadata)"
    if lost_details(outcome):
        return LOST_LABEL
    if outcome.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in outcome.details:
        return "RESOURCE_EXHAUSTED (message size)"
    return outcome.code.name


def shorten(value: Any, limit: int = 300) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def plan(total: int, methods: tuple[str, ...] = METHODS) -> list[tuple[str, str, int]]:
    """(method, mode, count) adding up to `total`, spread evenly over the RPCs."""
    cells = [(m, mode) for m in methods for mode in MODES]
    weights = [MODES[mode] / len(methods) for _, mode in cells]
    counts = [int(total * w) for w in weights]
    for i in sorted(range(len(cells)), key=lambda i: -(total * weights[i] - counts[i])):
        if sum(counts) >= total:
            break
        counts[i] += 1
    return [(m, mode, n) for (m, mode), n in zip(cells, counts, strict=True) if n]


def drive(strategy: st.SearchStrategy[Any], count: int, send: Callable[[Any], bool],
          rng_seed: int | None) -> int:  # fmt: skip
    """Draw from `strategy` until `send` accepted `count` values (hypothesis may run out
    of new values of a small strategy in one run: then it runs again)."""
    sent, idle_runs = 0, 0
    while sent < count and idle_runs < 3:
        before = sent

        @settings(max_examples=count - sent, database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(strategy)
        def run(value: Any) -> None:
            nonlocal sent
            if sent < count and send(value):
                sent += 1

        if rng_seed is not None:
            run = seed(rng_seed + sent)(run)
        run()
        idle_runs = idle_runs + 1 if sent == before else 0
    return sent


def fuzz(target: FuzzTarget, total: int, rng_seed: int | None,
         methods: tuple[str, ...] = METHODS) -> Tally:  # fmt: skip
    tally = Tally()
    for method, mode, count in plan(total, methods):

        def send(value: Any, method: str = method, mode: str = mode) -> bool:
            try:
                if mode == "raw":
                    if not safe_to_send(method, parse(method, value)):
                        return False
                    outcome = target.raw(method, value, USERS["admin"])
                elif mode == "credentials":
                    request, authorization = value
                    outcome = target.credentials(method, request, authorization)
                else:
                    outcome = target.typed(method, value, USERS[mode])
            except AssertionError as exc:
                tally.violation(f"{method} ({mode}): {shorten(exc, 300)}", shorten(value))
                tally.add(method, mode, Outcome(grpc.StatusCode.UNKNOWN, ""), "VIOLATION")
                return True
            tally.add(method, mode, outcome, label_of(method, outcome))
            return True

        strategy: st.SearchStrategy[Any]
        if mode == "raw":
            strategy = raw_payloads(method)
        elif mode == "credentials":
            strategy = st.tuples(REQUESTS[method], BEARERS)
        else:
            strategy = REQUESTS[method]
        started = time.monotonic()
        done = drive(strategy, count, send, rng_seed)
        print(f"  {method:<18} {mode:<11} {done:>6} in {time.monotonic() - started:6.1f} s",
              flush=True)  # fmt: skip
    return tally


def columns(tally: Tally) -> list[str]:
    seen = Counter[str]()
    for counts in tally.codes.values():
        seen.update(counts)
    return [label for label, _ in seen.most_common()]


def table(rows: dict[str, Counter[str]], labels: list[str], first: str) -> list[str]:
    head = f"| {first} | " + " | ".join(labels) + " | total |"
    lines = [head, "|" + " --- |" * (len(labels) + 2)]
    for name, counts in rows.items():
        cells = " | ".join(str(counts.get(label, 0)) for label in labels)
        lines.append(f"| {name} | {cells} | {sum(counts.values())} |")
    totals = Counter[str]()
    for counts in rows.values():
        totals.update(counts)
    cells = " | ".join(str(totals.get(label, 0)) for label in labels)
    lines.append(f"| **all** | {cells} | **{sum(totals.values())}** |")
    return lines


def report(tally: Tally, target: FuzzTarget, seconds: float, alive: str, args: Any) -> str:
    labels = columns(tally)
    machine = describe_machine()
    version = code_version(ROOT)
    audit_bytes = sum(p.stat().st_size for p in target.daemon.audit.path.parent.glob("audit*"))
    lines = [
        "# Fuzzing every RPC (bench/fuzz_rpcs.py)",
        "",
        f"{tally.sent:,} hostile requests to the {len(METHODS)} RPCs of gpufleet.v1.NodeService "
        f"in {seconds:.0f} s ({tally.sent / seconds:.0f} requests/s), "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, `{' '.join(args)}`.",
        "",
        f"- Rules broken: **{sum(tally.violations.values())}**"
        + (" (listed below)" if tally.violations else " (none)"),
        f"- After the run: {alive}",
        f"- Open daemon bug tolerated (`{LOST_LABEL}`, pinned by a strict xfail in "
        f"tests/node_daemon/test_fuzz.py): {sum(c[LOST_LABEL] for c in tally.codes.values())}",
        f"- Audit log after the run: {audit_bytes / 1e6:.1f} MB; largest record written "
        f"(target + params): {target.biggest_audit_record:,} characters",
        "",
        "Modes: admin / operator / viewer = typed requests with that user's token; raw = "
        "garbage or mutated bytes as the serialized request (admin token); credentials = "
        "hostile `authorization` metadata. `INVALID_ARGUMENT (undecodable)` is the daemon's "
        "answer to bytes that do not parse (node_daemon/rpc/guard.py); `DEADLINE "
        "(stream waiting)` a stream with nothing to send within "
        "0.2 s (e.g. events after a seq not yet reached). RESOURCE_EXHAUSTED comes in "
        "kinds: from gRPC itself, `(message size)` a request over 4 MiB and `(metadata)` "
        "request metadata over the server's 8 KiB soft limit (a huge bearer token); from "
        "the daemon, `(max_streams)` a stream beyond the streams it serves at once; `(long "
        "details, open bug)` the daemon's error message, cut at 1,000 characters but over "
        "the client's 8 KiB once percent-encoded, dropped by the client (the daemon's own "
        "code is in the audit log).",
        "",
        "## Status codes per RPC",
        "",
        *table(dict(sorted(tally.codes.items())), labels, "RPC"),
        "",
        "## Status codes per mode",
        "",
        *table(dict(tally.modes), labels, "mode"),
        "",
    ]
    if tally.violations:
        lines += ["## Rules broken", ""]
        for what, count in tally.violations.most_common(50):
            lines.append(f"- {count} x {what}; first request: {tally.violation_example[what]}")
        lines.append("")
    lines += [
        "## Machine",
        "",
        f"- CPU: {machine['cpu_model']} ({machine['nproc']} usable of {machine['cpu_count']})",
        f"- memory: {machine['memory_gib']} GiB; kernel {machine['kernel']}; "
        f"Python {machine['python']}",
        f"- packages: {', '.join(f'{k} {v}' for k, v in machine['packages'].items() if v)}",  # type: ignore[attr-defined]
        f"- commit: {version['commit']}"
        + (f" with changes in {len(version['changed'])} files" if version["changed"] else ""),  # type: ignore[arg-type]
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="how many (10,000)")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_REQUESTS} requests")
    parser.add_argument("--seed", type=int, help="hypothesis seed, to repeat a run")
    parser.add_argument("--out", type=Path, help=f"markdown results ({DEFAULT_OUT})")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS, metavar="RPC",
                        help="only these RPCs (default: all)")  # fmt: skip
    args = parser.parse_args(argv)
    total = SMOKE_REQUESTS if args.smoke else args.requests
    out = args.out or (None if args.smoke else DEFAULT_OUT)
    logging.basicConfig(level=logging.CRITICAL)  # the daemon's own logging: quiet

    with tempfile.TemporaryDirectory(prefix="gpufleet-fuzz-") as state:
        daemon = start_fuzz_daemon(Path(state))
        target = FuzzTarget(daemon)
        try:
            print(f"fuzzing {total:,} requests against {daemon.address}", flush=True)
            started = time.monotonic()
            tally = fuzz(target, total, args.seed, tuple(args.methods))
            seconds = time.monotonic() - started
            try:
                target.assert_serving()
                alive = (
                    "the daemon answers GetInventory, health is SERVING, the sampler "
                    "still sweeps, nothing was logged at ERROR, the audit chain verifies"
                )
            except AssertionError as exc:
                alive = f"**FAILED**: {shorten(exc, 400)}"
                tally.violation(f"after the run: {shorten(exc, 400)}", "")
            text = report(tally, target, seconds, alive, ["bench/fuzz_rpcs.py", *argv])
        finally:
            target.close()
            daemon.stop(grace_s=0.5)

    print()
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"written to {out}")
    return 1 if tally.violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Benchmark: the daemon's CPU and memory, 8 GPUs at 1 Hz, streaming to 1, 10 and 50 subscribers.

    .venv/bin/python bench/daemon_streams.py [--seconds 60] [--subscribers 0 1 10 50]
                                             [--backends nvml simulated] [--rounds 3]
                                             [--warmup 5] [--profile auto|always|never]
                                             [--out FILE.json] [--md FILE.md]
                                             [--baseline EARLIER.json]
    .venv/bin/python bench/daemon_streams.py --smoke    # seconds; no markdown written

The daemon runs as a real process (``python -m node_daemon daemon --backend B
--gpus 8 --interval 1 --listen 127.0.0.1:0 ...``), with the NVML backend against
the fake ``libnvidia-ml.so.1`` (tests/fake_nvml; 8 GPUs, 3 live processes each,
found through ``LD_LIBRARY_PATH`` / ``FAKE_NVML_STATE``: the real ctypes path)
and with the simulated backend. Another process holds K subscribers
(bench/daemon_streams_subscribers.py): each its own gRPC channel with a sample
stream and an event stream, as a console holds. Each console takes two of the
daemon's ``max_streams`` slots (default 64), so the daemon gets a config file
raising it to 2 x the largest K (``[daemon] max_streams``) in every run alike.

For each backend and K, a fresh daemon: subscribers connect, ``--warmup``
seconds pass, then the window is measured: the daemon's CPU from
/proc/PID/stat (utime + stime delta / wall, 100 % = one core), per thread
(Python thread names from ``py-spy dump`` where py-spy is available), its RSS
and peak RSS from /proc/PID/status, and the subscriber process's CPU apart (it
is not the daemon's cost). ``--seconds`` is split over ``--rounds`` rounds; the
order of K rotates from round to round and medians are reported.

Goal (issue "Fleet scale and speed"): at most 1 % of a core at 10 subscribers.
If it is missed, py-spy profiles the daemon at 10 subscribers (``--profile``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import daemon_streams_report
from daemon_streams_procs import (
    BenchProcessError,
    DaemonProcess,
    DaemonSpec,
    SubscriberProcess,
    cpu_pct_by_group,
    memory_mib,
    read_process,
)
from daemon_streams_profile import find_py_spy, record, summarize, thread_names
from daemon_streams_report import GOAL_PCT, GOAL_SUBSCRIBERS, aggregate
from machine import code_version, cpu_seconds, describe_machine
from nvml_sweep_fake import ROOT, FakeNvml, FakeNvmlError, fake_node
from nvml_sweep_venv import DEFAULT_VENV
from results import measure_and_write

from node_daemon.sampling.sample_ring import RingEntry, SampleRing

DEFAULT_MD = Path(__file__).resolve().parent / "results" / "daemon_streams.md"
# What stops a run before it measures anything: the fake library, a child process.
CANNOT_MEASURE = (FakeNvmlError, BenchProcessError)
SMOKE = {
    "seconds": 3.0,
    "warmup": 1.0,
    "rounds": 1,
    "subscribers": [0, 2],
    "samples_only": [],
    "profile": "never",
}
PROCESSES_PER_GPU = 3
PROFILE_RATE = 1000


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--seconds", type=float, default=60.0, help="measured seconds per backend and K")
    arg("--rounds", type=int, default=3, help="split --seconds into this many windows")
    arg("--warmup", type=float, default=5.0, help="seconds after connecting, not measured")
    arg("--subscribers", type=int, nargs="+", default=[0, 1, 10, 50], help="values of K")
    arg("--backends", nargs="+", default=["nvml", "simulated"], choices=["nvml", "simulated"])
    arg("--gpus", type=int, default=8)
    arg("--interval", type=float, default=1.0, help="the daemon's sampling tick (s)")
    arg("--no-events", dest="events", action="store_false", help="sample streams only")
    arg("--samples-only", type=int, nargs="*", default=[50], metavar="K",
        help="also measure these K with sample streams only (what event streams cost)")  # fmt: skip
    arg("--profile", choices=["auto", "always", "never"], default="auto",
        help="py-spy profile at 10 subscribers: when the goal is missed (auto)")  # fmt: skip
    arg("--profile-seconds", type=float, default=30.0)
    arg("--venv", type=Path, default=DEFAULT_VENV, help="where py-spy is installed if missing")
    arg("--baseline", type=Path, metavar="FILE.json",
        help="an earlier result (--out) to show beside this one")  # fmt: skip
    arg("--smoke", action="store_true", help="tiny: does it all still run?")
    arg("--out", type=Path, metavar="FILE.json", help="write the result as JSON")
    arg("--md", type=Path, metavar="FILE.md",
        help=f"markdown report (default {DEFAULT_MD}; none with --smoke)")  # fmt: skip
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    return args


@dataclass(frozen=True)
class Load:
    """K subscribers, each with a sample stream and, if `events`, an event stream."""

    subscribers: int
    events: bool

    @property
    def label(self) -> str:
        return f"{self.subscribers}" + ("" if self.events or not self.subscribers else "s")


def loads(args: argparse.Namespace) -> list[Load]:
    """Every K as asked, then the sample-stream-only comparisons."""
    extra = [Load(k, False) for k in args.samples_only if args.events and k]
    return [Load(k, args.events) for k in args.subscribers] + extra


def max_streams(args: argparse.Namespace) -> int:
    per_subscriber = 2 if args.events else 1
    return max(64, per_subscriber * max(args.subscribers))


def daemon_spec(args: argparse.Namespace, backend: str, fake: FakeNvml | None) -> DaemonSpec:
    env = fake.env() if backend == "nvml" and fake is not None else None
    return DaemonSpec(backend, args.gpus, args.interval, max_streams(args), env)


# ---------------------------------------------------------------- one measured case


def batches_in_window(stats: dict[str, object], start: float, end: float) -> list[int]:
    """Sample batches each subscriber received between two wall-clock times."""
    subscribers = stats.get("subscribers", [])
    assert isinstance(subscribers, list)
    return [sum(1 for t in sub["batch_times"] if start <= t < end) for sub in subscribers]


def subscriber_summary(stats: dict[str, object], start: float, end: float) -> dict[str, object]:
    subscribers = stats.get("subscribers", [])
    assert isinstance(subscribers, list)
    counts = batches_in_window(stats, start, end)
    batches = sum(len(sub["batch_times"]) for sub in subscribers)
    payload = sum(int(sub["batch_bytes"]) for sub in subscribers)
    return {
        "batches_min": min(counts, default=0),
        "batches_median": statistics.median(counts) if counts else 0,
        "events_received": sum(int(sub["events"]) for sub in subscribers),
        "errors": [e for sub in subscribers for e in sub["errors"]],
        "batch_bytes_mean": round(payload / batches) if batches else 0,
    }


def measure_case(
    spec: DaemonSpec,
    load: Load,
    args: argparse.Namespace,
    window_s: float,
    py_spy: Path | None,
    workdir: Path,
) -> dict[str, object]:
    """A fresh daemon, K subscribers, warm-up, then one measured window."""
    subscribers = load.subscribers
    with ExitStack() as stack:
        daemon = stack.enter_context(DaemonProcess(spec, workdir))
        address = daemon.start()
        subs = stack.enter_context(SubscriberProcess(workdir))
        if subscribers:
            subs.start(address, subscribers, load.events)
        names = thread_names(py_spy, daemon.pid) if py_spy else {}
        time.sleep(args.warmup)
        start, wall_start = read_process(daemon.pid), time.time()
        subs_start = cpu_seconds(subs.pid) if subscribers else 0.0
        time.sleep(window_s)
        end, wall_end = read_process(daemon.pid), time.time()
        subs_end = cpu_seconds(subs.pid) if subscribers else 0.0
        memory = memory_mib(daemon.pid)
        stats = subs.stop() if subscribers else {}
    elapsed = end.at - start.at
    return {
        "backend": spec.backend,
        "subscribers": subscribers,
        "events": load.events,
        "window_s": round(elapsed, 2),
        "daemon_cpu_pct": round(100 * (end.cpu_s - start.cpu_s) / elapsed, 3),
        "subscribers_cpu_pct": round(100 * (subs_end - subs_start) / elapsed, 3),
        "daemon_memory_mib": memory,
        "daemon_threads": len(end.threads),
        "thread_cpu_pct": cpu_pct_by_group(start, end, names),
        "expected_batches": round(elapsed / spec.interval_s),
        **(subscriber_summary(stats, wall_start, wall_end) if subscribers else {}),
    }


def measure_with_retry(
    measure: Callable[[Path], dict[str, object]], workdir: Path
) -> dict[str, object]:
    """`measure(workdir)`, once more in a fresh directory if the daemon or subscribers failed.

    On a shared machine a start can fail for reasons of the moment; a second
    failure is real and ends the run.
    """
    try:
        return measure(workdir)
    except BenchProcessError as exc:
        print(f"daemon_streams: retrying once: {exc}", file=sys.stderr)
        return measure(workdir.with_name(workdir.name + "-retry"))


# ---------------------------------------------------------------- what a wake of a stream costs


def history_wake_us(entries: int, number: int = 2000) -> float:
    """µs of one SampleRing.wait_after() that finds one new batch among `entries`.

    Every sample stream calls it once per tick.
    """
    history = SampleRing(max(entries, 1))
    payload = bytes(1200)
    for tick in range(1, entries + 1):
        history.append(RingEntry(tick * 1000, tick, payload))
    seconds = min(timeit.repeat(lambda: history.wait_after(entries - 1, 0.0), number=number))
    return round(seconds / number * 1e6, 2)


def history_scan(interval_s: float, smoke: bool) -> dict[str, object]:
    full = round(3600 / interval_s)  # the daemon keeps an hour at least (history_seconds)
    number = 100 if smoke else 2000
    return {
        "entries_full": full,
        "us_per_wake": {str(n): history_wake_us(n, number) for n in (60, 600, full)},
    }


# ---------------------------------------------------------------- profile


def profile_case(
    spec: DaemonSpec, args: argparse.Namespace, workdir: Path, py_spy: Path
) -> dict[str, object]:
    """py-spy record of the daemon with 10 subscribers."""
    with DaemonProcess(spec, workdir) as daemon, SubscriberProcess(workdir) as subs:
        subs.start(daemon.start(), GOAL_SUBSCRIBERS, args.events)
        names = thread_names(py_spy, daemon.pid)
        time.sleep(args.warmup)
        out = workdir / "profile.txt"
        error = record(py_spy, daemon.pid, args.profile_seconds, PROFILE_RATE, out)
    if error is not None:
        return {"backend": spec.backend, "error": error}
    raw = out.read_text(encoding="utf-8", errors="replace")
    summary = summarize(raw, args.profile_seconds, PROFILE_RATE, names)
    return {"backend": spec.backend, "subscribers": GOAL_SUBSCRIBERS, **summary}


def profiles_needed(args: argparse.Namespace, cases: list[dict[str, Any]]) -> list[str]:
    if args.profile == "never":
        return []
    if args.profile == "always":
        return list(args.backends)
    missed = []
    for backend in args.backends:
        at_goal = [
            float(c["daemon_cpu_pct"])
            for c in cases
            if c["backend"] == backend
            and c["subscribers"] == GOAL_SUBSCRIBERS
            and c["events"] == args.events
        ]
        if at_goal and statistics.median(at_goal) > GOAL_PCT:
            missed.append(backend)
    return missed


# ---------------------------------------------------------------- the run


def run_cases(
    args: argparse.Namespace, fake: FakeNvml | None, workdir: Path, py_spy: Path | None
) -> list[dict[str, object]]:
    window_s = args.seconds / args.rounds
    todo = loads(args)
    cases = []
    total = args.rounds * len(args.backends) * len(todo)
    for round_index in range(args.rounds):
        shift = round_index % len(todo)
        for backend in args.backends:
            spec = daemon_spec(args, backend, fake)
            for load in todo[shift:] + todo[:shift]:
                what = f"{backend}, {load.subscribers} subscribers" + (
                    "" if load.events else " (sample streams only)"
                )
                print(f"daemon_streams: {len(cases) + 1}/{total} {what}", file=sys.stderr)
                case_dir = workdir / f"r{round_index}-{backend}-{load.label}"
                measure = partial(measure_case, spec, load, args, window_s, py_spy)
                case = measure_with_retry(measure, case_dir)
                cases.append({"round": round_index, **case})
    return cases


def run(args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    py_spy, py_spy_note = find_py_spy(args.venv, install=not args.smoke)
    print(f"daemon_streams: {py_spy_note}", file=sys.stderr)
    with ExitStack() as stack:
        fake = None
        if "nvml" in args.backends:
            fake = stack.enter_context(fake_node(workdir / "fake", args.gpus, PROCESSES_PER_GPU))
        cases = run_cases(args, fake, workdir, py_spy)
        profiles = []
        for backend in profiles_needed(args, cases):
            if py_spy is None:
                profiles.append({"backend": backend, "error": py_spy_note})
                continue
            print(f"daemon_streams: profiling {backend} at 10 subscribers", file=sys.stderr)
            spec = daemon_spec(args, backend, fake)
            try:
                profiles.append(profile_case(spec, args, workdir / f"profile-{backend}", py_spy))
            except BenchProcessError as exc:  # the measurements stand without it
                profiles.append({"backend": backend, "error": str(exc)})
    return {
        "benchmark": "daemon_streams",
        "date": datetime.now(UTC).date().isoformat(),
        "config": {
            "seconds": args.seconds,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "subscribers": list(args.subscribers),
            "backends": list(args.backends),
            "gpus": args.gpus,
            "interval_s": args.interval,
            "events": args.events,
            "samples_only": list(args.samples_only),
            "max_streams": max_streams(args),
            "processes_per_gpu_nvml": PROCESSES_PER_GPU,
            "smoke": args.smoke,
            "py_spy": py_spy_note,
            "argv": list(args.argv),
        },
        "machine": describe_machine(),
        "code": code_version(ROOT),
        "cases": cases,
        "summary": aggregate(cases, args.events),
        "history_scan": history_scan(args.interval, args.smoke),
        "profiles": profiles,
        "baseline": load_baseline(args.baseline),
    }


def load_baseline(path: Path | None) -> dict[str, Any] | None:
    """The parts of an earlier result that the report compares with."""
    if path is None:
        return None
    earlier = json.loads(path.read_text(encoding="utf-8"))
    return {key: earlier[key] for key in ("code", "config", "summary", "history_scan")}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return measure_and_write("daemon_streams", args, run, CANNOT_MEASURE, daemon_streams_report)


if __name__ == "__main__":
    sys.exit(main())

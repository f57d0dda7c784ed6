"""Benchmark: incident replay at fleet scale (issue #30): moving the cursor over 1,000 GPUs
from the daemons' disk history, and Play at 60x.

    python bench/replay_fleet.py            # 125 nodes x 8 GPUs, 40 moves, 60 s of Play (~8 min)
    python bench/replay_fleet.py --smoke    # 8 nodes, 10 moves, 10 s of Play: does it run?

Child processes (bench/fleet_host.py, `--fleet-processes` of them, every K-th node in
each, at nice 10 unless `--fleet-nice` says otherwise: see FLEET_NICE) host the
simulated node daemons, history on disk (the default [history]: raw tier
an hour at the 1 s tick, committed every 5 s). Each daemon's history first gets the
demo's simulated day (fleet_host.py --seed-day: seed_demo_day, just before it starts;
`--no-seed-day` leaves only what the fleet records in `--warmup`). This process is the
console: the real MainWindow over a ConsoleSession, offscreen at 1920x1080, probed as
bench/console_fleet.py probes it (its FrameProbe drives the frame pump, TimedApplication
times every GUI event, a 5 ms heartbeat measures stalls).

1. Once every node streams, the fleet runs `--warmup` seconds (the live minutes on disk).
2. Moves: for `--moments` moments spread over the raw tier on disk (the last 55 min
   with the seeded day, else the warm-up's minutes; up to 30 s ago), in a shuffled
   order, the cursor moves (session.replay.show, as a drag or a key does) and the event
   loop runs until every node's answer for that moment is applied and the grid has
   painted it (no changed block left waiting: the grid repaints 16 blocks a frame).
   Reported: that time (median, p95, max), the GetStateAt calls, and where it went:
   the show() call, each answer's arrival in the inbox (network + daemon + decoding on
   the console's network thread), the decoding itself, the wait for the frame that
   applies it, the pumps' and the grid paints' GUI time. For comparison the
   same fan-out without the console (a gRPC future per node from this process) and one
   node's call alone.
3. Play: from a moment `--play-s` x 60 + 2 min back (so it does not reach the present),
   the strip's speed set to "60x" and its Play clicked; `--play-s` seconds measured:
   frame time (FrameProbe, as console_fleet.py), the GUI heartbeat's stalls, the longest
   GUI events, the moments shown, the CPU of the console and of the fleet processes.

Writes bench/results/replay_fleet.json and .md (--out / --md; --smoke writes nothing
unless asked).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from console_fleet import (
    Counters,
    build_console,
    cpu_stats,
    frame_stats,
    gui_stats,
    offscreen_and_quiet,
    wait_streaming,
)
from fleet_process import FleetProcess
from gui_probes import Heartbeat, TimedApplication, run_for, wait_until
from machine import code_version, rss_bytes, run_header
from PySide6.QtCore import QTimer
from PySide6.QtGui import QPaintEvent
from results import MIB, goal_list, parse_with_outputs, run_and_write, run_line

import console.connections.moment_query as moment_query
from console.app import qt_application
from console.fleet.updates import QueryResult, Update
from console.main_window import MainWindow
from console.qt.gui_thread_gc import collect_in_gui_thread
from console.session import ConsoleSession
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

NAME = "replay_fleet"
REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE = {"nodes": 8, "moments": 10, "play_s": 10.0, "warmup": 15.0}
SPEED = "60x"
SPEED_X = 60
MOVE_GOAL_MS = 1000.0
FRAME_GOAL_MS = 33.0
MOVE_TIMEOUT_S = 60.0
RAW_SPAN_MS = 55 * 60_000  # the seeded raw tier's hour, less a margin
RECENT_MS = 30_000  # the newest moment asked: well committed (flush every 5 s)


# The 125 simulated daemons stand in for 125 servers: on a real site they never share
# the NOC workstation's cores. Run beside the console on a 2-core machine at equal
# priority, they take 70-115 % of a core in bursts (answering the console's own
# GetStateAt calls) and Play's frame p99 measures how often the console waits for a
# core, 52-95 ms over four runs, instead of the console's work. At nice 10 they still
# get every cycle the console leaves (docs/benchmarks.md, "Replay at fleet scale").
FLEET_NICE = 10


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--nodes", type=int, default=125, help="simulated nodes (default 125)")
    arg("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    arg("--moments", type=int, default=40, help="cursor moves (default 40)")
    arg("--play-s", type=float, default=60.0, help="seconds of Play at 60x (default 60)")
    arg("--warmup", type=float, default=120.0,
        help="seconds the fleet streams before the moves (default 120)")  # fmt: skip
    arg("--fleet-processes", type=int, default=3, metavar="K",
        help="host the simulated daemons in K processes (default 3)")  # fmt: skip
    arg("--fleet-nice", type=int, default=FLEET_NICE, metavar="N",
        help=f"run the simulated daemons at nice N (default {FLEET_NICE}; 0: on an equal "
             "footing with the console)")  # fmt: skip
    arg("--no-seed-day", dest="seed_day", action="store_false",
        help="no simulated day in the histories: only what the fleet records")  # fmt: skip
    args = parse_with_outputs(parser, argv, NAME, "8 nodes, 10 moves, 10 s of Play")
    if args.smoke:
        vars(args).update(SMOKE)
    if (args.nodes < 1 or not 1 <= args.fleet_processes <= args.nodes or args.moments < 2
            or not 0 <= args.fleet_nice <= 19):  # fmt: skip
        parser.error("--nodes >= 1, --fleet-processes from 1 to --nodes, --moments >= 2, "
                     "--fleet-nice from 0 to 19")  # fmt: skip
    return args


def pct(values_ms: Sequence[float]) -> dict[str, float | int | None]:
    """count, p50, p95, p99 and max (linear percentiles), in ms."""
    if not values_ms:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    v = np.asarray(values_ms, dtype=np.float64)
    return {"count": int(v.size)} | {
        f"p{q}": round(float(np.percentile(v, q)), 1) for q in (50, 95, 99)
    } | {"max": round(float(v.max()), 1)}  # fmt: skip


# -- one cursor move, followed -----------------------------------------------------------


class MoveProbe:
    """Follows the cursor's moves: each answer's arrival in the inbox and its decoding (on
    the network thread), the pumps, and the grid's paints, until the grid has painted
    every node's answer for the moment. Wraps, on the instances (and the decoder in its
    module), what FrameProbe has wrapped already."""

    def __init__(self, session: ConsoleSession, window: MainWindow) -> None:
        self._session, self._fleet = session, session.fleet
        self._lock = threading.Lock()
        self.at_ms: int | None = None
        self._reset()
        inbox = session.inbox
        put = inbox.put

        def timed_put(update: Update) -> None:  # the network thread
            if isinstance(update, QueryResult) and update.what.endswith("at a moment"):
                with self._lock:
                    self.arrivals.append((time.perf_counter(), update.ok))
            put(update)

        inbox.put = timed_put  # type: ignore[method-assign]
        decode = moment_query.decode_state_at

        def timed_decode(target: str, reply: pb.NodeStateAt, gpus: int) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            moment = decode(target, reply, gpus)
            with self._lock:
                self.decodes.append((time.perf_counter() - started, time.thread_time() - cpu))
            return moment

        moment_query.decode_state_at = timed_decode
        pump = session.pump.pump

        def timed_pump() -> Any:
            started = time.perf_counter()
            changes = pump()
            if self.at_ms is not None and self.painted is None:
                self.pump_s.append(time.perf_counter() - started)
                if self.applied is None and self._all_in():
                    self.applied = time.perf_counter()
            return changes

        session.pump.pump = timed_pump  # type: ignore[method-assign]
        grid = window.grid
        paint = grid.paintEvent

        def timed_paint(event: QPaintEvent) -> Any:
            started = time.perf_counter()
            result = paint(event)
            if self.at_ms is not None and self.painted is None:
                self.paint_s.append(time.perf_counter() - started)
                # Every changed block painted: the grid repaints REPAINT_BUDGET a frame.
                if self.applied is not None and not grid.blocks_waiting:
                    self.painted = time.perf_counter()
            return result

        grid.paintEvent = timed_paint  # type: ignore[method-assign]

    def _reset(self) -> None:
        self.started = 0.0
        self.show_s = 0.0
        self.applied: float | None = None
        self.painted: float | None = None
        self.arrivals: list[tuple[float, bool]] = []
        self.decodes: list[tuple[float, float]] = []
        self.pump_s: list[float] = []
        self.paint_s: list[float] = []

    def _all_in(self) -> bool:
        at = self.at_ms
        return all(n.moment is not None and n.moment.at_ms == at for n in self._fleet)

    def move(self, at_ms: int) -> dict[str, object]:
        """Move the cursor to `at_ms`; the move's timings once the grid painted it."""
        with self._lock:
            self._reset()
        asks = self._session.replay.asks
        self.at_ms = at_ms
        self.started = time.perf_counter()
        self._session.replay.show(at_ms)
        self.show_s = time.perf_counter() - self.started
        if not wait_until(lambda: self.painted is not None, MOVE_TIMEOUT_S, poll_ms=5):
            raise TimeoutError(f"moment {at_ms}: not painted in {MOVE_TIMEOUT_S:.0f} s")
        self.at_ms = None
        return self._timings(self._session.replay.asks - asks, at_ms)

    def _timings(self, asks: int, at_ms: int) -> dict[str, object]:
        def since(t: float) -> float:
            return round((t - self.started) * 1000, 2)

        with self._lock:
            arrived = sorted(t for t, _ in self.arrivals)
            failed = sum(not ok for _, ok in self.arrivals)
            decodes = list(self.decodes)
        moments = [n.moment for n in self._fleet if n.moment is not None]
        assert self.applied is not None and self.painted is not None
        return {
            "at_ms": at_ms,
            "asks": asks,
            "total_ms": since(self.painted),
            "show_call_ms": round(self.show_s * 1000, 2),
            "first_answer_ms": since(arrived[0]) if arrived else None,
            "median_answer_ms": since(float(np.median(arrived))) if arrived else None,
            "last_answer_ms": since(arrived[-1]) if arrived else None,
            "applied_ms": since(self.applied),
            "decode_cpu_ms_sum": round(sum(c for _, c in decodes) * 1000, 2),
            "decode_wall_ms_sum": round(sum(w for w, _ in decodes) * 1000, 2),
            "pumps": len(self.pump_s),
            "pump_ms_sum": round(sum(self.pump_s) * 1000, 2),
            "pump_ms_max": round(max(self.pump_s, default=0.0) * 1000, 2),
            "grid_paints": len(self.paint_s),
            "grid_paint_ms_sum": round(sum(self.paint_s) * 1000, 2),
            "failed": failed,
            "unanswered": sum(not m.answered for m in moments),
            "tiers": dict(Counter(m.tier or "none" for m in moments)),
        }


def move_summary(moves: list[dict[str, Any]]) -> dict[str, object]:
    def col(key: str) -> list[float]:
        return [float(m[key]) for m in moves if m.get(key) is not None]

    applied = [m["applied_ms"] - m["last_answer_ms"] for m in moves if m["last_answer_ms"]]
    painted = [m["total_ms"] - m["applied_ms"] for m in moves]
    tiers: Counter[str] = Counter()
    for m in moves:
        tiers.update(m["tiers"])
    return {
        "moves": len(moves),
        "move_to_painted_ms": pct(col("total_ms")),
        "get_state_at_calls": int(sum(col("asks"))),
        "failed_answers": int(sum(col("failed"))),
        "unanswered_nodes": int(sum(col("unanswered"))),
        "tiers": dict(tiers),
        "breakdown_ms": {
            "show_call (GUI)": pct(col("show_call_ms")),
            "first answer in": pct(col("first_answer_ms")),
            "median answer in": pct(col("median_answer_ms")),
            "last answer in": pct(col("last_answer_ms")),
            "last answer in -> applied": pct(applied),
            "applied -> grid painted": pct(painted),
            "decoding, all answers (net thread CPU)": pct(col("decode_cpu_ms_sum")),
            "pumps during the move (GUI)": pct(col("pump_ms_sum")),
            "longest pump during the move (GUI)": pct(col("pump_ms_max")),
            "grid paints during the move (GUI)": pct(col("grid_paint_ms_sum")),
        },
    }


def moments_to_visit(count: int, lo_ms: int, hi_ms: int) -> list[int]:
    """`count` moments evenly over [lo, hi], on whole seconds, in a seeded shuffled order:
    each move jumps, as a person picking moments does."""
    span = hi_ms - lo_ms
    moments = [lo_ms + round(i * span / (count - 1)) for i in range(count)]
    moments = [m - m % 1000 + 500 for m in moments]  # between two ticks of any phase
    random.Random(30).shuffle(moments)
    return moments


# -- the same fan-out, without the console ---------------------------------------------


def bare_fan_out(targets: Sequence[str], moments: Sequence[int]) -> dict[str, object]:
    """GetStateAt to every node at once from this process (a future each, no console),
    for each moment, and one node's call alone: what the fleet harness itself takes."""
    channels = [grpc.insecure_channel(t) for t in targets]
    stubs = [pb_grpc.NodeServiceStub(c) for c in channels]
    try:
        for stub in stubs[:3]:  # connect
            stub.GetStateAt(pb.GetStateAtRequest(at_unix_ms=moments[0]), timeout=30)
        rounds, single = [], []
        for at in moments:
            request = pb.GetStateAtRequest(at_unix_ms=at)
            started = time.perf_counter()
            futures: list[Future[Any]] = [s.GetStateAt.future(request, timeout=30) for s in stubs]
            for future in futures:
                future.result()
            rounds.append((time.perf_counter() - started) * 1000)
        for at in moments:
            started = time.perf_counter()
            stubs[0].GetStateAt(pb.GetStateAtRequest(at_unix_ms=at), timeout=30)
            single.append((time.perf_counter() - started) * 1000)
    finally:
        for channel in channels:
            channel.close()
    return {"all_nodes_at_once_ms": pct(rounds), "one_node_alone_ms": pct(single)}


# -- Play at 60x ---------------------------------------------------------------------------


def play(
    app: TimedApplication, window: MainWindow, session: ConsoleSession, probe: Any,
    fleet: FleetProcess, start_ms: int, seconds: float,
) -> dict[str, object]:  # fmt: skip
    """Play at 60x from `start_ms` for `seconds`, measured as console_fleet.py measures."""
    part, source = window.replay, session.replay
    source.show(start_ms)
    settled = lambda: all(n.moment is not None and n.moment.at_ms == start_ms  # noqa: E731
                          for n in session.fleet)  # fmt: skip
    if not wait_until(settled, MOVE_TIMEOUT_S):
        raise TimeoutError("the play's first moment was not answered")
    part.strip.speed.setCurrentText(SPEED)
    events = Counter[str]()
    shown: list[int] = []

    def on_note(note: str) -> None:
        if note.startswith("paused: a new critical"):  # Play pauses there: play on
            events["paused on a new critical"] += 1
            QTimer.singleShot(0, part.strip.play.click)

    def on_present(_message: str) -> None:
        events["reached the present"] += 1
        source.show(start_ms)
        QTimer.singleShot(0, part.strip.play.click)

    def on_moment(at_ms: int | None) -> None:
        if at_ms is not None:
            shown.append(at_ms)

    part.player.noteChanged.connect(on_note)
    part.player.reachedPresent.connect(on_present)
    source.momentChanged.connect(on_moment)
    heartbeat = Heartbeat()
    app.probe = heartbeat.timer
    app.reset()
    asks = source.asks
    before = Counters.take(fleet)
    app.measuring = True
    probe.start_measuring()
    heartbeat.start()
    part.strip.play.click()
    run_for(seconds)
    heartbeat.stop()
    probe.stop_measuring()
    app.measuring = False
    after = Counters.take(fleet)
    played_to = source.at_ms
    part.player.pause("")
    part.player.noteChanged.disconnect(on_note)
    part.player.reachedPresent.disconnect(on_present)
    source.momentChanged.disconnect(on_moment)
    wall = after.wall - before.wall
    return {
        "speed": SPEED,
        "from_ms": start_ms,
        "played_to_ms": played_to,
        "past_covered_s": round(((played_to or start_ms) - start_ms) / 1000, 1),
        "cursor_moves": len(shown),
        "get_state_at_calls": source.asks - asks,
        "events": dict(events),
        "frame_ms": frame_stats(probe),
        "frames": {"with_changes": len(probe.frames), "without": probe.empty_frames},
        "gui": gui_stats(app, heartbeat, wall),
        "cpu_pct": cpu_stats(before, after),
    }


# -- running it ----------------------------------------------------------------------------


def run(args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    app = TimedApplication(sys.argv[:1])
    qt_application()  # the console's own set-up: style sheet, Qt log routing, collector
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "config")
    extra = ["--seed-day"] if args.seed_day else []
    result: dict[str, object] = run_header(args.argv) | {
        "benchmark": NAME,
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_version(REPO_ROOT),
        "config": {k: getattr(args, k) for k in
                   ("nodes", "gpus", "moments", "play_s", "warmup", "fleet_processes",
                    "fleet_nice", "seed_day", "smoke")}
                  | {"gpu_total": args.nodes * args.gpus, "speed": SPEED},
    }  # fmt: skip
    with FleetProcess(args.nodes, args.gpus, tmp, 1.0, args.fleet_processes,
                      args.fleet_nice, extra_args=extra) as fleet:  # fmt: skip
        started = time.perf_counter()
        targets = fleet.start(timeout_s=60 + (3.0 if args.seed_day else 0.2) * args.nodes)
        result["fleet_start_s"] = round(time.perf_counter() - started, 1)
        streaming_ms = int(time.time() * 1000)
        session, window, probe = build_console(app, targets)
        try:
            wait_streaming(session, timeout_s=30 + 0.2 * args.nodes)
            window.grid.select(targets[0], 0)
            collect_in_gui_thread().freeze_long_lived()  # as console.app.run_console does
            run_for(args.warmup)
            if collect_in_gui_thread().freezes == 0:
                collect_in_gui_thread().freeze_now()
            result |= measure(args, app, session, window, probe, fleet, targets, streaming_ms)
        finally:
            probe.stop()
            session.replay.go_live()
            window.close()
            session.stop()
        result["memory_mib"] = {
            "console_rss": round(rss_bytes() / MIB, 1),
            "fleet_rss": round(fleet.rss_bytes() / MIB, 1),
        }
    result["goals"] = goals(result)
    return result


def measure(
    args: argparse.Namespace, app: TimedApplication, session: ConsoleSession, window: MainWindow,
    probe: Any, fleet: FleetProcess, targets: Sequence[str], streaming_ms: int,
) -> dict[str, object]:  # fmt: skip
    now = int(time.time() * 1000)
    hi = now - RECENT_MS
    lo = now - RAW_SPAN_MS if args.seed_day else min(streaming_ms + 10_000, hi - args.moments)
    moments = moments_to_visit(args.moments, lo, hi)
    moves_probe = MoveProbe(session, window)
    heartbeat = Heartbeat()
    app.probe = heartbeat.timer
    app.reset()
    before = Counters.take(fleet)
    app.measuring = True
    heartbeat.start()
    moves = [moves_probe.move(at) for at in moments]
    heartbeat.stop()
    app.measuring = False
    after = Counters.take(fleet)
    wall = after.wall - before.wall
    moves_gui = gui_stats(app, heartbeat, wall)
    del moves_gui["paint_by_widget"]
    session.replay.go_live()
    run_for(2.0)
    bare = bare_fan_out(targets, moments[: min(10, len(moments))])
    now = int(time.time() * 1000)
    back_ms = int(args.play_s * SPEED_X * 1000) + 120_000
    start = now - back_ms if args.seed_day else lo
    played = play(app, window, session, probe, fleet, start, args.play_s)
    return {
        "moments_span_ms": [lo, hi],
        "moves": move_summary(moves) | {"gui": moves_gui, "cpu_pct": cpu_stats(before, after)},
        "move_list": moves,
        "without_console": bare,
        "play": played,
    }


def goals(result: dict[str, Any]) -> list[dict[str, object]]:
    p95 = result["moves"]["move_to_painted_ms"]["p95"]
    p99 = result["play"]["frame_ms"]["frame"]["p99"]
    return [
        {"name": "move to redrawn grid p95", "goal": f"< {MOVE_GOAL_MS:g} ms", "value": p95,
         "met": p95 is not None and p95 < MOVE_GOAL_MS},
        {"name": f"frame p99 playing at {SPEED}", "goal": f"< {FRAME_GOAL_MS:g} ms",
         "value": p99, "met": p99 is not None and p99 < FRAME_GOAL_MS},
    ]  # fmt: skip


# -- the report ----------------------------------------------------------------------------


def _cell(value: object) -> str:
    return "n/a" if value is None else f"{value}"


def _row(label: str, stats: dict[str, Any], keys: Sequence[str]) -> str:
    return f"| {label} | " + " | ".join(_cell(stats.get(k)) for k in keys) + " |"


def markdown(result: dict[str, Any]) -> str:
    c = result["config"]
    moves, played = result["moves"], result["play"]
    lines = [
        f"# replay_fleet: {c['nodes']} nodes x {c['gpus']} GPUs = {c['gpu_total']} GPUs",
        "",
        run_line(result, "replay_fleet.py"),
        "",
        f"Histories: {'a seeded day + ' if c['seed_day'] else ''}{c['warmup']} s recorded live; "
        f"fleet in {c['fleet_processes']} processes at nice {c.get('fleet_nice', 0)} "
        f"(started in {result['fleet_start_s']} s).",
        "",
        f"## Moves: {moves['moves']} moments, {moves['get_state_at_calls']} GetStateAt calls",
        "",
        f"Tiers answered from: {moves['tiers']}; failed answers {moves['failed_answers']}.",
        "",
        "| ms | p50 | p95 | max |",
        "| --- | --- | --- | --- |",
        _row("**move -> grid painted**", moves["move_to_painted_ms"], ("p50", "p95", "max")),
    ]
    for label, stats in moves["breakdown_ms"].items():
        lines.append(_row(label, stats, ("p50", "p95", "max")))
    bare = result["without_console"]
    lines += [
        _row("without the console: all nodes at once", bare["all_nodes_at_once_ms"],
             ("p50", "p95", "max")),
        _row("without the console: one node alone", bare["one_node_alone_ms"],
             ("p50", "p95", "max")),
        "",
        f"GUI during the moves: longest stall {moves['gui']['max_stall_ms']} ms, busy "
        f"{moves['gui']['busy_pct']} %; CPU (100 = a core): console {moves['cpu_pct']['console']}"
        f" (GUI {moves['cpu_pct']['console_gui_thread']}, network "
        f"{moves['cpu_pct']['console_net_thread']}), fleet {moves['cpu_pct']['fleet']}, other "
        f"processes {moves['cpu_pct']['other_processes']}, steal {moves['cpu_pct']['steal']}.",
        "",
        f"## Play at {played['speed']} for {c['play_s']} s",
        "",
        f"{played['past_covered_s']} s of the past covered, {played['cursor_moves']} cursor "
        f"moves, {played['get_state_at_calls']} GetStateAt calls; "
        f"{played['events'] or 'no pauses'}.",
        "",
        "| ms | p50 | p99 | max | n |",
        "| --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for label, key in (("**frame**", "frame"), ("pump", "pump"), ("repaint", "repaint"),
                       ("grid paintEvent", "grid_paint"), ("off-CPU", "off_cpu")):  # fmt: skip
        lines.append(_row(label, played["frame_ms"][key], ("p50", "p99", "max", "count")))
    gui, cpu = played["gui"], played["cpu_pct"]
    lines += [
        "",
        f"GUI: longest stall {gui['max_stall_ms']} ms, stalls over 50 ms {gui['stalls_over_50ms']}"
        f", busy {gui['busy_pct']} %. Longest events: "
        + "; ".join(f"{e['ms']} ms {e['event']}" for e in gui["longest_events"]),
        "",
        f"CPU (100 = a core): console {cpu['console']} (GUI {cpu['console_gui_thread']}, network"
        f" {cpu['console_net_thread']}, other {cpu['console_other_threads']}), fleet "
        f"{cpu['fleet']}, other processes {cpu['other_processes']}, steal {cpu['steal']}.",
        "",
        "## Goals",
        "",
        *goal_list(result["goals"]),
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    offscreen_and_quiet()
    return run_and_write(NAME, args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())

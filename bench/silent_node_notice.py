"""Benchmark: time for the console to notice a silent node and say so (issue #12).

    .venv/bin/python bench/silent_node_notice.py              # 15 trials per fault (~5 min)
    .venv/bin/python bench/silent_node_notice.py --trials 30
    .venv/bin/python bench/silent_node_notice.py --smoke      # 1 trial per fault, nothing written

The whole console (session, frame pump, main window, notifier; offscreen)
watches one daemon process (simulated, 2 GPUs, the default 1 s tick). Each
trial waits until the node streams, waits a random part of a tick (a fault
comes at any phase of the sampling), then silences the node:

- ``sigstop``: the daemon is stopped (a hung host: TCP still acknowledged);
- ``blackhole``: the forwarder between console and daemon stops forwarding and
  closes nothing (tests/console/tcp_blackhole.py: a link cut without a reset);
- ``sigkill``: the daemon is killed (its sockets reset).

The console always reaches the daemon through that loopback forwarder.

Timed from the fault, on the console's wall clock: the link shown not
connected (keepalive or reset), the console's own critical alert
``node_not_responding`` raised (its start time), the popup handed to the
notification channel (the notifier's ``notified``), and, where dunst, Xvfb and
dbus-daemon are installed, dunst showing it (dunst runs a script of ours for
each notification, which writes the time; ``--no-dunst`` to skip). Then the
node comes back (SIGCONT, forwarding again, or a restart on the same port) and the next trial
waits until the alert has cleared. Reported: p50, p99 and max per fault.
Goal: every trial's popup < 5 s.

Writes bench/results/silent_node_notice.json and .md (``--out``, ``--md``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gui_probes import wait_until
from machine import code_version, run_header
from PySide6.QtDBus import QDBusConnection
from results import parse_with_outputs, stats_ms, write_outputs

from console.app import qt_application
from console.fleet.alert_rows import AlertRow
from console.fleet.model import FleetModel
from console.fleet.not_responding import RULE, is_local
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.notify.desktop import DesktopNotifier
from console.qt.alert_notifier import NotificationSink
from console.session import ConsoleSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # forwarder, bus: the tests'
from tests.console.desktop_bus import (
    RecordingSink,
    private_session_bus,
    recording_dunst,
    shown_by_dunst,
)
from tests.console.tcp_blackhole import BlackHoleProxy
from tests.console.xserver import xvfb

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
GOAL_S = 5.0
GIVE_UP_S = 60.0
FAULTS = ("sigstop", "blackhole", "sigkill")
POLL_MS = 5


class Daemon:
    """`gpufleet daemon` as a process, restartable on the same port and state directory."""

    def __init__(self, workdir: Path) -> None:
        self.workdir, self.listen = workdir, "127.0.0.1:0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        ready = self.workdir / "ready"
        ready.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
                "--gpus", "2", "--listen", self.listen, "--ready-file", str(ready),
                "--state-dir", str(self.workdir / "state"),
                "--hostname", "gpu-node-03"]  # fmt: skip
        with (self.workdir / "daemon.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text(encoding="utf-8").strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daemon did not start: {self.workdir / 'daemon.log'}")
            time.sleep(0.05)  # a child's file: there is no event to wait on
        self.listen = ready.read_text(encoding="utf-8").strip()
        return self.listen

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(30)


class Dunst:
    """dunst on a private session bus and an Xvfb display; `shown()`: its records so far."""

    BUS_NAME = "gpufleet-bench-bus"

    def __init__(self, workdir: Path, undo: list[Callable[[], None]]) -> None:
        self._running = contextlib.ExitStack()
        undo.append(self._running.close)  # from the first process on
        self.address = self._running.enter_context(private_session_bus(workdir))
        display = self._running.enter_context(xvfb(quiet=True))
        self.seen = self._running.enter_context(recording_dunst(workdir, self.address, display))
        self.bus = QDBusConnection.connectToBus(self.address, self.BUS_NAME)
        self._running.callback(QDBusConnection.disconnectFromBus, self.BUS_NAME)

    def shown(self) -> list[tuple[float, str, str]]:
        """(time, urgency, summary) of every notification dunst showed."""
        return shown_by_dunst(self.seen)


class Watch:
    """The console's view of the node, timed: when the link dropped, when the popup went out."""

    def __init__(self, window: MainWindow, target: str) -> None:
        self.window, self.target = window, target
        self.notified: dict[str, float] = {}  # alert id -> when the notifier showed it
        self.link_lost: float | None = None  # when the frame pump first showed it down
        window.alerts.notifier.notified.connect(self._on_notifier_notified)
        window.session.pump.fleetChanged.connect(self._on_pump_fleet_changed)

    @property
    def fleet(self) -> FleetModel:
        return self.window.session.fleet

    def _on_notifier_notified(self, alert: AlertRow) -> None:
        if is_local(alert):
            self.notified.setdefault(alert.id, time.time())

    def _on_pump_fleet_changed(self, _changes: object) -> None:
        if self.link_lost is None and self.link_down():
            self.link_lost = time.time()

    def firing(self) -> AlertRow | None:
        alerts = self.fleet.alerts.alerts()
        return next((a for a in alerts if a.rule == RULE and is_local(a) and a.firing), None)

    def streaming(self, since_samples: int = 0) -> bool:
        node = self.fleet.node(self.target)
        return node.state is LinkState.CONNECTED and node.samples_received > since_samples + 2

    def link_down(self) -> bool:
        return self.fleet.node(self.target).state is not LinkState.CONNECTED


def trial(
    watch: Watch, daemon: Daemon, proxy: BlackHoleProxy, fault: str, dunst: Dunst | None
) -> dict[str, Any]:
    samples = watch.fleet.node(watch.target).samples_received
    if not wait_until(lambda: watch.streaming(samples) and watch.firing() is None, GIVE_UP_S):
        raise RuntimeError("the node did not stream again")
    wait_until(None, random.uniform(0, 1.0))  # any phase of the 1 s tick
    shown_before = len(dunst.shown()) if dunst else 0
    faulted = time.time()
    if fault == "blackhole":
        proxy.hold()
    else:
        daemon.signal(signal.SIGSTOP if fault == "sigstop" else signal.SIGKILL)
    found: dict[str, Any] = {"fault": fault}
    watch.link_lost = None
    if not wait_until(lambda: watch.firing() is not None, GIVE_UP_S, POLL_MS):
        raise RuntimeError(f"{fault}: no alert within {GIVE_UP_S} s")
    alert = watch.firing()
    assert alert is not None
    wait_until(lambda: alert.id in watch.notified, 10, POLL_MS)
    if dunst is not None:
        wait_until(lambda: len(dunst.shown()) > shown_before, 10, POLL_MS)
        new = dunst.shown()[shown_before:]
        found["dunst_s"] = round(new[0][0] - faulted, 3) if new else None
        found["dunst_urgency"] = new[0][1] if new else None
    wait_until(lambda: watch.link_lost is not None, 10, POLL_MS)  # where it comes later
    link_lost = watch.link_lost
    found.update(
        link_s=round(link_lost - faulted, 3) if link_lost else None,
        raised_s=round(alert.started_unix_ms / 1000 - faulted, 3),
        notified_s=round(watch.notified[alert.id] - faulted, 3) if alert.id in watch.notified
        else None,
        summary=alert.summary,
    )  # fmt: skip
    if fault == "sigstop":
        daemon.signal(signal.SIGCONT)
    elif fault == "blackhole":
        proxy.resume()
    else:
        daemon.start()
    if not wait_until(lambda: watch.firing() is None, GIVE_UP_S):
        raise RuntimeError("the alert did not clear")
    return found


def seconds_stats(values: list[float | None]) -> dict[str, Any]:
    ended = [v for v in values if v is not None]
    return {k: v if k == "count" or v is None else round(v / 1000, 2)
            for k, v in stats_ms(ended).items()}  # fmt: skip


def summarise(trials: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fault in FAULTS:
        mine = [t for t in trials if t["fault"] == fault]
        out[fault] = {key: seconds_stats([t.get(key) for t in mine])
                      for key in ("link_s", "raised_s", "notified_s", "dunst_s")}  # fmt: skip
    return out


LABELS = {
    "link_s": "link shown not connected",
    "raised_s": "console's critical alert raised",
    "notified_s": "popup handed to the channel",
    "dunst_s": "dunst shows it",
}


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        "# Time for the console to notice a silent node (fault -> ...)",
        "",
        f"{result['when']}; `{' '.join(['bench/silent_node_notice.py', *result['argv']])}`; "
        f"{m['nproc']} x {m['cpu_model']}; commit {result['code']['commit']}; daemon tick 1 s. "
        f"Goal: popup < {GOAL_S:g} s.",
        "",
        "| fault | step | trials | p50 | p99 | max |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for fault, steps in result["summary"].items():
        for key, s in steps.items():
            if s["count"]:
                lines.append(f"| {fault} | {LABELS[key]} | {s['count']} | {s['p50']} s "
                             f"| {s['p99']} s | {s['max']} s |")  # fmt: skip
    urgencies = sorted({t.get("dunst_urgency") for t in result["trials"]} - {None})
    if urgencies:
        lines += ["", f"dunst's urgency of every notification: {', '.join(urgencies)}."]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=15, help="per fault")
    parser.add_argument("--no-dunst", action="store_true", help="time to the channel only")
    parser.add_argument("--seed", type=int, default=1)
    args = parse_with_outputs(parser, argv, "silent_node_notice", "one trial per fault, no files")
    if args.smoke:
        args.trials = 1
    return args


def have_dunst() -> bool:
    return all(shutil.which(tool) for tool in ("dunst", "Xvfb", "dbus-daemon"))


def run(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    app = qt_application(offscreen=True)
    undo: list[Callable[[], None]] = []  # what to stop, newest first, however far it got
    try:
        dunst = Dunst(workdir, undo) if have_dunst() and not args.no_dunst else None
        daemon = Daemon(workdir)
        undo.append(daemon.stop)
        sinks: list[NotificationSink] = [DesktopNotifier(dunst.bus)] if dunst else [RecordingSink()]
        if not wait_until(lambda: sinks[0].available, 10):
            raise RuntimeError("dunst did not take the notification service's name")
        proxy = BlackHoleProxy(daemon.start())
        undo.append(proxy.close)
        window = MainWindow(ConsoleSession([proxy.address]), sinks=sinks)
        undo += [window.close, window.session.stop]
        window.resize(1400, 900)
        window.session.start()
        window.show()
        watch = Watch(window, proxy.address)
        found = []
        for number in range(args.trials):
            for fault in FAULTS:
                found.append(trial(watch, daemon, proxy, fault, dunst))
                print(f"trial {number + 1} {fault}: {found[-1]}", flush=True)
        return found
    finally:
        for step in reversed(undo):
            step()
        app.processEvents()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    logging.basicConfig(level=logging.WARNING)
    result: dict[str, Any] = {**run_header(args.argv), "code": code_version(ROOT)}
    with tempfile.TemporaryDirectory(prefix="gpufleet-notice-") as workdir:
        result["trials"] = run(args, Path(workdir))
    result["summary"] = summarise(result["trials"])
    text = markdown(result)
    print(text)
    write_outputs("silent_node_notice", result, args.out, args.md, text)
    worst = [t["notified_s"] for t in result["trials"]]
    return 0 if all(w is not None and w < GOAL_S for w in worst) else 1


if __name__ == "__main__":
    sys.exit(main())

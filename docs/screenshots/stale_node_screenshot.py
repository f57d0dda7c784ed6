"""Render docs/screenshots/stale-node.png: a node that stopped answering, beside live ones.

    xvfb-run -a .venv/bin/python docs/screenshots/stale_node_screenshot.py [OUT_DIR]

(Without a display it renders offscreen.) Starts the demo's first three GPU servers
(console/demo_fleet.py, with its workloads, reservations and gpu-node-02's incident) and a
fourth, gpu-node-04, opens the console on all four, stops gpu-node-04 with
SIGSTOP (a hung host: its TCP still acknowledged) and waits until the console
has raised its own critical alert, node_not_responding, and the tiles have
been stale for a few seconds; then saves the window, toast and alert table
included. Every daemon is resumed and stopped at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shot_tools import wait_until

from console.app import build_window, has_display, qt_application
from console.connections.security import LinkSecurity
from console.demo_fleet import DemoFleet
from console.demo_seed import DEMO_PEOPLE
from console.fleet.not_responding import RULE

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
STALE_FOR_S = 7.0  # the tiles say "no data 7 s"


def start_daemon(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / "ready"
    argv = [sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
            "--gpus", "8", "--seed", "7", "--listen", "127.0.0.1:0", "--hostname", "gpu-node-04",
            "--ready-file", str(ready), "--state-dir", str(workdir / "state")]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.read_text(encoding="utf-8").strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("gpu-node-04 did not start")
        time.sleep(0.05)  # a child's file: no event to wait on
    return proc, ready.read_text(encoding="utf-8").strip()


def main() -> int:
    app = qt_application(offscreen=not has_display())
    with DemoFleet(nodes=3, gpus=8) as demo, tempfile.TemporaryDirectory() as workdir:
        proc, target = start_daemon(Path(workdir))
        # The demo's token, as `gpufleet demo` gives it (console/cli.py); gpu-node-04 asks none.
        window = build_window([*demo.start(), target], DEMO_PEOPLE,
                              security=LinkSecurity(token=demo.token))  # fmt: skip
        try:
            window.resize(1500, 900)
            window.show()
            fleet = window.session.fleet
            wait_until(app, lambda: all(n.samples_received > 5 for n in fleet))
            os.kill(proc.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            wait_until(app, lambda: any(a.rule == RULE and a.firing for a in fleet.alerts.alerts()))
            wait_until(app, lambda: time.monotonic() - stopped > STALE_FOR_S, STALE_FOR_S + 5)
            window.tabs.setCurrentWidget(window.alerts.alert_panel)
            wait_until(app, lambda: window.alerts.alert_panel.proxy.rowCount() > 0, 5)
            path = OUT / "stale-node.png"
            if not window.grab().save(str(path)):
                raise OSError(f"could not write {path}")
            print(f"wrote {path}")
        finally:
            window.session.stop()
            window.close()
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())

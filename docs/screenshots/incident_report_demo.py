"""Write docs/incident-report-demo.html: `gpufleet report` over the demo's incident (#30).

    PYTHONPATH=. .venv/bin/python docs/screenshots/incident_report_demo.py [OUT.html]

The demo's four nodes as `gpufleet demo` starts them (console/demo_fleet.py). Once the
incident on gpu-node-02 has raised its first critical alert and played on for a while,
the report over the demo's life so far, as an operator runs it from a terminal: the
command as a real process, the nodes named by address, the demo's token in
$GPUFLEET_TOKEN. Its grid screenshots are `gpufleet console --at … --screenshot` runs
(offscreen: no display needed).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "incident-report-demo.html"
GPUFLEET = [sys.executable, "-m", "node_daemon"]
CRITICAL_WITHIN_S = 240.0
PLAYED_ON_S = 60.0  # after the first critical: the healing and the alerts that follow


def gpufleet(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUFLEET, *argv], env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def critical_on(env: dict[str, str], target: str) -> bool:
    done = gpufleet(env, "alerts", "--node", target, "--json")
    if done.returncode not in (0, 1):
        return False
    return any(a["severity"] == "critical" for a in json.loads(done.stdout)["alerts"])


def main() -> int:
    sys.path[:0] = [str(ROOT), str(ROOT / "protos")]
    from console.demo_fleet import DemoFleet

    with DemoFleet(nodes=4, gpus=8) as demo:
        demo.start()
        started = dt.datetime.now().astimezone()
        env = {**os.environ, "GPUFLEET_TOKEN": demo.token, "QT_QPA_PLATFORM": "offscreen"}
        deadline = time.monotonic() + CRITICAL_WITHIN_S
        while not critical_on(env, demo.targets[1]):
            if time.monotonic() > deadline:
                print("no critical alert on gpu-node-02 in time", file=sys.stderr)
                return 1
            time.sleep(2)  # a script polling a demo, not a test: nothing to wait on
        time.sleep(PLAYED_ON_S)
        nodes = [word for target in demo.targets for word in ("--node", target)]
        done = gpufleet(env, "report", *nodes, "--from", started.isoformat(timespec="seconds"),
                        "--to", "-0s", "--out", str(OUT), "--json")  # fmt: skip
        print(done.stdout, done.stderr, sep="\n")
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())

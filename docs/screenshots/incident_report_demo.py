"""Write docs/incident-report-demo.html: `gpufleet report` over the seeded two-hour incident (#30).

    PYTHONPATH=.:protos .venv/bin/python docs/screenshots/incident_report_demo.py [OUT.html]

The incident is node_daemon/seeded_incident.py's: four simulated nodes' last two hours
(a cooling failure with self-healing's power cap, an acknowledgement and a drain; an Xid
storm; reservations; a node hung for a quarter of an hour), written into their state
directories at their real past times. Each node's daemon then runs as a real process on
its directory (`gpufleet daemon`, the seeded backend, its history's raw tier over the
two hours), and the report is made as an operator makes it from a terminal: the command
as a real process, the nodes named by address. Its grid screenshots are
`gpufleet console --at … --screenshot` runs (offscreen: no display needed).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "incident-report-demo.html"
GPUFLEET = [sys.executable, "-m", "node_daemon"]
ENDED_AGO_MS = 120_000  # the incident ended two minutes before the report
MARGIN_MS = 5 * 60_000  # the report starts five minutes before the incident
SERVE_WITHIN_S = 60.0


def start_node(fleet: object, name: str, scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The node's daemon on its seeded directory; (process, address) once it serves."""
    from node_daemon.seeded_incident import SeededFleet, daemon_config

    assert isinstance(fleet, SeededFleet)
    config, ready = scratch / f"{name}.toml", scratch / f"{name}.ready"
    config.write_text(daemon_config(name))
    argv = [*GPUFLEET, "daemon", "--listen", "127.0.0.1:0", "--ready-file", str(ready),
            "--state-dir", str(fleet.state_dirs[name]), "--config", str(config),
            *fleet.daemon_argv(name)]  # fmt: skip
    log = open(scratch / f"{name}.log", "ab")  # noqa: SIM115  # the daemon's, for its life
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + SERVE_WITHIN_S
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{name} did not serve: {(scratch / f'{name}.log').read_text()}")
        time.sleep(0.2)  # a script waiting on a process it started, not a test
    return process, ready.read_text().strip()


def local(at_ms: int) -> str:
    return dt.datetime.fromtimestamp(at_ms / 1000).astimezone().isoformat(timespec="seconds")


def main() -> int:
    sys.path[:0] = [str(ROOT), str(ROOT / "protos")]
    from node_daemon.seeded_incident import NODES, seed_fleet

    with tempfile.TemporaryDirectory(prefix="gpufleet-incident-") as scratch_dir:
        scratch = Path(scratch_dir)
        fleet = seed_fleet(scratch, int(time.time() * 1000) - ENDED_AGO_MS)
        processes = []
        try:
            addresses = []
            for node in NODES:
                process, address = start_node(fleet, node.name, scratch)
                processes.append(process)
                addresses.append(address)
            # A console of its own settings: the pictures in the first start's layout,
            # not in this machine's person's saved one.
            env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
                   "XDG_CONFIG_HOME": str(scratch / "config")}  # fmt: skip
            env.pop("GPUFLEET_TOKEN", None)
            nodes = [word for address in addresses for word in ("--node", address)]
            done = subprocess.run(
                [*GPUFLEET, "report", *nodes, "--from", local(fleet.start_ms - MARGIN_MS),
                 "--to", local(fleet.end_ms + ENDED_AGO_MS // 2), "--out", str(OUT), "--json"],
                env=env, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            print(done.stdout, done.stderr, sep="\n")
            return done.returncode
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    sys.exit(main())

"""DemoFleet: simulated GPU servers as real daemon processes on loopback, ready to explore.

Each node is `gpufleet daemon --backend simulated --demo`: it starts with a
simulated day of history, runs every workload as the demo's own account under
its owner's name (alice, bob, root: no account of this machine is used or
touched), and ends its workloads when it stops. Once they serve, the demo
queues and starts its users' workloads and makes its reservations
(console/demo_seed.py); gpu-node-02 plays the scripted incident
(resources/scenarios/demo.toml). It writes the profile `demo`
(console/demo_profile.py) so the terminal commands reach the same nodes.

The nodes take a token that only this account can read (a file in the demo's
private directory, named by the profile): on a machine shared with others, no
one else may run commands as the demo's account through them.

`stop()` ends everything it started: the profile first (no command talks to
ports about to close), then the daemons (each ends its workloads), then any
workload a daemon could not end (console/demo_leftovers.py).
"""

from __future__ import annotations

import ctypes
import getpass
import hashlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from console.demo_leftovers import end_leftovers
from console.demo_profile import remove_demo_profile, write_demo_profile
from console.demo_seed import DEMO_PEOPLE, seed_nodes

log = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
DEMO_SCENARIO = RESOURCES / "scenarios" / "demo.toml"
INCIDENT_NODE = 1  # gpu-node-02 plays the scenario
START_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the demo dies, even by SIGKILL or a Qt abort.

    SIGTERM, not SIGKILL: the daemon's stop ends its workloads too.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def node_name(index: int) -> str:
    return f"gpu-node-{index + 1:02d}"


class DemoFleetError(RuntimeError):
    pass


class DemoFleet:
    """Starts N demo daemons and seeds them; stop() ends them, their workloads and the profile.

    Args:
        nodes, gpus, interval_s: the fleet's size and sampling interval.
        seed: whether to queue and start workloads and make reservations.
    """

    def __init__(
        self, nodes: int = 4, gpus: int = 8, interval_s: float = 1.0, seed: bool = True
    ) -> None:
        self._nodes, self._gpus, self._interval_s, self._seed = nodes, gpus, interval_s, seed
        self._tmp = tempfile.TemporaryDirectory(prefix="gpufleet-demo-")
        self.dir = Path(self._tmp.name)
        self._procs: list[subprocess.Popen[bytes]] = []
        self.targets: list[str] = []
        self.token = "gft_" + secrets.token_urlsafe(32)
        self.token_file = self.dir / "token"
        self.profile_path: Path | None = None
        self.refused: list[str] = []  # what a node refused while being seeded

    @property
    def pids(self) -> list[int]:
        """The daemons' process ids (each leads no group: workloads lead their own)."""
        return [p.pid for p in self._procs]

    def start(self) -> list[str]:
        self._write_token()
        ready_files = [self._spawn(i) for i in range(self._nodes)]
        self.targets = [
            self._wait_ready(f, p) for f, p in zip(ready_files, self._procs, strict=True)
        ]
        pids = " ".join(str(p.pid) for p in self._procs)
        log.info("demo daemons serving on %s (pids %s)", " ".join(self.targets), pids)
        if self._seed:
            self.refused = seed_nodes(self.targets, self.token, self._gpus)
            for line in self.refused:
                log.warning("demo: not seeded: %s", line)
        self.profile_path = write_demo_profile(self.targets, self.token_file, DEMO_PEOPLE)
        return self.targets

    def first_message(self) -> str:
        """What the demo says first: its nodes, and how to reach them from a terminal."""
        nodes = "\n".join(f"  {node_name(i)}  {t}" for i, t in enumerate(self.targets))
        incident = (f"\nWatch {node_name(INCIDENT_NODE)}: its GPU 2 overheats to critical in "
                    "the first minutes and cools down again by minute 4; an ECC error, a lost "
                    "GPU and an Xid follow (resources/scenarios/demo.toml)."
                    if self._nodes > INCIDENT_NODE else "")  # fmt: skip
        return (
            f"gpufleet demo: {self._nodes} simulated nodes, each with a day of history, "
            f"demo users' workloads and reservations:\n{nodes}\n"
            "The terminal commands reach them through the profile 'demo':\n"
            "  gpufleet alerts --profile demo\n"
            "  gpufleet queue --profile demo\n"
            "  gpufleet submit --profile demo --owner alice --auto -- sleep 600\n"
            f"(profile {self.profile_path}; removed when the demo ends, with everything it "
            f"started){incident}"
        )

    def _write_token(self) -> None:
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(self.token + "\n")

    def _config(self, i: int) -> Path:
        """The node's daemon.toml: the demo's token (as admin), its own work directory."""
        digest = hashlib.sha256(self.token.encode()).hexdigest()
        work = self.dir / f"node-{i}-work"
        path = self.dir / f"node-{i}.toml"
        path.write_text(
            f'[workloads]\nwork_dir = "{work}/{{id}}"\n\n'
            f'[teams]\nml = ["alice", "carol"]\n\n'
            f'[[auth.users]]\nname = "{getpass.getuser()}"\nrole = "admin"\n'
            f'token_sha256 = "{digest}"\n',
            encoding="utf-8",
        )
        return path

    def _spawn(self, i: int) -> Path:
        ready = self.dir / f"node-{i}.addr"
        argv = [
            sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated", "--demo",
            "--gpus", str(self._gpus), "--seed", str(i), "--listen", "127.0.0.1:0",
            "--interval", str(self._interval_s), "--ready-file", str(ready),
            "--hostname", node_name(i), "--config", str(self._config(i)),
            "--state-dir", str(self.dir / f"node-{i}-state"),
        ]  # fmt: skip
        if i == INCIDENT_NODE and DEMO_SCENARIO.is_file():
            argv += ["--scenario", str(DEMO_SCENARIO)]
        with open(self.dir / f"node-{i}.log", "wb") as log_file:  # the child keeps its own
            self._procs.append(
                subprocess.Popen(
                    argv, stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
                )
            )
        return ready

    def _wait_ready(self, ready: Path, proc: subprocess.Popen[bytes]) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if ready.exists():
                return ready.read_text(encoding="utf-8").strip()
            if proc.poll() is not None:
                log_text = ready.with_suffix(".log").read_text(errors="replace")
                raise DemoFleetError(f"demo daemon exited with {proc.returncode}:\n{log_text}")
            time.sleep(0.05)  # polling a child's file: there is no event to wait on
        raise DemoFleetError(f"demo daemon did not start within {START_TIMEOUT_S:.0f} s")

    def stop(self, grace_s: float = 15.0) -> None:
        """End the profile, the daemons (each ends its workloads) and any workload left."""
        if self.profile_path is not None:
            remove_demo_profile(self.profile_path)
            self.profile_path = None
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        end_leftovers(self.dir)
        self._tmp.cleanup()

    def __enter__(self) -> DemoFleet:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

"""SlurmWatcher: how Slurm sees this node (drained, and why), where the host runs Slurm.

The daemon never schedules anything itself; it only shows Slurm's view next to
the GPUs, so an operator sees at once that a node is drained for a card swap.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

POLL_S = 30.0
SINFO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SlurmNodeState:
    state: str  # lower case, without Slurm's flag suffixes: "idle", "mixed", "drained"...
    reason: str | None


def parse_sinfo(output: str) -> SlurmNodeState | None:
    """Parse `sinfo --noheader --Node --format=%T|%E` for one node."""
    for line in output.splitlines():
        state, _, reason = line.strip().partition("|")
        if state:
            reason = reason.strip()
            return SlurmNodeState(state.strip().rstrip("*~#!%$@^-").lower(),
                                  None if reason in ("", "none") else reason)  # fmt: skip
    return None


class SlurmWatcher:
    """Polls sinfo on thread 'gpufleet-slurm'; `state` is None where there is no Slurm."""

    def __init__(self, host_name: str | None = None, poll_s: float | None = None) -> None:
        # Slurm knows nodes by their short host name.
        self.node_name = (host_name or socket.gethostname()).split(".")[0]
        self._poll_s = POLL_S if poll_s is None else poll_s
        self.state: SlurmNodeState | None = None
        # Said once until it changes: a host with Slurm's client but in no cluster (no
        # slurm.conf) fails the same way every poll, and would log it every 30 s.
        self._problem: str | None = None
        self._answered = False  # sinfo has answered once: a failure now is news
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpufleet-slurm", daemon=True)

    def start(self) -> None:
        if shutil.which("sinfo") is None:
            log.info("no sinfo on PATH: not a Slurm node, Slurm state not shown")
            return
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(SINFO_TIMEOUT_S + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.state = self.poll()
            self._stop.wait(self._poll_s)

    def poll(self) -> SlurmNodeState | None:
        command = ["sinfo", "--noheader", "--Node", "--nodes", self.node_name, "--format=%T|%E"]
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=SINFO_TIMEOUT_S, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._say(f"sinfo failed: {exc}")
            return self.state  # keep the last known state rather than flap
        if result.returncode != 0:
            self._say(f"sinfo exited {result.returncode}: {result.stderr.strip()[:200]}")
            return self.state
        if self._problem is not None:
            log.info("sinfo answers again")
            self._problem = None
        self._answered = True
        return parse_sinfo(result.stdout)

    def _say(self, problem: str) -> None:
        if problem == self._problem:
            return
        self._problem = problem
        if self._answered:
            log.warning("%s (said again only when it changes)", problem)
        else:  # Slurm's client on a host in no cluster (no slurm.conf): nothing is wrong here
            log.info("%s: Slurm state not shown until sinfo answers", problem)

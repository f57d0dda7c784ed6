"""SlurmWatcher: how Slurm sees this node (drained, and why), where the host runs Slurm.

The daemon never schedules anything itself; it only shows Slurm's view next to
the GPUs, so an operator sees at once that a node is drained for a card swap.
"""

from __future__ import annotations

from dataclasses import dataclass

from node_daemon.tool_poller import ToolFailed, ToolPoller

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


class SlurmWatcher(ToolPoller):
    """Polls sinfo on thread 'gpufleet-slurm'; `state` is None where there is no Slurm."""

    tool = "sinfo"
    absent = "no sinfo on PATH: not a Slurm node, Slurm state not shown"
    answers_again = "sinfo answers again"
    # Slurm's client on a host in no cluster (no slurm.conf): nothing is wrong here.
    failing_unanswered = "{problem}: Slurm state not shown until sinfo answers"
    failing_answered = "{problem} (said again only when it changes)"

    def __init__(self, host_name: str | None = None, poll_s: float | None = None) -> None:
        interval_s = POLL_S if poll_s is None else poll_s
        super().__init__("gpufleet-slurm", interval_s, SINFO_TIMEOUT_S, host_name, "sinfo")
        self.state: SlurmNodeState | None = None

    def poll(self) -> SlurmNodeState | None:
        """Ask sinfo; the node's state is kept in `state` and returned."""
        command = ["sinfo", "--noheader", "--Node", "--nodes", self.node_name, "--format=%T|%E"]
        try:
            output = self._ask(command)
        except ToolFailed as exc:
            self._say(str(exc))
            return self.state  # keep the last known state rather than flap
        self._answered_now()
        self.state = parse_sinfo(output)
        return self.state

"""Draining the node in Slurm too, where it runs Slurm, and resuming it only if ours.

Slurm drains nodes, not GPUs: the node is drained while any of its GPUs is
drained by self-healing, with a reason that starts "gpufleet:", and resumed when
the last is returned, but only while Slurm still shows gpufleet's reason. A
drain an operator set (or re-worded) is theirs to resume. Needs an account
Slurm lets update nodes (a Slurm operator, or SlurmUser).
"""

from __future__ import annotations

from collections.abc import Callable

from node_daemon.healing.commands import run_command

PREFIX = "gpufleet:"
TIMEOUT_S = 30.0


class SlurmDrain:
    """`reason_now`: the node's drain reason as sinfo last showed it (None: not known)."""

    def __init__(self, node_name: str, reason_now: Callable[[], str | None]) -> None:
        self.node_name = node_name
        self._reason_now = reason_now

    def drain(self, reason: str) -> str:
        command = ["scontrol", "update", f"NodeName={self.node_name}", "State=DRAIN",
                   f"Reason={PREFIX} {reason}"[:1000]]  # fmt: skip
        return run_command(command, TIMEOUT_S, "Slurm drain")

    def resume(self) -> str:
        reason = self._reason_now()
        if reason is not None and not reason.startswith(PREFIX):
            return f"refused: Slurm's drain reason is no longer gpufleet's ({reason[:100]!r})"
        command = ["scontrol", "update", f"NodeName={self.node_name}", "State=RESUME"]
        return run_command(command, TIMEOUT_S, "Slurm resume")

"""GPU health from the console: drain a GPU from placement or return it, clear its health.

Like ControlActions: each call returns at once and sends one request off the
GUI thread; its CommandResult (the GPU's condition after it, or the node's own
error message) arrives through the inbox. The node takes the actor from the
caller's credential: DrainGpu needs the operator role, ClearGpuHealth admin.
"""

from __future__ import annotations

from console.connections.actions import NodeActions
from console.connections.channel import CALL_DEADLINE_S
from console.connections.decode_health import decode_node_health
from console.fleet.query_round import next_query_id
from gpufleet.v1 import node_pb2 as pb


class HealthActions(NodeActions):
    """The node takes the actor from the caller's credential, not from the request."""

    def drain(self, target: str, gpu: int, reason: str) -> None:
        """Take the GPU out of placement: no new work goes there until it is returned."""
        request = pb.DrainGpuRequest(gpu_index=gpu, drain=True, reason=reason)
        self._send(target, f"drain GPU {gpu} of {target}", "DrainGpu", request)

    def undrain(self, target: str, gpu: int, reason: str = "") -> None:
        """Return the GPU to placement."""
        request = pb.DrainGpuRequest(gpu_index=gpu, drain=False, reason=reason)
        self._send(target, f"return GPU {gpu} of {target} to placement", "DrainGpu", request)

    def clear(self, target: str, gpu: int, reason: str) -> None:
        """Mark the GPU repaired: its reasons are cleared (what was done goes to the audit)."""
        request = pb.ClearGpuHealthRequest(gpu_index=gpu, reason=reason)
        self._send(target, f"clear the health of GPU {gpu} of {target}", "ClearGpuHealth", request)

    def policy(self, target: str) -> None:
        """The node's self-healing policy; the answer (a HealingPolicyRow) goes to the model."""
        self._connections.query(
            target,
            f"health of {target}",
            lambda stub: stub.GetHealth(pb.GetHealthRequest(), timeout=CALL_DEADLINE_S),
            decode_node_health,
            next_query_id(),
        )

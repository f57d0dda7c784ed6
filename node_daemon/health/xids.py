"""What an Xid does to a GPU's health: the state it calls for and what to do.

Until the Xid catalogue (gpufleet.v1.xid_catalogue) is in, a short table of the
codes that matter most for health stands in; an application's Xid (13, 31, 43 ...)
says nothing about the GPU and puts it in no state.
"""

from __future__ import annotations

from dataclasses import dataclass

from node_daemon.health.model import HealthState


@dataclass(frozen=True)
class XidVerdict:
    """An Xid's meaning for health; `state` None: counted, but the GPU is fine."""

    code: int
    state: HealthState | None
    summary: str  # "Xid 79: GPU has fallen off the bus"
    action: str  # "reboot the node"


_RESET, _REBOOT, _INSPECT = "reset the GPU", "reboot the node", "have the hardware inspected"
_FALLBACK: dict[int, tuple[str, HealthState | None, str]] = {
    13: ("graphics engine exception", None, "restart the application"),
    31: ("GPU memory page fault", None, "restart the application"),
    43: ("GPU stopped processing", None, "restart the application"),
    45: ("preemptive cleanup, due to previous errors", None, "none"),
    48: ("double-bit ECC error", HealthState.NEEDS_RESET, _RESET),
    61: ("internal micro-controller breakpoint", HealthState.NEEDS_RESET, _RESET),
    62: ("internal micro-controller halt", HealthState.NEEDS_RESET, _RESET),
    63: ("ECC page retirement or row remapping recorded", HealthState.NEEDS_RESET, _RESET),
    64: ("ECC page retirement or row remapping failure", HealthState.NEEDS_INSPECTION, _INSPECT),
    74: ("NVLink error", HealthState.NEEDS_RESET, _RESET),
    79: ("GPU has fallen off the bus", HealthState.NEEDS_REBOOT, _REBOOT),
    92: ("high single-bit ECC error rate", HealthState.SUSPECT, "watch it"),
    94: ("contained ECC error", HealthState.NEEDS_RESET, _RESET),
    95: ("uncontained ECC error", HealthState.NEEDS_RESET, _RESET),
    119: ("GSP RPC timeout", HealthState.NEEDS_RESET, _RESET),
    120: ("GSP error", HealthState.NEEDS_RESET, _RESET),
}


def xid_verdict(code: int) -> XidVerdict:
    meaning, state, action = _FALLBACK.get(
        code, ("not in our list: see NVIDIA's Xid catalogue", None, "look the code up")
    )
    return XidVerdict(code, state, f"Xid {code}: {meaning}", action)

"""What an Xid does to a GPU's health: the state it calls for and what to do.

From the Xid catalogue (gpufleet.v1.xid_catalogue), which the console and the
alert rules read too: the state is the entry's `health`, the action its words.
An Xid the application survives (13, 31, 43 ...) leaves the GPU healthy; it is
counted all the same. A code the catalogue does not know changes no state: the
`xid` alert rule warns about it and says where to look it up.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.v1.xid_catalogue import describe_xid, xid_entry
from node_daemon.health.model import HealthState


@dataclass(frozen=True)
class XidVerdict:
    """An Xid's meaning for health; `state` None: counted, but the GPU is fine."""

    code: int
    state: HealthState | None
    summary: str  # "Xid 79: GPU has fallen off the bus"
    action: str  # "reboot the node"


def xid_verdict(code: int) -> XidVerdict:
    entry = xid_entry(code)
    if entry is None:
        return XidVerdict(code, None, describe_xid(code), "look the code up in NVIDIA's Xid table")
    state = entry.health
    healthy = state is HealthState.HEALTHY
    return XidVerdict(code, None if healthy else state, describe_xid(code), entry.action.words)

"""How the alert rules read an Xid: its words from the catalogue, its severity by its action.

The catalogue itself, `gpufleet.v1.xid_catalogue`, is shared with the console;
this is the daemon's side of it.
"""

from __future__ import annotations

from collections.abc import Collection

from gpufleet.v1.xid_catalogue import Action, describe_xid, xid_action, xid_advice

__all__ = [
    "Action", "critical_by_default", "describe_xid", "is_critical", "xid_action", "xid_advice",
    "xid_summary",
]  # fmt: skip


def critical_by_default(code: int) -> bool:
    """An Xid that calls for a GPU reset or more pages; one the application survives warns.

    An unknown code warns: the catalogue cannot say, and its alert says where to look.
    """
    return xid_action(code) >= Action.RESET_GPU


def is_critical(code: int, critical: Collection[int] | None) -> bool:
    """By the configured list where there is one (`[alerts.xid] critical`), else the catalogue."""
    return critical_by_default(code) if critical is None else code in critical


def xid_summary(gpu_index: int, code: int) -> str:
    """ "GPU 3: Xid 79: GPU has fallen off the bus; reboot the node": what and what to do."""
    action = xid_action(code)
    todo = "" if action is Action.NONE else f"; {action.words}"
    return f"GPU {gpu_index}: {describe_xid(code)}{todo}"

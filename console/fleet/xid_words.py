"""What an Xid means and what to do about it, from the shared Xid catalogue.

The catalogue (`gpufleet.v1.xid_catalogue`: NVIDIA's public Xid table with each
code's meaning, likely cause and recommended action) is shared with the
daemon's alert text. Where an install has none, an Xid is shown by its number
alone and points to NVIDIA's table, rather than failing the GPU detail.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import ModuleType

XID_TABLE_URL = "https://docs.nvidia.com/deploy/xid-errors/"


@dataclass(frozen=True)
class XidText:
    meaning: str  # "GPU has fallen off the bus"
    advice: str  # "Likely cause: … What to do: reboot the node. …"; "" without a catalogue


@cache
def _catalogue() -> ModuleType | None:
    try:
        return importlib.import_module("gpufleet.v1.xid_catalogue")
    except ImportError:
        return None


def xid_text(code: int) -> XidText:
    """The catalogue's words on an Xid; its number and NVIDIA's table without one."""
    catalogue = _catalogue()
    if catalogue is None:
        return XidText(f"no catalogue installed: see NVIDIA's Xid table, {XID_TABLE_URL}", "")
    # describe_xid says "Xid 79: GPU has fallen off the bus"; the console names the code itself.
    meaning = str(catalogue.describe_xid(code)).removeprefix(f"Xid {code}: ")
    advice = catalogue.xid_advice(code)
    return XidText(meaning, str(advice) if advice else "")

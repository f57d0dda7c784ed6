"""What an Xid means and what to do about it, in the console's words, from the Xid catalogue.

The catalogue (`gpufleet.v1.xid_catalogue`: NVIDIA's public Xid table with each
code's meaning, likely cause and recommended action) is shared with the
daemon's alert text, so the console and the alert say the same of a code.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.v1.xid_catalogue import CATALOGUE_URL, describe_xid, xid_advice, xid_entry

XID_TABLE_URL = CATALOGUE_URL


@dataclass(frozen=True)
class XidText:
    meaning: str  # "GPU has fallen off the bus"
    advice: str  # "Likely cause: … What to do: reboot the node. …"
    known: bool  # in the catalogue; an unknown code's advice says where to look it up


def xid_text(code: int) -> XidText:
    # describe_xid says "Xid 79: GPU has fallen off the bus"; the console names the code itself.
    meaning = describe_xid(code).removeprefix(f"Xid {code}: ")
    return XidText(meaning, xid_advice(code), xid_entry(code) is not None)

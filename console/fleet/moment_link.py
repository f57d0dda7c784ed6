"""Sharing a moment: the command that opens another operator's console where this one is.

`gpufleet console --profile night --at 2026-12-07T03:12:00.000+00:00 --gpu gpu-node-02:3`
opens the console at that moment (replay) with that GPU's detail. The moment is written
in UTC to the millisecond, so it means the same instant on a workstation in another time
zone; the GPU as the grid names it (its node's host name and index), which reads the same
in every profile that watches the node, whatever address that profile reaches it by.
Plain Python, no Qt.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from console.fleet.place_words import place_label, place_matches


@dataclass(frozen=True)
class Place:
    """A GPU of the fleet as the chooser and --gpu know it."""

    target: str  # HOST:PORT, as the console reaches the node
    node_name: str  # its host name, as the grid shows it
    gpu: int


def utc_text(at_ms: int) -> str:
    """ "2026-12-07T03:12:00.000+00:00": the moment, unambiguous in any time zone."""
    moment = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC)
    return moment.isoformat(timespec="milliseconds")


def share_command(at_ms: int, opened_with: Sequence[str], place: Place | None) -> str:
    """The command line that opens a console at `at_ms` (and `place`'s detail).

    `opened_with`: the words that name this console's nodes and settings, as it was
    opened (`--profile NAME`, the `--node` flags given).
    """
    words = ["gpufleet", "console", *opened_with, "--at", utc_text(at_ms)]
    if place is not None:
        words += ["--gpu", f"{place.node_name}:{place.gpu}"]
    return shlex.join(words)


def find_place(typed: str, places: Iterable[Place]) -> Place:
    """The one GPU `typed` names ("gpu-node-02:3", "node-02 3", or HOST:PORT:3).

    Raises:
        ValueError: no GPU fits, or several do; the message says which.
    """
    places = list(places)
    node, _, index = typed.strip().rpartition(":")
    exact = [p for p in places if node in (p.target, p.node_name) and str(p.gpu) == index]
    if len(exact) == 1:  # as share_command writes it (two nodes of one name: read on)
        return exact[0]
    fits = [p for p in places if place_matches(typed, p.node_name, p.gpu)]
    if len(fits) == 1:
        return fits[0]
    if not fits:
        raise ValueError(f"--gpu {typed!r}: no GPU of the fleet fits (write NODE:INDEX, "
                         "e.g. gpu-node-02:3)")  # fmt: skip
    named = ", ".join(place_label(p.node_name, p.gpu) for p in fits[:4])
    more = f" and {len(fits) - 4} more" if len(fits) > 4 else ""
    raise ValueError(f"--gpu {typed!r} fits {len(fits)} GPUs ({named}{more}): name one")

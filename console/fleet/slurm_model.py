"""Slurm's jobs, nodes and reservations as the console holds them (no Qt, no wire format).

console.connections.slurm_rest fills these from slurmrestd's JSON; the parsing of
Slurm's compact strings (GRES lists, TRES requests) lives here because it is
about what the values mean, not how they travelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Slurm's sentinels for "no value" and "unlimited" in 32-bit fields.
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
_GRES_ITEM = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))?:(?P<count>\d+)")
_TRES_GPU = re.compile(
    r"(?:^|[,;])(?:gres[/:])?gpu(?::(?P<type>[^:=,;]+))?[=:](?P<count>\d+)(?=$|[,;])"
)


@dataclass(frozen=True)
class SlurmJob:
    """One job of Slurm's queue, with what the Workloads tab shows of it."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    state: str  # Slurm's word: PENDING, RUNNING, ...
    reason: str  # why it waits ("None" when it does not)
    gpus: int | None  # GPUs asked for, all nodes together; None when it asked for none
    time_limit: timedelta | None  # None: unlimited
    priority: int
    submit_time: datetime
    required_nodes: tuple[str, ...] = ()  # ReqNodeList, as Slurm holds it (may be a range)
    nodes: str = ""  # allocated nodes (running jobs), Slurm's host list

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"


@dataclass(frozen=True)
class SlurmNode:
    """One node as Slurm sees it: state, why, and its GRES in total and in use."""

    name: str
    state: str  # base state: idle, mixed, allocated, down, ...
    flags: tuple[str, ...]  # DRAIN, MAINTENANCE, RESERVED, ...
    reason: str
    gres: Mapping[str, int] = field(default_factory=dict)  # "gpu" / "gpu:a100" -> count
    gres_used: Mapping[str, int] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags or self.state.startswith("drain")

    @property
    def down(self) -> bool:
        return self.state.startswith("down")

    @property
    def gpus(self) -> int:
        return _gpu_total(self.gres)

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus - _gpu_total(self.gres_used))


@dataclass(frozen=True)
class SlurmReservation:
    """A reservation as Slurm lists it."""

    name: str
    nodes: str  # Slurm's host list ("gpu[01-02]")
    start: datetime
    end: datetime
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReservationAsk:
    """A reservation to create: for users or accounts (at least one), on named nodes.

    `start` None means now; give `end` or `duration`, not both.
    """

    name: str
    nodes: tuple[str, ...]
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    duration: timedelta | None = None
    flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.users and not self.accounts:
            raise ValueError(f"reservation {self.name!r}: name the users or accounts it is for")
        if not self.nodes:
            raise ValueError(f"reservation {self.name!r}: name the nodes it reserves")
        if (self.end is None) == (self.duration is None):
            raise ValueError(f"reservation {self.name!r}: give an end or a duration, not both")


def parse_gres(text: str) -> dict[str, int]:
    """Slurm's GRES list ("gpu:a100:4(S:0-1),gpu:2(IDX:0,3)") as counts by name[:type]."""
    counts: dict[str, int] = {}
    for item in _split_outside_parens(text):
        match = _GRES_ITEM.match(item.removeprefix("gres:").removeprefix("gres/"))
        if match is None:
            continue
        key = match["name"] if match["type"] is None else f"{match['name']}:{match['type']}"
        counts[key] = counts.get(key, 0) + count_of(match["count"])
    return counts


def gpus_asked(tres_req: str, per_job: str, per_node: str, node_count: int | None) -> int | None:
    """GPUs a job asked for, all nodes together, from whichever of its TRES fields say it.

    tres_req_str ("...,gres/gpu=4") is the total once Slurm has computed it;
    otherwise --gpus (tres_per_job) or --gres/--gpus-per-node (tres_per_node,
    times the node count).
    """
    for text, factor in ((tres_req, 1), (per_job, 1), (per_node, node_count or 1)):
        count = _gpu_count(text)
        if count is not None:
            return _within_32_bits(count * factor, f"{count} GPUs on each of {factor} nodes")
    return None


def count_of(digits: str) -> int:
    """A count Slurm wrote in a GRES or TRES string; Slurm's counts fit 32 bits.

    Raises:
        ValueError: a count no Slurm sends (a hostile or broken answer), which would
            otherwise reach the tables' sort keys as a number Qt cannot hold.
    """
    if len(digits) > len(str(INFINITE)):
        raise ValueError(f"count {digits[:12]}… has more digits than Slurm's 32 bits")
    return _within_32_bits(int(digits), f"count {digits}")


def minutes_or_unlimited(value: int | None) -> timedelta | None:
    """A time limit in minutes; Slurm's INFINITE and NO_VAL mean no limit."""
    if value is None or value in (NO_VAL, INFINITE):
        return None
    return timedelta(minutes=value)


def _gpu_count(text: str) -> int | None:
    # Slurm may list the total ("gres/gpu=4") beside the typed counts ("gres/gpu:a100=4").
    found = [(m["type"], count_of(m["count"])) for m in _TRES_GPU.finditer(text or "")]
    untyped = [n for kind, n in found if kind is None]
    if untyped or found:
        return sum(untyped) if untyped else sum(n for _, n in found)
    return None


def _within_32_bits(count: int, what: str) -> int:
    if count > INFINITE:
        raise ValueError(f"{what} is beyond Slurm's 32 bits")
    return count


def _gpu_total(gres: Mapping[str, int]) -> int:
    # "gpu" and "gpu:a100" are the same GPUs counted by type where a type is known.
    typed = [n for k, n in gres.items() if k.startswith("gpu:")]
    return sum(typed) if typed else gres.get("gpu", 0)


def _split_outside_parens(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text or "":
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return [*items, current] if current else items

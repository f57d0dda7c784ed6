"""Slurm's view of the fleet as the console last read it, and verdicts on acting through it.

No Qt, no wire format: the Slurm link fills a SlurmView from slurmrestd; the
grid's drop rules, the tile and process menus ask it. A console node is the
Slurm node of its short host name (the daemon's inventory hostname up to the
first dot), the rule node_daemon's SlurmWatcher uses too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from console.fleet.placement import Verdict
from console.fleet.slurm_model import SlurmJob, SlurmNode, SlurmReservation


def slurm_name(hostname: str) -> str:
    """The Slurm node name of a host: its short name ("gpu01.dc1.example" -> "gpu01")."""
    return hostname.split(".")[0]


@dataclass(frozen=True)
class SlurmView:
    """One read of Slurm's queue and nodes; `error` says why the latest read failed."""

    jobs: tuple[SlurmJob, ...] = ()
    nodes: Mapping[str, SlurmNode] = field(default_factory=dict)
    read_at: datetime | None = None
    error: str = ""
    reservations: tuple[SlurmReservation, ...] = ()

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)

    def queue(self) -> tuple[SlurmJob, ...]:
        """Pending and running jobs (what the Workloads tab lists), the others left out."""
        return tuple(j for j in self.jobs if j.state in ("PENDING", "RUNNING"))


def can_steer(job: SlurmJob | None, job_id: int, node: SlurmNode | None, name: str) -> Verdict:
    """May this pending job go to node `name`, in Slurm's terms? What it will do, or why not."""
    if job is None:
        return Verdict(False, f"Slurm no longer lists job {job_id}")
    if not job.pending:
        return Verdict(False, f"job {job.job_id} is {job.state}: only a pending job can be steered")
    if node is None:
        return Verdict(False, f"Slurm has no node {name!r} (nodes map by short host name)")
    if node.drained or node.down:
        why = f": {node.reason}" if node.reason else ""
        return Verdict(False, f"{name} is {node.state} in Slurm{why}")
    partitions = [p for p in job.partition.split(",") if p]
    if partitions and not set(partitions) & set(node.partitions):
        return Verdict(False, f"{name} is not in partition {job.partition} "
                              f"(it is in {', '.join(node.partitions) or 'none'})")  # fmt: skip
    asked = job.gpus or 0
    if asked > node.gpus:
        return Verdict(False, f"job {job.job_id} asks {asked} GPUs; {name} has {node.gpus}")
    what = f"Steer Slurm job {job.job_id} ({job.name}) to {name}"
    if asked > node.gpus_free:
        return Verdict(True, f"{what}: it waits there, {node.gpus_free} of {node.gpus} GPUs free")
    return Verdict(True, f"{what}: {node.gpus_free} of {node.gpus} GPUs free")


def job_words(job: SlurmJob | None, job_id: int) -> str:
    """'Slurm job 42 (ada, train-llm)', or the bare id where Slurm no longer lists it."""
    if job is None:
        return f"Slurm job {job_id}"
    return f"Slurm job {job.job_id} ({job.user}, {job.name})"


@dataclass(frozen=True)
class SlurmReserve:
    """A holder dropped on Slurm nodes: a Slurm reservation for them, on those nodes.

    `targets` are the console's nodes (each one's audit log gets the record), in
    the order of `nodes`, their Slurm names.
    """

    holder: str
    targets: tuple[str, ...]
    nodes: tuple[str, ...]

    @property
    def users(self) -> tuple[str, ...]:
        return () if self.holder.startswith("team:") else (self.holder,)

    @property
    def accounts(self) -> tuple[str, ...]:
        """A team reserves as the Slurm account of its name."""
        return (self.holder.removeprefix("team:"),) if self.holder.startswith("team:") else ()


def can_reserve_in_slurm(
    holder: str, view: SlurmView, named: Mapping[str, str]
) -> tuple[SlurmReserve | None, Verdict]:
    """Reserve the nodes (console target -> Slurm name) in Slurm for a user or team:NAME."""
    unknown = sorted(name for name in named.values() if name not in view.nodes)
    if unknown:
        return None, Verdict(False, f"Slurm has no node {', '.join(unknown)}")
    down = sorted(name for name in named.values() if view.nodes[name].down)
    if down:
        return None, Verdict(False, f"{', '.join(down)} down in Slurm")
    ask = SlurmReserve(holder, tuple(named), tuple(named.values()))
    whom = f"account {ask.accounts[0]}" if ask.accounts else holder
    return ask, Verdict(True, f"Reserve {', '.join(ask.nodes)} in Slurm for {whom}…")


_RANGE = re.compile(r"([^\[,]*)\[([^\]]+)\]([^,]*)")


def expand_hostlist(hosts: str) -> tuple[str, ...]:
    """Slurm's host list as names: "gpu[01-02],cpu7" -> gpu01, gpu02, cpu7 (one bracket)."""
    names: list[str] = []
    for match_or_name in re.finditer(r"[^,\[]*(?:\[[^\]]*\])?[^,]*", hosts):
        item = match_or_name.group(0)
        ranged = _RANGE.fullmatch(item)
        if ranged is None:
            names += [item] if item else []
            continue
        head, spans, tail = ranged.groups()
        for span in spans.split(","):
            low, _, high = span.partition("-")
            for n in range(int(low), int(high or low) + 1):
                names.append(f"{head}{n:0{len(low)}d}{tail}")
    return tuple(names)


def reservation_name(holder: str, stamp: str) -> str:
    """A Slurm reservation name for a holder ("team:ml" -> "gpufleet-ml-1201-2215")."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"gpufleet-{holder.removeprefix('team:')}-{stamp}")

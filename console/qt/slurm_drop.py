"""SlurmDropRules: Slurm drags judged from Slurm's view: a pending job over a node's tile,
a holder over Slurm nodes, a node over the drain zone."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from PySide6.QtCore import QMimeData

from console.fleet.model import FleetModel
from console.fleet.placement import Place, Verdict
from console.fleet.slurm_view import (
    SlurmReserve,
    can_reserve_in_slurm,
    can_steer,
    job_words,
    slurm_name,
)
from console.qt.mime import read_node
from console.qt.slurm_mime import SLURM_JOB_MIME, read_slurm_job
from console.qt.slurm_watch import SlurmWatch


@dataclass(frozen=True)
class SlurmSteer:
    """What a drop of a Slurm job on a tile asks: job `job_id` to Slurm node `node`."""

    target: str  # the console's node (its audit log gets the record)
    node: str
    job_id: int
    words: str  # "Slurm job 42 (ada, train)"


class SlurmDropRules:
    def __init__(self, fleet: FleetModel, watch: SlurmWatch) -> None:
        self._fleet = fleet
        self._watch = watch

    @staticmethod
    def carries(data: QMimeData) -> bool:
        return data.hasFormat(SLURM_JOB_MIME)

    def judge(self, data: QMimeData, target: str, gpu: int) -> tuple[SlurmSteer | None, Verdict]:
        job_id = read_slurm_job(data)
        if job_id is None:
            return None, Verdict(False, "the drag names no Slurm job")
        view, node = self._watch.view, self._fleet.node(target)
        if node.info is None:
            return None, Verdict(False, f"{target} has not said its host name (its Slurm name)")
        name = slurm_name(node.name)
        job = view.job(job_id)
        verdict = can_steer(job, job_id, view.nodes.get(name), name)
        if not verdict.ok:
            return None, verdict
        places = tuple((target, i) for i in range(node.gpu_count)) or ((target, gpu),)
        steer = SlurmSteer(target, name, job_id, job_words(job, job_id))
        return steer, Verdict(True, verdict.reason, places)

    def judge_drain(self, data: QMimeData) -> tuple[tuple[str, str] | None, Verdict]:
        """A node dragged over the drain zone: (target, Slurm name) to drain, and the verdict.

        Only Slurm's view is judged (a node Slurm has, not drained already); whether
        the person may drain it is Slurm's to say, as from the tile's menu.
        """
        dragged = read_node(data)
        if dragged is None or dragged[0] not in {n.target for n in self._fleet}:
            return None, Verdict(False, "the drag names no node of this console")
        target = dragged[0]
        node = self._fleet.node(target)
        if node.info is None:
            return None, Verdict(False, f"{node.name} has not said its host name (its Slurm name)")
        name = slurm_name(node.name)
        known = self._watch.view.nodes.get(name)
        if known is None:
            return None, Verdict(False, f"{name} is not a node of this Slurm")
        if known.drained:
            why = f" ({known.reason})" if known.reason else ""
            return None, Verdict(False, f"{name} is drained already{why}: resume it from its menu")
        places = tuple((target, i) for i in range(node.gpu_count))
        return (target, name), Verdict(True, f"drain {name} in Slurm (a reason is asked)", places)

    def reserves(self, target: str) -> bool:
        """Does a holder dropped on this node's tile reserve it in Slurm (a node Slurm has)?"""
        node = self._fleet.node(target)
        return node.info is not None and slurm_name(node.name) in self._watch.view.nodes

    def judge_holder(
        self, holder: str, target: str, gpu: int, selection: Collection[Place]
    ) -> tuple[SlurmReserve | None, Verdict]:
        """The hovered node, or every selected node where the hovered tile is selected."""
        chosen = {t for t, _ in selection} if (target, gpu) in selection else {target}
        targets = sorted(chosen, key=lambda t: self._fleet.node(t).name)
        named = {t: slurm_name(self._fleet.node(t).name) for t in targets
                 if self._fleet.node(t).info is not None}  # fmt: skip
        if len(named) < len(targets):
            return None, Verdict(False, "a selected node has not said its host name yet")
        ask, verdict = can_reserve_in_slurm(holder, self._watch.view, named)
        places = tuple((t, i) for t in targets for i in range(self._fleet.node(t).gpu_count))
        return ask, Verdict(verdict.ok, verdict.reason, places if verdict.ok else ())

"""TileDropRules: what a drag over a GPU tile carries, and the verdict on dropping it there.

Reads the drag's MIME data, looks the current state up in the fleet model, and
asks the pure verdicts in console.fleet.placement.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from PySide6.QtCore import QMimeData

from console.fleet.control import WorkloadRow
from console.fleet.model import FleetModel
from console.fleet.moment import PAST_REFUSAL
from console.fleet.placement import Place, Verdict, can_assign, can_reserve
from console.fleet.slurm_view import SlurmReserve
from console.fleet.wall_clock import unix_now_ms
from console.qt.mime import HOLDER_MIME, WORKLOAD_MIME, read_holder, read_workload
from console.qt.slurm_drop import SlurmDropRules, SlurmSteer


@dataclass(frozen=True)
class TileDrop:
    """A drag judged over one tile: a queued workload to assign, or a holder to reserve for."""

    workload: WorkloadRow | None
    holder: str | None
    verdict: Verdict
    slurm_job: SlurmSteer | None = None  # a pending Slurm job to steer to the tile's node
    slurm_reserve: SlurmReserve | None = None  # a holder on Slurm nodes: reserve them there


class TileDropRules:
    def __init__(self, fleet: FleetModel, clock: Callable[[], int] = unix_now_ms) -> None:
        self._fleet = fleet
        self._clock = clock
        self.slurm: SlurmDropRules | None = None  # with a profile's Slurm: its jobs drop too

    def carries(self, data: QMimeData) -> bool:
        """Is this a drag a tile takes at all (whatever the verdict)?"""
        if self.slurm is not None and self.slurm.carries(data):
            return True
        return data.hasFormat(WORKLOAD_MIME) or data.hasFormat(HOLDER_MIME)

    def judge(
        self, data: QMimeData, target: str, gpu: int, selection: Collection[Place] = ()
    ) -> TileDrop:
        if self._fleet.replaying:  # a tile of the past takes nothing
            return TileDrop(None, None, Verdict(False, PAST_REFUSAL))
        if self.slurm is not None and self.slurm.carries(data):
            steer, verdict = self.slurm.judge(data, target, gpu)
            return TileDrop(None, None, verdict, steer)
        now = self._clock()
        named = read_workload(data)
        if named is not None:
            workload = self._fleet.control.workload(*named)
            if workload is None:
                return TileDrop(None, None, Verdict(False, f"workload {named[1]} is not known"))
            verdict = can_assign(workload, self._fleet, target, gpu, now, selection)
            return TileDrop(workload, None, verdict)
        holder = read_holder(data)
        if holder is not None and self.slurm is not None and self.slurm.reserves(target):
            # Slurm owns reservations on its nodes: the drop asks it, not the daemon.
            ask, verdict = self.slurm.judge_holder(holder, target, gpu, selection)
            return TileDrop(None, None, verdict, slurm_reserve=ask)
        if holder is not None:
            verdict = can_reserve(holder, self._fleet, target, gpu, now, selection)
            return TileDrop(None, holder, verdict)
        return TileDrop(None, None, Verdict(False, "tiles take queued workloads, users and teams"))

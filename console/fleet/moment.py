"""Incident replay's model: the fleet at a past moment, shown in place of the live one.

Time is a dimension of the whole console: the fleet model is fed live (the node links)
or from a moment (each node's GetStateAt), and the same grid, alert table and panels
show either. While a moment is shown, the live feed keeps updating the live state
beside it (FleetModel.live_alerts, live_control, each NodeRecord's ring and live
snapshots), so leaving replay shows the fleet as it is now at once.

`ShownMoment` is what the FleetModel shows instead: each node's answer for the moment
(a `NodeMoment`: ring rows and snapshots as a tick of its own, the alerts firing, the
reservations and workloads), and books that answer as of the moment whatever "now" a
view passes. It also decides what to ask: at most one GetStateAt per node in flight,
and while one is, only the newest moment wanted waits (a dragged cursor asks a frame's
worth, never a queue of every position it passed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import AlertBook
from console.fleet.control import ControlBook, ReservationRow, WorkloadRow
from console.fleet.health import GpuCondition
from console.fleet.updates import GpuSnapshot
from gpufleet.v1.health_states import HealthState

# Why nothing that changes the fleet is offered or taken while a moment is shown.
PAST_REFUSAL = "showing the past"


@dataclass(frozen=True)
class NodeMoment:
    """One node at a moment, as its GetStateAt answered (or why it did not)."""

    target: str
    at_ms: int
    rows: npt.NDArray[np.float32]  # (gpus, columns) as a ring's row; NaN: not known then
    snapshots: dict[int, GpuSnapshot]
    alerts: tuple[AlertRow, ...] = ()
    reservations: tuple[ReservationRow, ...] = ()
    workloads: tuple[WorkloadRow, ...] = ()
    tier: str = ""  # the history tier the readings come from ("" none)
    step_s: float = 0.0
    note: str = ""  # what the node said is missing; or why it gave no answer
    answered: bool = True


def judged_then(moment: NodeMoment, judged: Collection[int]) -> NodeMoment:
    """The moment with a healthy condition for each GPU the node judges (`judged`: those
    whose live samples carry a condition) that had none in the journal then: the daemon
    journals every change of a GPU's condition, so none before the moment is healthy and
    in placement, not "not judged"."""
    snapshots = {
        index: dataclasses.replace(snap, condition=GpuCondition(index, HealthState.HEALTHY))
        if snap.condition is None and index in judged else snap
        for index, snap in moment.snapshots.items()
    }  # fmt: skip
    return dataclasses.replace(moment, snapshots=snapshots)


def unanswered(target: str, at_ms: int, gpu_count: int, columns: int, why: str) -> NodeMoment:
    """A node that gave no answer for the moment: nothing known, and why."""
    rows = np.full((gpu_count, columns), np.nan, dtype=np.float32)
    return NodeMoment(target, at_ms, rows, {}, note=why, answered=False)


class MomentAlertBook(AlertBook):
    """The alerts firing at a moment: silenced or not as of the moment, not of now."""

    def __init__(self, at_ms: int) -> None:
        super().__init__()
        self.at_ms = at_ms

    def active(self, now_unix_ms: int) -> Iterator[AlertRow]:
        return super().active(self.at_ms)


class MomentControlBook(ControlBook):
    """The reservations in force and workloads queued or running at a moment."""

    def __init__(self, at_ms: int) -> None:
        super().__init__()
        self.at_ms = at_ms

    def reservation_on(self, target: str, gpu: int, now_unix_ms: int) -> ReservationRow | None:
        return super().reservation_on(target, gpu, self.at_ms)


class ShownMoment:
    """The moment the console shows: what each node answered, and what to ask next."""

    def __init__(self, at_ms: int) -> None:
        self.wanted_ms = at_ms
        # Each node's newest answer, kept while a newer moment is on its way (the tile
        # shows the past it last knew, never the live value under a replay banner).
        self.nodes: dict[str, NodeMoment] = {}
        self._in_flight: dict[int, tuple[str, int]] = {}  # query id -> (node, moment)
        self.alerts = MomentAlertBook(at_ms)
        self.control = MomentControlBook(at_ms)
        # The sample step (ms) of the tier the last answer came from; 0: none yet.
        self.step_ms = 0

    def want(self, at_ms: int) -> None:
        """The cursor moved: this moment is the one to show (asked when a node is free)."""
        self.wanted_ms = self.alerts.at_ms = self.control.at_ms = at_ms
        self.alerts.version += 1  # as of another moment: silences and reservations differ
        self.control.version += 1

    def due(self, targets: Iterable[str], most: int | None = None) -> list[str]:
        """The nodes to ask now: none in flight, and not already showing the wanted moment;
        with `most`, that many at most, those showing the oldest moment first (so under a
        budget every node moves in turn)."""
        busy = {target for target, _ in self._in_flight.values()}
        due = [t for t in targets if t not in busy and not self.shows(t, self.wanted_ms)]
        if most is None:
            return due
        return sorted(due, key=self._shown_ms)[:most]

    def _shown_ms(self, target: str) -> int:
        moment = self.nodes.get(target)
        return moment.at_ms if moment is not None else -1

    def shows(self, target: str, at_ms: int) -> bool:
        moment = self.nodes.get(target)
        return moment is not None and moment.at_ms == at_ms

    def asked(self, target: str, at_ms: int, query_id: int) -> None:
        self._in_flight[query_id] = (target, at_ms)

    def expects(self, query_id: int) -> bool:
        return query_id in self._in_flight

    def asked_at(self, query_id: int) -> int:
        """The moment a query in flight asks for (the wanted one for any other)."""
        return self._in_flight.get(query_id, ("", self.wanted_ms))[1]

    def take(self, query_id: int, moment: NodeMoment) -> bool:
        """A node's answer (or its failure, as an unanswered moment); False: not ours."""
        if self._in_flight.pop(query_id, None) is None:
            return False
        self.nodes[moment.target] = moment
        if moment.answered and moment.step_s > 0:
            self.step_ms = round(moment.step_s * 1000)
        self._file(moment)
        return True

    def _file(self, moment: NodeMoment) -> None:
        self.alerts.replace_node_alerts(moment.target, moment.alerts, "", 0)
        self.control.replace_node(moment.target, moment.reservations, moment.workloads)

    @property
    def waiting(self) -> int:
        """Nodes whose answer is on its way."""
        return len(self._in_flight)

    def lagging(self) -> list[str]:
        """Nodes not yet showing the wanted moment."""
        return [t for t, m in self.nodes.items() if m.at_ms != self.wanted_ms]

    def late(self) -> list[str]:
        """The nodes not settled at the wanted moment: an answer out, or an older one shown."""
        asked = {target for target, _ in self._in_flight.values()}
        return sorted(asked | set(self.lagging()))

    @property
    def settled(self) -> bool:
        """Every node asked has answered for the wanted moment (or said why not)."""
        return not self.late()

    def unanswered(self) -> list[NodeMoment]:
        """The nodes whose last answer was a failure (unreachable, an older daemon)."""
        return [m for m in self.nodes.values() if not m.answered]

"""FleetModel: every node and GPU the console watches, in plain Python.

Applied to only from the GUI thread, once per frame, with updates the network
thread decoded. Qt item models adapt it for views; it imports no Qt.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import AlertBook, EventRow
from console.fleet.columns import COLUMN_COUNT, Row, value
from console.fleet.control import ControlBook, ReservationRow, WorkloadRow
from console.fleet.health import GpuCondition, HealingPolicyRow
from console.fleet.identity import Identity, role_refusal
from console.fleet.moment import PAST_REFUSAL, NodeMoment, ShownMoment, judged_then, unanswered
from console.fleet.not_responding import NotRespondingAlarm, is_local
from console.fleet.ring import SampleRing
from console.fleet.silences import SilenceBook, SilenceListing, SilenceRow
from console.fleet.staleness import DataWatchdog, Quiet
from console.fleet.updates import (
    AlertsUpdate,
    CommandResult,
    ControlUpdate,
    EventUpdate,
    GpuSnapshot,
    IdentityUpdate,
    InventoryUpdate,
    LinkState,
    LinkUpdate,
    NodeInfo,
    QueryResult,
    QueueUpdate,
    SamplesUpdate,
    Update,
)
from gpufleet.policy import Role
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import GpuMetric

# About 17 minutes at the default 1 s tick: enough for the 10-minute plots.
DEFAULT_RING_CAPACITY = 1024


class Change(enum.Enum):
    NONE = 0
    DATA = 1  # values of existing GPUs or the link state changed
    STRUCTURE = 2  # the node's GPUs appeared, vanished or changed in number


@dataclass
class NodeRecord:
    target: str
    state: LinkState = LinkState.CONNECTING
    state_detail: str = ""
    info: NodeInfo | None = None
    # Every number the node's GPUs reported, newest last (`value`, `newest`)...
    ring: SampleRing | None = None
    # ...and the rest of each GPU's newest sample (health, error, processes).
    live_latest: dict[int, GpuSnapshot] = field(default_factory=dict)
    samples_received: int = 0
    # Who we are on the node (WhoAmI); None until it said, or when it cannot.
    identity: Identity | None = None
    # What its self-healing may do (GetHealth, asked when one of its GPUs is shown).
    healing: HealingPolicyRow | None = None
    # The past moment shown instead of the newest tick while the console replays
    # (console.fleet.moment); the ring and live_latest keep taking the live feed.
    moment: NodeMoment | None = None

    @property
    def name(self) -> str:
        return self.info.hostname if self.info else self.target

    @property
    def gpu_count(self) -> int:
        return len(self.info.gpus) if self.info else 0

    @property
    def latest(self) -> dict[int, GpuSnapshot]:
        """Each GPU's shown snapshot: the newest tick's, or the replayed moment's."""
        return self.moment.snapshots if self.moment is not None else self.live_latest

    def newest(self) -> npt.NDArray[np.float32] | None:
        """The shown tick's rows (gpus, columns): the ring's newest, or the replayed
        moment's; None before the first sample."""
        if self.moment is not None:
            return self.moment.rows
        return self.ring.newest() if self.ring is not None else None

    def row(self, gpu: int) -> Row | None:
        """One GPU's newest ring row, or None before its first sample."""
        newest = self.newest()
        return newest[gpu] if newest is not None and gpu < len(newest) else None

    def value(self, gpu: int, metric: GpuMetric[Any]) -> float | None:
        """A GPU's newest value of a shown metric, in its shown unit; None: not available."""
        return value(self.row(gpu), metric)


@dataclass(frozen=True)
class GpuKey:
    target: str
    index: int


class FleetModel:
    def __init__(
        self,
        ring_capacity: int = DEFAULT_RING_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._ring_capacity = ring_capacity
        # Which nodes went quiet (by when their batches arrived), and the alert for it.
        self.watchdog = DataWatchdog(clock)
        self._alarm = NotRespondingAlarm(wall_clock)
        self._quiet: dict[str, Quiet] = {}
        self._nodes: dict[str, NodeRecord] = {}
        # The live feed's books; `alerts` and `control` are the shown ones (these, or a
        # replayed moment's: console.fleet.moment).
        self.live_alerts = AlertBook()
        self.live_control = ControlBook()
        self.silences = SilenceBook()
        self.moment: ShownMoment | None = None
        # Events applied since the last take_new_events(): what notifiers look at.
        self._new_events: list[EventRow] = []
        self._worst: tuple[tuple[int, int], dict[tuple[str, int | None], Severity]] = ((-1, 0), {})

    # -- the shown moment: live, or the past (console.fleet.moment) ----------------

    @property
    def alerts(self) -> AlertBook:
        """The shown alerts: the live ones, or those firing at the replayed moment."""
        return self.moment.alerts if self.moment is not None else self.live_alerts

    @property
    def control(self) -> ControlBook:
        """The shown reservations and workloads: live, or in force at the moment."""
        return self.moment.control if self.moment is not None else self.live_control

    @property
    def replaying(self) -> bool:
        return self.moment is not None

    def show_moment(self, at_ms: int) -> dict[str, Change]:
        """Show the fleet at `at_ms` (Unix ms): each node's answer replaces its live tick
        as it comes (FleetModel.apply); until then a node shows the moment it last
        answered for, or nothing known. The nodes whose view changes now."""
        if self.moment is not None:
            # Nothing shown changes until a node answers for it (its answer marks it): a
            # drag or Play moves the cursor every frame, and marking every node then had
            # every view redo the whole fleet each frame.
            self.moment.want(at_ms)
            return {}
        self.moment = ShownMoment(at_ms)
        _hand_over((self.live_alerts, self.live_control), (self.alerts, self.control))
        for node in self._nodes.values():
            node.moment = unanswered(node.target, at_ms, node.gpu_count, COLUMN_COUNT, "")
        return dict.fromkeys(self._nodes, Change.DATA)

    def show_live(self) -> dict[str, Change]:
        """Back to the live feed: every view shows the fleet as it is now."""
        if self.moment is None:
            return {}
        moment, self.moment = self.moment, None
        _hand_over((moment.alerts, moment.control), (self.alerts, self.control))
        for node in self._nodes.values():
            node.moment = None
        return dict.fromkeys(self._nodes, Change.DATA)

    def _take_moment(self, node: NodeRecord, answer: QueryResult) -> Change:
        assert self.moment is not None
        moment = answer.payload
        if not answer.ok or not isinstance(moment, NodeMoment):
            asked = self.moment.asked_at(answer.query_id)
            moment = unanswered(node.target, asked, node.gpu_count, COLUMN_COUNT, answer.message)
        if not self.moment.take(answer.query_id, moment):
            return Change.NONE
        if len(moment.rows) != node.gpu_count:  # the node's GPUs changed since: as it has them
            rows = np.full((node.gpu_count, COLUMN_COUNT), np.nan, dtype=np.float32)
            shared = min(len(rows), len(moment.rows))
            rows[:shared] = moment.rows[:shared]
            moment = dataclasses.replace(moment, rows=rows)
        judged = [i for i, snap in node.live_latest.items() if snap.condition is not None]
        node.moment = judged_then(moment, judged)
        return Change.DATA

    def add_node(self, target: str) -> NodeRecord:
        return self._nodes.setdefault(target, NodeRecord(target))

    def node(self, target: str) -> NodeRecord:
        return self._nodes[target]

    def name_of(self, target: str) -> str:
        """The node's host name, or its address for a node the console does not watch."""
        node = self._nodes.get(target)
        return node.name if node is not None else target

    def nodes(self) -> list[NodeRecord]:
        return list(self._nodes.values())

    def __iter__(self) -> Iterator[NodeRecord]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def gpu_total(self) -> int:
        return sum(n.gpu_count for n in self._nodes.values())

    def apply_all(self, updates: Iterable[Update]) -> dict[str, Change]:
        """Apply updates in order; returns the strongest change per node."""
        changes: dict[str, Change] = {}
        for update in updates:
            change = self.apply(update)
            previous = changes.get(update.target, Change.NONE)
            changes[update.target] = max(previous, change, key=lambda c: c.value)
        return {t: c for t, c in changes.items() if c is not Change.NONE}

    def apply(self, update: Update) -> Change:
        node = self._nodes.get(update.target)
        if node is None:
            return Change.NONE  # a node removed while its update was in flight
        if isinstance(update, LinkUpdate):
            return self._apply_link(node, update)
        if isinstance(update, InventoryUpdate):
            return self._apply_inventory(node, update)
        if isinstance(update, SamplesUpdate):
            return self._apply_samples(node, update)
        if isinstance(update, ControlUpdate):
            self.live_control.replace_node(update.target, update.reservations, update.workloads)
            return Change.DATA
        if isinstance(update, QueueUpdate):
            changed = [self.live_control.apply(w) for w in update.workloads]
            return Change.DATA if any(changed) else Change.NONE
        if isinstance(update, IdentityUpdate):
            if update.identity != node.identity:  # the same again (each poll): keep the object
                node.identity = update.identity
            return Change.DATA
        if isinstance(update, QueryResult):
            if isinstance(update.payload, SilenceListing):
                self.silences.replace_node(update.target, update.payload.rows)
                return Change.DATA
            if isinstance(update.payload, HealingPolicyRow):
                node.healing = update.payload
                return Change.DATA
            if self.moment is not None and self.moment.expects(update.query_id):
                return self._take_moment(node, update)
            return Change.NONE  # for whoever asked; the fleet keeps no other query results
        return self._apply_alerting(update)

    def _apply_alerting(self, update: AlertsUpdate | EventUpdate | CommandResult) -> Change:
        if isinstance(update, AlertsUpdate):
            self.live_alerts.replace_node_alerts(
                update.target, update.alerts, update.journal_id, update.last_seq
            )
            return Change.DATA
        if isinstance(update, EventUpdate):
            if not self.live_alerts.add_event(update.event, update.journal_id):
                return Change.NONE  # seen already: every event is shown once
            self._new_events.append(update.event)
            for record in (update.event.reservation, update.event.workload):
                if record is not None:
                    self.live_control.apply(record)
            if update.event.silence is not None:
                self.silences.apply(update.event.silence)
            if update.event.condition is not None and not update.event.replayed:
                self._take_condition(update.target, update.event.condition)
            return Change.DATA
        # An answer that carries a record is the daemon's word on it: take it now,
        # rather than a frame later with the event (never moving a record back).
        if isinstance(update.payload, ReservationRow | WorkloadRow):
            return Change.DATA if self.live_control.apply(update.payload) else Change.NONE
        if isinstance(update.payload, SilenceRow):
            return Change.DATA if self.silences.apply(update.payload) else Change.NONE
        if isinstance(update.payload, GpuCondition):
            return self._take_condition(update.target, update.payload)
        return Change.NONE

    def _take_condition(self, target: str, condition: GpuCondition) -> Change:
        """A drain or clear answered (or announced): the tile shows it now, not a tick later."""
        node = self._nodes.get(target)
        snap = node.live_latest.get(condition.gpu_index) if node is not None else None
        if node is None or snap is None:
            return Change.NONE
        node.live_latest[condition.gpu_index] = dataclasses.replace(snap, condition=condition)
        return Change.DATA

    def take_new_events(self) -> list[EventRow]:
        events, self._new_events = self._new_events, []
        return events

    def alert_severity(self, target: str, gpu: int | None, now_unix_ms: int) -> Severity | None:
        """The worst active (firing, not silenced) alert on a GPU, or on the node for None."""
        stamp = (self.alerts.version, now_unix_ms // 1000)
        if self._worst[0] != stamp:
            self._worst = (stamp, self.alerts.worst_by_gpu(now_unix_ms))
        return self._worst[1].get((target, gpu))

    def _apply_link(self, node: NodeRecord, update: LinkUpdate) -> Change:
        node.state, node.state_detail = update.state, update.detail
        self.watchdog.link(node.target, update.state, update.detail)
        if update.state is LinkState.DENIED:
            node.identity = None  # whoever we were, the node no longer takes us
        return Change.DATA

    # -- what the caller's roles allow -----------------------------------------

    def role_refusal(self, target: str, needed: Role, *, live: bool = False) -> str | None:
        """Why our role on the node does not allow what needs `needed`; None when it does.

        While the past is shown, nothing that changes the fleet is allowed (every change
        needs an operator or more); `live`: asked for the fleet as it is now, whatever
        is shown (a query that needs a role, the audit log; the console's own repairs).
        """
        node = self._nodes.get(target)
        if node is None:
            return None
        if self.moment is not None and needed > Role.VIEWER and not live:
            return PAST_REFUSAL
        return role_refusal(node.identity, needed, node.name)

    def targets_with_role(self, needed: Role) -> list[str]:
        """Nodes on which we are known to hold `needed` (or more)."""
        return [n.target for n in self if n.identity is not None and n.identity.role >= needed]

    def fleet_role_refusal(self, needed: Role) -> str | None:
        """None if some connected node allows `needed` (or cannot say), else why not."""
        if self.moment is not None and needed > Role.VIEWER:
            return PAST_REFUSAL
        connected = [n for n in self if n.state is LinkState.CONNECTED]
        refusals = [role_refusal(n.identity, needed, n.name) for n in connected]
        if not connected or any(r is None for r in refusals):
            return None
        if len(refusals) == 1:
            return refusals[0]
        return f"needs the {needed.label} role on a node (not held on any connected node)"

    def _apply_inventory(self, node: NodeRecord, update: InventoryUpdate) -> Change:
        old_uuids = [g.uuid for g in node.info.gpus] if node.info else None
        # Each node's inventory comes again every 30 s, mostly unchanged: keeping the
        # object lets views that compare by identity (the inventory table, every frame)
        # skip the fleet-wide deep comparison.
        if update.info != node.info:
            node.info = update.info
        self.watchdog.set_interval(node.target, update.info.sample_interval_s)
        if old_uuids == [g.uuid for g in update.info.gpus] and node.ring is not None:
            return Change.DATA  # same GPUs: keep the history across reconnects
        node.ring = SampleRing(self._ring_capacity, len(update.info.gpus), COLUMN_COUNT)
        node.live_latest = {}
        return Change.STRUCTURE

    def _apply_samples(self, node: NodeRecord, update: SamplesUpdate) -> Change:
        self.watchdog.batch(node.target, update.time_s)  # any batch: the node is alive
        if node.ring is None or node.info is None or len(update.rows) != node.ring.gpu_count:
            return Change.NONE  # decoded against an inventory that has since changed
        interval = node.info.sample_interval_s
        if not node.ring.append(update.time_s, update.rows, interval):
            return Change.NONE  # already have it (a replay overlapping what we hold)
        node.live_latest.update((g.index, g) for g in update.gpus)
        node.samples_received += 1
        return Change.DATA

    # -- nodes gone quiet (console.fleet.staleness, console.fleet.not_responding) --

    def check_staleness(self) -> dict[str, Change]:
        """Judge every node's silence now (once per frame); raise or clear the console's
        own not-responding alert. Returns the nodes whose staleness looks different."""
        before, self._quiet = self._quiet, self.watchdog.quiet()
        for event in self._alarm.update(self._quiet, self.name_of):
            self._add_local_event(event)
        for alert in self._alarm.refresh(self._quiet):
            self.live_alerts.put_local(alert)  # "Now": how long it has been quiet, every second
        shown = {t for t in before.keys() | self._quiet.keys()
                 if _looks(before.get(t)) != _looks(self._quiet.get(t))}  # fmt: skip
        return {t: Change.DATA for t in shown if t in self._nodes}

    def quiet(self, target: str) -> Quiet | None:
        """How long the node has been quiet, as of the last check; None: it is not (or the
        past is shown: a node's silence now says nothing of then)."""
        return self._quiet.get(target) if self.moment is None else None

    def name_on(self, target: str, fallback: str) -> str:
        """Our name on the node, as its WhoAmI gave it ("local" without authentication):
        what the console records about a node itself names us as the node's own records
        do. `fallback` (the console's login name) until the node has said."""
        node = self._nodes.get(target)
        return node.identity.user if node is not None and node.identity is not None else fallback

    def acknowledge_local(self, alert: AlertRow, actor: str) -> bool:
        """Acknowledge one of the console's own alerts here; False: not ours, ask the node.

        Recorded as by our name on the alert's node (name_on), `actor` until it is known.
        """
        if not is_local(alert):
            return False
        event = self._alarm.acknowledge(alert, self.name_on(alert.target, actor))
        if event is not None:
            self._add_local_event(event)
        return True

    def silence_local(self, alert: AlertRow, duration_s: int, actor: str, reason: str) -> bool:
        """Silence one of the console's own alerts here; False: not ours, ask the node."""
        if not is_local(alert):
            return False
        event = self._alarm.silence(alert, duration_s, self.name_on(alert.target, actor), reason)
        if event is not None:
            self._add_local_event(event)
        return True

    def _add_local_event(self, event: EventRow) -> None:
        self.live_alerts.add_local_event(event)
        self._new_events.append(event)

    def snapshot(self, key: GpuKey) -> GpuSnapshot | None:
        node = self._nodes.get(key.target)
        return node.latest.get(key.index) if node else None


def _hand_over(before: tuple[AlertBook, ControlBook], after: tuple[AlertBook, ControlBook]) -> None:
    """The books shown next get a version past those shown before: views that compare
    versions (to skip a refresh) refresh, whichever books they now read."""
    after[0].version = max(after[0].version, before[0].version) + 1
    after[1].version = max(after[1].version, before[1].version) + 1


def _looks(quiet: Quiet | None) -> tuple[bool, bool, int]:
    """What a view shows of a node's silence: stale, not responding, the age in seconds."""
    if quiet is None:
        return False, False, 0
    return quiet.stale, quiet.not_responding, int(quiet.silent_s) if quiet.stale else 0

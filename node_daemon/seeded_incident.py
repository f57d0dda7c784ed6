"""A two-hour incident on a small simulated fleet, written into its nodes' state directories.

What incident replay is tried on (tests/console/test_replay_seeded.py) and what the
incident report in docs/ shows: four nodes' last two hours, at their real past times,
made by the daemon's own classes (the simulated backend, the health assessor, the
alert engine, the healer, the reservation ledger, the event journal, the audit log and
the history store) with a clock that steps through the stamps, as
node_daemon/history/demo_day.py writes a demo node's day. A daemon then started on
each directory (`gpufleet daemon --backend simulated --gpus 4 --seed SEED --interval 5`
with `[history] raw_retention_s` of three hours: `daemon_config`) serves that past as
its own: QueryHistory's raw tier, the journal's alerts, reservations and drains, the
audit log's calls.

The incident, in minutes after its start (`T0`, two hours before `end_ms`):

- gpu-cool: GPU 1 runs a job from 5; its fans fail from 20 (critical past 85 °C);
  self-healing caps its power; carol acknowledges the alert at 40 and drains the GPU at
  42; the job ends at 45; the fans are fixed at 70, the GPU cools and the alert clears;
  carol returns it to placement at 95.
- gpu-xid: alice holds GPU 1 from 10 to 80; GPU 0 throws an Xid storm (Xid 13, one
  every 5 s for a minute) at 50; bob reserves GPU 2 at 30 for a day.
- gpu-quiet: stops answering from 60 to 75 (its daemon hung: no samples, nothing
  judged or journalled), then goes on.
- gpu-calm: a job on GPUs 0 and 1 throughout; nothing goes wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from node_daemon import __version__
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.rules import AlertSettings
from node_daemon.auth.audit import AuditLog
from node_daemon.auth.interceptor import describe_params, describe_target
from node_daemon.backends.simulated import Scenario, SimulatedBackend
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.control.reservations import ReservationLedger
from node_daemon.healing.healer import Healer
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.power_cap import PowerCapPolicy
from node_daemon.healing.settings import HealingSettings, parse_healing_settings
from node_daemon.healing.view import NodeNow
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.boot import current_boot_id
from node_daemon.health.events import health_events
from node_daemon.health.model import GpuCondition
from node_daemon.health.settings import HealthSettings
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HISTORY_FILE, HistoryStore
from node_daemon.journal.event_journal import EventJournal
from node_daemon.journal.health_store import JournalHealthStore
from node_daemon.server import AUDIT_FILE, JOURNAL_FILE

MINUTE_S = 60
INCIDENT_S = 2 * 60 * MINUTE_S
STEP_S = 5  # the nodes' sample interval: the raw tier's step
GPUS = 4
# The raw tier keeps every tick of the incident (the default keeps an hour).
HISTORY = HistorySettings(raw_retention_s=3 * 60 * MINUTE_S)
# Self-healing on gpu-cool: a GPU over 80 °C for a minute gets its power capped.
HEALING = {"mode": "on", "power_cap": {"above_c": 80, "above_for_s": 60, "cool_c": 70,
                                       "restore_after_cool_s": 600}}  # fmt: skip
PEER = "ipv4:10.0.0.7:51234"  # the operator's console, in the audit log
SERVICE = "/gpufleet.v1.NodeService/"


@dataclass(frozen=True)
class OperatorCall:
    """A person's call on the node, `at_min` minutes into the incident."""

    at_min: float
    user: str
    method: str  # AcknowledgeAlert, DrainGpu, Reserve, ReleaseReservation
    gpu: int
    reason: str = ""
    hours: float = 0.0  # Reserve: for how long


@dataclass(frozen=True)
class SeededNode:
    name: str
    seed: int
    events: tuple[ScenarioEvent, ...] = ()  # `at_s`: seconds into the incident
    calls: tuple[OperatorCall, ...] = ()
    silent_min: tuple[float, float] | None = None  # hung from, to (minutes)
    healing: bool = False


def _at(minute: float, gpu: int, kind: str, value: float | None = None,
        **options: float) -> ScenarioEvent:  # fmt: skip
    return ScenarioEvent(minute * MINUTE_S, gpu, kind, value, tuple(options.items()))


# Every GPU at a steady load from the start (the simulated model's own load cycle makes
# throttle and power warnings come and go all day: noise around the story).
def _steady(*loads: float) -> tuple[ScenarioEvent, ...]:
    return tuple(_at(0.1, gpu, "load", load) for gpu, load in enumerate(loads))


# fmt: off
NODES = (
    SeededNode(
        "gpu-cool", 11,
        (*_steady(60, 0, 55, 40), _at(5, 1, "load", 95.0), _at(20, 1, "overheat"),
         _at(70, 1, "cool"), _at(75, 1, "load", 0.0)),
        (OperatorCall(40, "carol", "AcknowledgeAlert", 1, "fans on GPU 1; on site at 04:00"),
         OperatorCall(42, "carol", "DrainGpu", 1, "cooling failed"),
         OperatorCall(95, "carol", "UndrainGpu", 1, "fans replaced")),
        healing=True,
    ),
    SeededNode(
        "gpu-xid", 12,
        (*_steady(70, 0, 50, 65), *(_at(50 + i / 12, 0, "xid", 13.0) for i in range(12))),
        (OperatorCall(10, "alice", "Reserve", 1, "ablation runs", hours=12),
         OperatorCall(30, "bob", "Reserve", 2, "eval sweep", hours=24),
         OperatorCall(80, "alice", "ReleaseReservation", 1)),
    ),
    SeededNode("gpu-quiet", 13, _steady(60, 45, 0, 70), silent_min=(60, 75)),
    SeededNode("gpu-calm", 14, _steady(80, 80, 30, 0)),
)
# fmt: on


@dataclass(frozen=True)
class SeededFleet:
    """What was written: the incident's span (Unix ms) and each node's state directory."""

    start_ms: int
    end_ms: int
    state_dirs: dict[str, Path]

    def daemon_argv(self, name: str) -> list[str]:
        """`gpufleet daemon`'s arguments (after the subcommand) for the node `name`, but
        --listen, --config and --state-dir: its backend as it was seeded."""
        node = next(n for n in NODES if n.name == name)
        return ["--backend", "simulated", "--gpus", str(GPUS), "--seed", str(node.seed),
                "--interval", str(STEP_S), "--hostname", name]  # fmt: skip


def daemon_config(name: str) -> str:
    """daemon.toml for node `name`'s daemon: its processes read every sample, its history's
    raw tier over the incident, and gpu-cool's self-healing."""
    # The processes are read every sample (the default's 3 s is under the interval).
    text = f"[daemon]\nprocess_interval_s = {STEP_S}\n"
    text += f"[history]\nraw_retention_s = {HISTORY.raw_retention_s}\n"
    node = next(n for n in NODES if n.name == name)
    if node.healing:
        cap = HEALING["power_cap"]
        assert isinstance(cap, dict)
        text += '[healing]\nmode = "on"\n[healing.power_cap]\n' + "".join(
            f"{key} = {value}\n" for key, value in cap.items()
        )
    return text


def seed_fleet(root: Path, end_ms: int) -> SeededFleet:
    """Write the incident ending at `end_ms` into root/NAME, one directory a node."""
    start_ms = end_ms - INCIDENT_S * 1000
    dirs = {}
    for node in NODES:
        state = root / node.name
        state.mkdir(parents=True, exist_ok=True)
        _NodePast(node, state, start_ms).write()
        dirs[node.name] = state
    return SeededFleet(start_ms, end_ms, dirs)


class _Clock:
    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    @property
    def ms(self) -> int:
        return round(self.now_s * 1000)


class _NodePast:
    """One node's two hours, tick by tick, in the daemon's order (node_daemon.server):
    the health judgement, the history, reservations due, the alert rules, self-healing."""

    def __init__(self, node: SeededNode, state: Path, start_ms: int) -> None:
        self.node, self.start_s = node, start_ms / 1000
        self.clock = _Clock(self.start_s)
        self.backend = SimulatedBackend(
            GPUS, seed=node.seed, scenario=Scenario(node.events), step_s=STEP_S,
            start_unix_ms=start_ms,
        )  # fmt: skip
        facts = self.backend.open()
        self.journal = EventJournal(state / JOURNAL_FILE)
        self.audit = AuditLog(state / AUDIT_FILE, anchor=self.journal, clock=self.clock)
        self.alerts = AlertEngine(self.journal, AlertSettings(), clock=self.clock)
        self.alerts.set_gpu_facts(facts.gpus)
        self.health = HealthAssessor(
            HealthSettings(), JournalHealthStore(self.journal), boot_id=current_boot_id()
        )
        self.health.set_gpu_facts(facts.gpus)
        self.health.add_listener(self._on_health_change)
        self.alerts.set_health_lookup(self.health.condition)
        self.reservations = ReservationLedger(self.journal, lambda: GPUS, self.clock)
        self.alerts.set_reservation_lookup(self._reserved_for)
        self.history = HistoryStore(state / HISTORY_FILE, HISTORY, STEP_S * 1000,
                                    boot_clock=self.clock)  # fmt: skip
        self.gpus = {g.index: g for g in facts.gpus}
        settings = node_healing(node.name)
        memory = HealingMemory(self.journal)
        self.healer = Healer(settings, [PowerCapPolicy(self.backend, self.health)], memory,
                             self.journal, self.audit, self.clock)  # fmt: skip

    def write(self) -> None:
        try:
            self.alerts.record_start(f"daemon {__version__} started (the seeded incident)")
            calls = sorted(self.node.calls, key=lambda c: c.at_min)
            for tick in range(1, INCIDENT_S // STEP_S + 1):
                self.clock.now_s = self.start_s + tick * STEP_S
                readings = self.backend.advance(STEP_S)
                if self._silent(tick * STEP_S):
                    continue  # hung: the model goes on, the daemon sees nothing
                self._sweep(readings)
                while calls and calls[0].at_min * MINUTE_S <= tick * STEP_S:
                    self._call(calls.pop(0))
            self.history.flush()
        finally:
            self.healer.stop()
            self.history.close()
            self.audit.close()
            self.journal.close()

    def _silent(self, at_s: float) -> bool:
        hung = self.node.silent_min
        return hung is not None and hung[0] * MINUTE_S <= at_s < hung[1] * MINUTE_S

    def _sweep(self, readings: Sequence[Any]) -> None:
        processes = self.backend.read_processes()
        conditions = self.health.judge(readings, processes, self.clock.ms)
        self.history.append(self.clock.ms, readings)
        self.reservations.expire_due()
        self.alerts.evaluate(readings, processes)
        self.healer.tick(NodeNow(self.clock.now_s, readings, processes, conditions,
                                 self.alerts.firing(), self.gpus))  # fmt: skip

    def _call(self, call: OperatorCall) -> None:
        """The call as the node's servicer makes it, audited as its interceptor audits."""
        request, act = self._request(call)
        method = SERVICE + ("DrainGpu" if call.method == "UndrainGpu" else call.method)
        self.audit.append(call.user, PEER, method, describe_target(request),
                          describe_params(request), "attempt")  # fmt: skip
        act()
        self.audit.append(call.user, PEER, method, describe_target(request),
                          describe_params(request), "OK")  # fmt: skip

    def _request(self, call: OperatorCall) -> tuple[Any, Callable[[], object]]:
        gpu, user, now_ms = call.gpu, call.user, self.clock.ms
        if call.method == "AcknowledgeAlert":
            alert = next(a for a in self.alerts.firing()
                         if a.gpu_index == gpu and a.severity is Severity.CRITICAL)  # fmt: skip
            ack = pb.AcknowledgeAlertRequest(alert_id=alert.id, comment=call.reason)
            return ack, lambda: self.alerts.acknowledge(alert.id, user, call.reason)
        if call.method in ("DrainGpu", "UndrainGpu"):
            drain = call.method == "DrainGpu"
            change = pb.DrainGpuRequest(gpu_index=gpu, drain=drain, reason=call.reason)
            if drain:
                return change, lambda: self.health.drain(gpu, user, call.reason, now_ms)
            return change, lambda: self.health.undrain(gpu, user, now_ms)
        if call.method == "Reserve":
            until = now_ms + round(call.hours * 3_600_000)
            request = pb.ReserveRequest(gpu_indices=[gpu], holder=user, until_unix_ms=until,
                                        reason=call.reason)  # fmt: skip
            return request, lambda: self.reservations.reserve([gpu], user, until, call.reason,
                                                              user)  # fmt: skip
        held = self.reservations.holder_of(gpu)
        assert held is not None, f"{self.node.name}: nothing holds GPU {gpu} to release"
        release = pb.ReleaseReservationRequest(reservation_id=held.id)
        return release, lambda: self.reservations.release(held.id, user)

    def _reserved_for(self, gpu: int) -> str | None:
        held = self.reservations.holder_of(gpu)
        return held.holder if held else None

    def _on_health_change(self, old: GpuCondition | None, new: GpuCondition, actor: str) -> None:
        self.journal.record_or_hold(health_events(old, new, actor, self.clock.ms), [])


def node_healing(name: str) -> HealingSettings:
    """Node `name`'s self-healing settings (gpu-cool's power cap; off elsewhere)."""
    on = next(n for n in NODES if n.name == name).healing
    return parse_healing_settings(HEALING if on else {}, "the seeded incident")

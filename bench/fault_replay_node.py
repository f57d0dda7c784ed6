"""One node of the replay: the simulated backend and the daemon's own judgement and healing.

Per tick, in the daemon's order (node_daemon.server): the health assessor judges
the sweep (the sampler's health judge), the alert engine evaluates it, then the
healer decides and acts. All three are the daemon's real classes with an injected
clock; the journal is a real SQLite file. Differences from a running daemon, for a
replay that must be deterministic and fast:

- simulated time: each step advances the model `dt_s` (SimulatedBackend.advance);
- the healer's slow actions (a kill's grace, a repair command) run inline, so the
  clock stands still while they do; a GPU reset's command is `true` and the replay
  then resets the simulated GPU; a leaker's kill removes the simulated process;
- the node never reboots (a lost GPU stays lost for the rest of the week).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES, TEMP_GPU_C
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.rules import AlertSettings
from node_daemon.backends.readings import GpuHealth, GpuReading, ProcessReading
from node_daemon.backends.simulated import Scenario, SimulatedBackend
from node_daemon.backends.simulated.scenario import scenario_event
from node_daemon.control.kill import KillOutcome
from node_daemon.healing.drain import DrainPolicy
from node_daemon.healing.healer import Healer, Policy
from node_daemon.healing.leak_policy import LeakPolicy
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.model import DONE, GPU_RESET, Action, Report
from node_daemon.healing.power_cap import PowerCapPolicy
from node_daemon.healing.repair import RepairPolicy
from node_daemon.healing.settings import HealingSettings
from node_daemon.healing.view import NodeNow
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.model import GpuCondition
from node_daemon.health.settings import HealthSettings
from node_daemon.health.store import StoredHealth
from node_daemon.journal.event_journal import EventJournal


class Clock:
    def __init__(self, start_s: float) -> None:
        self.now = start_s

    def __call__(self) -> float:
        return self.now


class MemoryStore:
    """The assessor's HealthStore, in memory (a reboot would need it; the replay has none)."""

    def __init__(self) -> None:
        self._kept: dict[int, StoredHealth] = {}

    def load(self) -> Mapping[int, StoredHealth]:
        return dict(self._kept)

    def save(self, record: StoredHealth) -> None:
        self._kept[record.gpu_index] = record


class SimKiller:
    """The ProcessKiller's `kill` for the simulator's processes: they go at once."""

    def __init__(
        self,
        backend: SimulatedBackend,
        processes: Callable[[], Mapping[int, Sequence[ProcessReading]]],
    ) -> None:
        self._backend, self._processes = backend, processes

    def kill(
        self, gpu: int, pid: int, start_time_unix_ms: int, grace_s: int, actor: str,
        authorise: Callable[[ProcessReading], None] = lambda _p: None,
    ) -> tuple[KillOutcome, str]:  # fmt: skip
        listed = next((p for p in self._processes().get(gpu, ()) if p.pid == pid), None)
        if listed is None:
            return KillOutcome.ALREADY_GONE, f"pid {pid} is gone"
        authorise(listed)
        self._backend.remove_simulated_process(gpu, pid)
        return KillOutcome.TERMINATED, f"pid {pid} terminated"


class Inline:
    """A policy whose slow actions run on the caller's thread; `after` sees each one done."""

    def __init__(self, policy: Policy, after: Callable[[Action], None] | None = None) -> None:
        self._policy, self._after = policy, after
        self.table = policy.table

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        return self._policy.decide(now, settings, dry_run)

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        return self._policy.refusal(action, now, settings)

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return False

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        outcome = self._policy.execute(action, now, settings)
        if outcome == DONE and self._after is not None:
            self._after(action)
        return outcome

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None:
        self._policy.settled(report, now, settings)


@dataclass(frozen=True)
class HealingSeen:
    """One EVENT_KIND_HEALING_ACTION the healer journaled: what it did, or would have."""

    action: str
    gpu: int | None
    outcome: str
    dry_run: bool


@dataclass
class Tick:
    """What one step showed, for the score."""

    now_s: float  # simulated seconds since the start
    dt_s: float
    readings: Sequence[GpuReading]
    processes: Mapping[int, Sequence[ProcessReading]]
    conditions: Mapping[int, GpuCondition]
    firing: set[tuple[str, int]]  # (rule, GPU) of the alerts firing
    reports: list[HealingSeen] = field(default_factory=list)


class ReplayNode:
    """One simulated node with the daemon's assessor, alert engine and healer."""

    def __init__(
        self,
        index: int,
        gpus: int,
        scenario: Scenario,
        healing: HealingSettings,
        journal_path: Path,
        start_unix_s: float,
        load_phase_s: float,
    ) -> None:
        self.index, self.start_unix_s = index, start_unix_s
        self.backend = SimulatedBackend(
            gpus, seed=index, scenario=scenario, start_unix_ms=int(start_unix_s * 1000),
            load_phase_s=load_phase_s,
        )  # fmt: skip
        self.facts = self.backend.open()
        self.clock = Clock(start_unix_s)
        self.journal = EventJournal(journal_path)
        self.engine = AlertEngine(self.journal, AlertSettings(), clock=self.clock)
        self.engine.set_gpu_facts(self.facts.gpus)
        # Kept from the engine's announcements: firing() copies every alert on each call.
        self._firing: dict[str, AlertRecord] = {}
        self.engine.add_listener(self._on_engine_alerts)
        self.assessor = HealthAssessor(HealthSettings(), MemoryStore(), boot_id="replay")
        self.assessor.set_gpu_facts(self.facts.gpus)
        health_lookup = getattr(self.engine, "set_health_lookup", None)
        if health_lookup is not None:  # the gpu_health alert rules, where the engine has them
            health_lookup(self.assessor.condition)
        self.busy: dict[int, str] = {}  # GPU -> the replay's job running there
        self._processes: Mapping[int, Sequence[ProcessReading]] = {}
        self._seq = self.journal.last_seq
        self.healer = self._healer(healing)

    def _healer(self, settings: HealingSettings) -> Healer:
        memory = HealingMemory(self.journal)
        fresh = self.backend.read_processes
        killer = SimKiller(self.backend, fresh)
        policies: list[Policy] = [
            DrainPolicy(self.assessor, memory, None),
            PowerCapPolicy(self.backend, self.assessor),
            Inline(LeakPolicy(memory, killer, None)),  # type: ignore[arg-type]  # duck-typed killer
            Inline(RepairPolicy("reset", memory, fresh, "replay", control=self.assessor,
                                boot_id="replay"), self._reset_done),
            Inline(RepairPolicy("reboot", memory, fresh, "replay", control=self.assessor,
                                boot_id="replay")),
        ]  # fmt: skip
        return Healer(settings, policies, memory, self.journal, None, self.clock)

    def _on_engine_alerts(self, alerts: list[AlertRecord]) -> None:
        for alert in alerts:
            if alert.firing:
                self._firing[alert.key] = alert
            else:
                self._firing.pop(alert.key, None)

    def _reset_done(self, action: Action) -> None:
        if action.action == GPU_RESET and action.gpu is not None:
            self.backend.inject(scenario_event(0, action.gpu, "reset"))

    def step(self, dt_s: float) -> Tick:
        readings = self.backend.advance(dt_s)
        self._processes = processes = self.backend.read_processes()
        self.clock.now += dt_s
        now_ms = int(self.clock.now * 1000)
        conditions = self.assessor.judge(readings, processes, now_ms)
        self.engine.evaluate(readings, processes)
        firing = list(self._firing.values())
        now = NodeNow(
            self.clock.now, readings, processes, conditions, firing,
            {g.index: g for g in self.facts.gpus}, dict(self.busy),
        )  # fmt: skip
        self.healer.tick(now)
        reports = self._healing_events()
        fired = {(a.rule, a.gpu_index) for a in firing if a.gpu_index is not None}
        sim_s = self.clock.now - self.start_unix_s
        return Tick(sim_s, dt_s, readings, processes, conditions, fired, reports)

    def _healing_events(self) -> list[HealingSeen]:
        """The healer's reports of this tick, as the journal has them (consoles see these)."""
        seen = []
        while events := self.journal.events_after(self._seq):
            self._seq = events[-1].seq
            for event in events:
                if event.kind == pb.EVENT_KIND_HEALING_ACTION:
                    h = event.healing
                    gpu = h.gpu_index if h.HasField("gpu_index") else None
                    seen.append(HealingSeen(h.action, gpu, h.outcome, h.dry_run))
        return seen

    def crash_work(self, gpu: int, command: str | None = None) -> None:
        """The GPU's applications died (an uncorrectable error, a bus drop, out of memory):
        the simulator's processes on it go (only those running `command`, if given)."""
        for process in self._processes.get(gpu, ()):
            if command is None or process.command == command:
                self.backend.remove_simulated_process(gpu, process.pid)

    def close(self) -> None:
        self.healer.stop()
        self.journal.close()


def hot(reading: GpuReading, slowdown_c: float | None) -> bool:
    temp = reading[TEMP_GPU_C]
    return slowdown_c is not None and temp is not None and temp >= slowdown_c


def memory_full(reading: GpuReading, share: float) -> bool:
    used, total = reading[MEM_USED_BYTES], reading[MEM_TOTAL_BYTES]
    return used is not None and total is not None and total > 0 and used >= share * total


def lost(reading: GpuReading) -> bool:
    return reading.health is GpuHealth.LOST

"""The demo's scripted fleet, replayed in simulated time, for popup_budget.py.

The demo's nodes as console/demo_fleet.py starts them (8 simulated GPUs each,
seeds 0, 1, 2, ..., the demo scenario on gpu-node-02, 1 s ticks, sim speed 1),
built as the daemon builds them: the simulated backend stepping 1 s per sweep,
processes read every third sweep (the sampler's default), the AlertEngine with
the default rules and a real SQLite journal. Only the clock is injected, so an
hour of alerts takes a minute of CPU, not an hour. Each node's new journal
events are decoded exactly as the console decodes the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from console.connections.decode import decode_event
from console.demo_fleet import DEMO_SCENARIO
from console.fleet.updates import EventUpdate
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.rules import AlertSettings
from node_daemon.backends.readings import ProcessReading
from node_daemon.backends.simulated import SimulatedBackend, load_scenario
from node_daemon.journal.event_journal import EventJournal

GPUS = 8
PROCESS_EVERY = 3  # sweeps: the sampler's process_interval_s (3 s) over its 1 s tick
SCRIPTED_NODE = 1  # DemoFleet gives node 1 (gpu-node-02) the scenario


class ReplayNode:
    """One demo daemon's sampler and rules, swept by hand at simulated times."""

    def __init__(self, index: int, workdir: Path, clock: Callable[[], float]) -> None:
        scenario = load_scenario(DEMO_SCENARIO) if index == SCRIPTED_NODE else None
        self.hostname = f"gpu-node-{index + 1:02d}"
        self.target = f"{self.hostname}:50051"
        self._backend = SimulatedBackend(GPUS, seed=index, scenario=scenario, step_s=1.0)
        self._journal = EventJournal(workdir / f"{self.hostname}.sqlite3")
        self._engine = AlertEngine(self._journal, AlertSettings(), clock=clock)
        self._engine.set_gpu_facts(self._backend.open().gpus)
        self._engine.record_start(f"{self.hostname} replayed")
        self._processes: dict[int, list[ProcessReading]] = {}
        self._sweeps = 0
        self._seq = 0

    def sweep(self) -> list[EventUpdate]:
        """One tick: read, judge, journal; the events it journaled, as the console gets them."""
        readings = self._backend.read_gpus()
        if self._sweeps % PROCESS_EVERY == 0:
            self._processes = {k: list(v) for k, v in self._backend.read_processes().items()}
        self._sweeps += 1
        self._engine.evaluate(readings, self._processes)
        events = self._journal.events_after(self._seq)
        if events:
            self._seq = events[-1].seq
        return [decode_event(self.target, e) for e in events]

    def close(self) -> None:
        self._journal.close()

"""Putting a Healer together from the daemon's parts, and each tick's view for it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from node_daemon.alerts.engine import AlertEngine
from node_daemon.auth.audit import AuditLog
from node_daemon.backends.readings import GpuReading, ProcessReading
from node_daemon.control.kill_service import ProcessKiller
from node_daemon.control.workloads import WorkloadManager
from node_daemon.healing.drain import DrainPolicy
from node_daemon.healing.healer import Healer, Policy
from node_daemon.healing.leak_policy import LeakPolicy
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.power_cap import PowerCapPolicy
from node_daemon.healing.repair import RepairPolicy
from node_daemon.healing.settings import HealingSettings
from node_daemon.healing.slurm_drain import SlurmDrain
from node_daemon.healing.view import HealthControl, NodeNow
from node_daemon.journal.event_journal import EventJournal
from node_daemon.sampling.sampler import Sampler


def build_healer(
    settings: HealingSettings,
    *,
    journal: EventJournal,
    audit: AuditLog | None,
    backend: object,
    sampler: Sampler,
    control: HealthControl | None,
    killer: ProcessKiller | None,
    workloads: WorkloadManager | None,
    slurm_node: str,
    slurm_reason: Callable[[], str | None],
    host: str,
    boot_id: str,
    clock: Callable[[], float] = time.time,
) -> Healer:
    """The healer with every policy; `backend` sets power limits if it can (PowerLimitControl).

    `boot_id` is this boot's (node_daemon.health.boot): what a reboot did is judged in
    the next.
    """
    memory = HealingMemory(journal)
    fresh = sampler.fresh_processes
    policies: list[Policy] = [
        DrainPolicy(control, memory, SlurmDrain(slurm_node, slurm_reason)),
        PowerCapPolicy(backend, control),
        LeakPolicy(memory, killer, workloads),
        RepairPolicy("reset", memory, fresh, host, control=control, boot_id=boot_id),
        RepairPolicy("reboot", memory, fresh, host, control=control, boot_id=boot_id),
    ]
    return Healer(settings, policies, memory, journal, audit, clock)


def node_now(
    now_s: float,
    readings: Sequence[GpuReading],
    processes: Mapping[int, Sequence[ProcessReading]],
    sampler: Sampler,
    alerts: AlertEngine,
    workloads: WorkloadManager | None,
) -> NodeNow:
    """The sweep just made, with the conditions judged at it and the alerts firing after it."""
    latest, facts = sampler.latest, sampler.status.facts
    return NodeNow(
        now_s, readings, processes,
        latest.conditions if latest is not None else {},
        alerts.firing(),
        {g.index: g for g in facts.gpus} if facts else {},
        workloads.busy_gpus() if workloads is not None else {},
    )  # fmt: skip

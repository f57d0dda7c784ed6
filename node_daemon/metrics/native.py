"""The gpufleet_* metric family, through prometheus-client; `promtool check metrics` clean."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from node_daemon import __version__
from node_daemon.alerts.engine import AlertEngine
from node_daemon.auth.audit import AuditLog
from node_daemon.backends.readings import GpuHealth, GpuStatic
from node_daemon.journal.event_journal import EventJournal
from node_daemon.metrics.health import health_families
from node_daemon.sampling.sampler import Sampler

GpuFacts = Callable[[], dict[int, GpuStatic]]


class NativeCollector(Collector):
    """Reads the sampler's latest sweep and the alert engine at scrape time."""

    def __init__(
        self,
        sampler: Sampler,
        alerts: AlertEngine,
        journal: EventJournal,
        backend: str,
        gpu_facts: GpuFacts,
        audit: AuditLog | None = None,
    ) -> None:
        self._sampler, self._alerts, self._journal = sampler, alerts, journal
        self._backend, self._gpu_facts, self._audit = backend, gpu_facts, audit

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        yield from self._daemon()
        yield from self._gpus()
        yield self._alert_counts()

    def _daemon(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        status = self._sampler.status
        facts = status.facts
        yield InfoMetricFamily("gpufleet_build", "Daemon version, backend and driver.", value={
            "version": __version__, "backend": self._backend,
            "driver_version": (facts.driver_version or "") if facts else "",
            "cuda_version": (facts.cuda_version or "") if facts else "",
        })  # fmt: skip
        up = GaugeMetricFamily(
            "gpufleet_backend_up", "1 when the GPU backend answers, 0 when degraded.",
            labels=["backend"],
        )  # fmt: skip
        up.add_metric([self._backend], 1.0 if status.ok else 0.0)
        yield up
        yield CounterMetricFamily(
            "gpufleet_sweeps", "Sweeps of all GPUs since start.", value=self._sampler.sweeps
        )
        yield GaugeMetricFamily(
            "gpufleet_sweep_duration_seconds", "How long the latest sweep took.",
            value=self._sampler.last_sweep_s,
        )  # fmt: skip
        yield CounterMetricFamily(
            "gpufleet_sampler_looks",
            "Looks at GPUs near a temperature line between sweeps (adaptive sampling).",
            value=self._sampler.looks,
        )
        yield CounterMetricFamily(
            "gpufleet_sampler_early_sweeps",
            "Sweeps a look asked for before their tick: a GPU across a temperature line.",
            value=self._sampler.early_sweeps,
        )
        yield CounterMetricFamily(
            "gpufleet_journal_events", "Events in the node's journal.", value=self._journal.last_seq
        )
        yield from self._state()

    def _state(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The state disk and the audit head: a Prometheus that saw the counter at N
        knows that an audit log ending before record N was cut short."""
        head = self._journal.audit_head
        yield CounterMetricFamily(
            "gpufleet_audit_records", "Records in the audit log (the seq of its newest).",
            value=head[0] if head else 0,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "gpufleet_journal_writable",
            "1 while the event journal and the audit log can be written; 0 from a failed "
            "write (a full state disk: changes refused, reads served) until one succeeds.",
            value=0.0 if self._state_problem() else 1.0,
        )
        yield GaugeMetricFamily(
            "gpufleet_journal_held_events",
            "Events held in memory until the journal can be written again.",
            value=self._journal.held_events,
        )

    def _state_problem(self) -> str | None:
        """Why a change cannot be kept now. Every change is written to both files, the
        audit log first: on a full disk it is the audit log's write that fails, and the
        journal, not written at all then, has nothing to say (it said 1 meanwhile)."""
        audit = self._audit.problem if self._audit is not None else None
        return self._journal.problem or audit

    def _gpus(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        latest, gpus = self._sampler.latest, self._gpu_facts()
        lost = GaugeMetricFamily("gpufleet_gpu_lost", "1 while NVML reports the GPU lost.",
                                 labels=["gpu", "UUID"])  # fmt: skip
        count = GaugeMetricFamily("gpufleet_gpu_processes", "Processes on the GPU, by user.",
                                  labels=["gpu", "UUID", "user"])  # fmt: skip
        memory = GaugeMetricFamily(
            "gpufleet_gpu_process_memory_bytes", "GPU memory held by processes, by user.",
            labels=["gpu", "UUID", "user"],
        )  # fmt: skip
        for reading in latest.readings if latest else ():
            uuid = gpus[reading.index].uuid if reading.index in gpus else ""
            lost.add_metric([str(reading.index), uuid], float(reading.health is GpuHealth.LOST))
            per_user: Counter[str] = Counter()
            held: Counter[str] = Counter()
            for process in latest.processes.get(reading.index, ()) if latest else ():
                per_user[process.user or "unknown"] += 1
                held[process.user or "unknown"] += process.gpu_memory_bytes or 0
            for user, n in per_user.items():
                count.add_metric([str(reading.index), uuid, user], n)
                memory.add_metric([str(reading.index), uuid, user], held[user])
        yield from (lost, count, memory)
        yield from health_families(latest.conditions if latest else {}, gpus)

    def _alert_counts(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "gpufleet_alerts_firing", "Firing alerts on the node, by severity.",
            labels=["severity"],
        )  # fmt: skip
        counts = Counter(a.severity.label for a in self._alerts.firing())
        for severity in ("info", "warning", "critical"):
            family.add_metric([severity], counts.get(severity, 0))
        return family

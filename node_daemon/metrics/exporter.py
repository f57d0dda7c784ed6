"""MetricsExporter: renders both families from the daemon's live state."""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, generate_latest

from node_daemon.alerts.engine import AlertEngine
from node_daemon.auth.audit import AuditLog
from node_daemon.backends.readings import GpuStatic
from node_daemon.health.fault_record import FaultRecorder
from node_daemon.history.store import HistoryStore
from node_daemon.journal.event_journal import EventJournal
from node_daemon.listen import ListenAddress
from node_daemon.metrics.dcgm import DcgmLabels, render
from node_daemon.metrics.faults import FaultCollector
from node_daemon.metrics.history import HistoryCollector
from node_daemon.metrics.native import NativeCollector
from node_daemon.metrics.reloads import ReloadCollector, ReloadStats
from node_daemon.metrics.server import MetricsServer
from node_daemon.sampling.sampler import Sampler

log = logging.getLogger(__name__)


class MetricsExporter:
    def __init__(
        self,
        address: ListenAddress,
        sampler: Sampler,
        alerts: AlertEngine,
        journal: EventJournal,
        backend: str,
        hostname: str,
        hostname_label: str = "Hostname",
        reloads: ReloadStats | None = None,
        history: HistoryStore | None = None,
        audit: AuditLog | None = None,
        faults: FaultRecorder | None = None,
    ) -> None:
        self._sampler, self._hostname, self._hostname_label = sampler, hostname, hostname_label
        self._registry = CollectorRegistry(auto_describe=False)
        native = NativeCollector(sampler, alerts, journal, backend, self._gpus, audit)
        self._registry.register(native)
        if reloads is not None:
            self._registry.register(ReloadCollector(reloads))
        if history is not None:
            self._registry.register(HistoryCollector(history))
        if faults is not None:
            self._registry.register(FaultCollector(faults, self._indexes))
        self.server = MetricsServer(address, self.render)
        if not address.is_loopback:
            log.warning(
                "metrics on %s are readable by anyone who can reach that port (as with "
                "dcgm-exporter); allow only your Prometheus servers in the firewall",
                self.server.address,
            )

    def _indexes(self) -> list[int]:
        """The GPUs of the latest sweep (none before the first)."""
        latest = self._sampler.latest
        return [r.index for r in latest.readings] if latest is not None else []

    def _gpus(self) -> dict[int, GpuStatic]:
        facts = self._sampler.status.facts
        return {g.index: g for g in facts.gpus} if facts else {}

    def render(self) -> bytes:
        latest = self._sampler.latest
        dcgm = ""
        if latest is not None:
            facts = self._sampler.status.facts
            labels = DcgmLabels(self._hostname, self._hostname_label,
                                facts.driver_version if facts else None)  # fmt: skip
            dcgm = render(latest.readings, self._gpus(), latest.last_xids, labels)
        return dcgm.encode() + generate_latest(self._registry)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

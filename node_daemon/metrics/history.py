"""The on-disk metric history on /metrics: whether it can be written, and its size."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from node_daemon.history.store import HistoryStore


class HistoryCollector(Collector):
    def __init__(self, store: HistoryStore) -> None:
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "gpufleet_history_writable",
            "1 while the on-disk metric history can be written; 0 while its disk is full or "
            "read-only (what is stored is still served).",
            value=1.0 if self._store.writable else 0.0,
        )
        yield GaugeMetricFamily(
            "gpufleet_history_corrupt_rows",
            "Rows of the on-disk metric history found damaged (not decodable) since the "
            "daemon started, each counted once; they are skipped, the rest served.",
            value=self._store.corrupt_rows,
        )
        yield GaugeMetricFamily(
            "gpufleet_history_bytes",
            "Bytes of the on-disk metric history (its file and write-ahead log).",
            value=self._store.bytes_on_disk(),
        )

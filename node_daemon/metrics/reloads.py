"""Config reloads on /metrics: how many were applied or rejected, and since when the
config in force holds (Prometheus' own prometheus_config_last_reload_* pattern)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

RESULTS = ("ok", "rejected")


class ReloadStats:
    """Counts of reloads by result; thread-safe (recorded on the main thread, read by scrapes).

    Args:
        loaded_unix_s: when the config in force was read (the start, until a reload).
    """

    def __init__(self, loaded_unix_s: float) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(RESULTS, 0)
        self._loaded_unix_s = loaded_unix_s
        self._last_ok = True

    def record(self, ok: bool, at_unix_s: float) -> None:
        with self._lock:
            self._counts["ok" if ok else "rejected"] += 1
            self._last_ok = ok
            if ok:
                self._loaded_unix_s = at_unix_s

    def snapshot(self) -> tuple[dict[str, int], float, bool]:
        """(count by result, when the config in force was loaded, whether the last try worked)."""
        with self._lock:
            return dict(self._counts), self._loaded_unix_s, self._last_ok


class ReloadCollector(Collector):
    def __init__(self, stats: ReloadStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        counts, loaded_s, last_ok = self._stats.snapshot()
        reloads = CounterMetricFamily(
            "gpufleet_config_reloads",
            "Config reloads (SIGHUP) by result: ok (applied) or rejected (old config kept).",
            labels=["result"],
        )
        for result in RESULTS:
            reloads.add_metric([result], counts[result])
        yield reloads
        yield GaugeMetricFamily(
            "gpufleet_config_last_reload_timestamp_seconds",
            "When the config in force was read: the start, or the last reload applied.",
            value=loaded_s,
        )
        yield GaugeMetricFamily(
            "gpufleet_config_last_reload_successful",
            "1 if the last reload was applied (or none was tried), 0 if it was rejected.",
            value=1.0 if last_ok else 0.0,
        )

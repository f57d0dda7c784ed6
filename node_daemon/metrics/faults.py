"""The GPUs' fault records on /metrics: each GPU's reliability score and incidents.

Read at scrape time from the fault recorder's records (replaced whole, never mutated),
for the GPUs of the latest sweep.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from node_daemon.health.fault_record import FaultRecorder


class FaultCollector(Collector):
    def __init__(
        self, recorder: FaultRecorder, indexes: Callable[[], list[int]],
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self._recorder, self._indexes, self._clock = recorder, indexes, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["gpu", "UUID"]
        score = GaugeMetricFamily(
            "gpufleet_gpu_reliability_score",
            "100 for a GPU with no fault on record, less each incident's weight by the state "
            "it called for, halved every 30 days since it ended (docs/health.md).",
            labels=labels,
        )
        incidents = GaugeMetricFamily(
            "gpufleet_gpu_fault_incidents",
            "Incidents in the GPU's fault record (an Xid burst counts once), by kind.",
            labels=[*labels, "kind"],
        )
        now_ms = int(self._clock() * 1000)
        for index in self._indexes():
            record = self._recorder.of_gpu(index)
            if record is None:
                continue
            gpu = [str(index), record.uuid]
            score.add_metric(gpu, record.score(now_ms))
            kinds = Counter(incident.kind for incident in record.incidents)
            for kind, count in sorted(kinds.items()):
                incidents.add_metric([*gpu, kind], count)
        yield from (score, incidents)

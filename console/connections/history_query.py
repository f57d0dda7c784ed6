"""HistoryQueries: the plots' asks for older data, sent off the GUI thread.

A daemon's QueryHistory (its on-disk tiers) goes over the node's link like any
query; a Prometheus range runs on the same network thread, its HTTP call in
PrometheusRange's executor. Either answer comes back as a QueryResult through
the inbox, its payload a HistorySlice in the shown units (decoded here, not on
the GUI thread).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from console.connections.decode import decode_tiers
from console.connections.manager import ConnectionManager
from console.connections.prometheus_range import PrometheusRange, PrometheusSource
from console.connections.queries import QUERY_DEADLINE_S
from console.fleet.columns import PLOTTED
from console.fleet.history_loader import Cancel, HistoryAsk
from console.fleet.history_range import (
    DAEMON,
    MAX_POINTS,
    PROMETHEUS,
    FloatArray,
    HistorySlice,
    daemon_oldest_s,
)
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import BY_FIELD

PLOTTED_FIELDS: Final = tuple(metric.field for metric in PLOTTED)


def history_request(ask: HistoryAsk) -> pb.QueryHistoryRequest:
    return pb.QueryHistoryRequest(
        start_unix_ms=math.floor(ask.start_s * 1000), end_unix_ms=math.ceil(ask.end_s * 1000),
        metrics=PLOTTED_FIELDS, gpu_indices=[ask.gpu], max_points=MAX_POINTS,
    )  # fmt: skip


def decode_history(reply: pb.QueryHistoryResponse, ask: HistoryAsk) -> HistorySlice:
    """A daemon's answer for one GPU, in the shown units (memory in GiB)."""
    times = np.asarray(reply.timestamps_unix_ms, dtype=np.float64) / 1000.0
    means: dict[str, FloatArray] = {}
    peaks: dict[str, FloatArray] = {}
    for series in reply.series:
        metric = BY_FIELD.get(series.metric)
        if series.gpu_index != ask.gpu or metric is None or metric.shown is None:
            continue
        scale = metric.shown.scale
        means[series.metric] = _column(series.values, len(times)) * scale
        peaks[series.metric] = _column(series.max_values or series.values, len(times)) * scale
    tiers = decode_tiers(reply.tiers)
    return HistorySlice(
        DAEMON, reply.step_ms / 1000.0 or 1.0, ask.start_s, ask.end_s, times, means, peaks,
        reply.tier, tiers, daemon_oldest_s(tiers),
    )  # fmt: skip


def _column(values: object, count: int) -> FloatArray:
    column = np.asarray(values, dtype=np.float64)
    if len(column) != count:  # a malformed answer: nothing rather than misplaced points
        return np.full(count, np.nan)
    return column


class HistoryQueries:
    """The HistoryAsker of the plots: daemon or Prometheus, as each ask says."""

    def __init__(
        self, connections: ConnectionManager, prometheus: PrometheusSource | None = None
    ) -> None:
        self._connections = connections
        self.prometheus = PrometheusRange(prometheus) if prometheus is not None else None

    def ask(self, ask: HistoryAsk, query_id: int) -> Cancel:
        what = f"history of {ask.target} GPU {ask.gpu}"
        if ask.source == PROMETHEUS and self.prometheus is not None:
            fetch = self.prometheus.fetch
            future = self._connections.fetch(ask.target, what, lambda: fetch(ask), query_id)
        else:
            request = history_request(ask)
            future = self._connections.query(
                ask.target, what,
                lambda stub: stub.QueryHistory(request, timeout=QUERY_DEADLINE_S),
                lambda _target, reply: decode_history(reply, ask), query_id,
            )  # fmt: skip

        def cancel() -> None:
            future.cancel()  # an answer already on its way is dropped by the loader

        return cancel

    def close(self) -> None:
        if self.prometheus is not None:
            self.prometheus.close()

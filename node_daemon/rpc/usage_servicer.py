"""The QueryUsage RPC: validate, flush the meter, delegate to query_usage, map errors."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.rpc.errors import abort
from node_daemon.usage.amounts import TeamsOf
from node_daemon.usage.query import BadUsageQuery, query_usage
from node_daemon.usage.settings import Prices
from node_daemon.usage.store import UsageStore, UsageStoreError

log = logging.getLogger(__name__)

WorkloadSource = Callable[[], Sequence[pb.Workload]]


class UsageServicer:
    """Answers QueryUsage from the usage store and the workload records."""

    def __init__(
        self,
        store: UsageStore,
        workloads: WorkloadSource,
        teams_of: TeamsOf,
        node: str,
        flush: Callable[[], None] | None = None,
        prices: Callable[[], Prices | None] = lambda: None,
        node_model: Callable[[], str] = lambda: "",
    ) -> None:
        self._store, self._workloads, self._teams_of, self._node = store, workloads, teams_of, node
        # Called first so a report includes the seconds not yet flushed.
        self._flush = flush
        # Read per call: the prices of the config in force (a reload replaces them).
        self._prices, self._node_model = prices, node_model

    def QueryUsage(
        self, request: pb.QueryUsageRequest, context: grpc.ServicerContext
    ) -> pb.QueryUsageResponse:
        log.debug("QueryUsage %s..%s by %d from %s", request.from_day, request.to_day,
                  request.group_by, context.peer())  # fmt: skip
        if self._flush is not None:
            self._flush()
        try:
            return query_usage(
                self._store, self._workloads(), self._teams_of, request, self._node,
                prices=self._prices(), node_model=self._node_model(),
            )  # fmt: skip
        except BadUsageQuery as exc:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except UsageStoreError as exc:
            log.error("QueryUsage failed: %s", exc)
            abort(context, grpc.StatusCode.UNAVAILABLE, f"{exc}; try again later")

"""The QueryHistory and GetStateAt RPCs: thin; node_daemon.history.query and
node_daemon.history.state_at check and answer."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Collection

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.history.query import BadHistoryQuery, answer_query, parse_query
from node_daemon.history.state_at import BadMoment, MomentToCome, Sources, state_at
from node_daemon.history.store import HistoryDataLoss, HistoryStore, HistoryStoreError
from node_daemon.journal.event_journal import EventJournal
from node_daemon.rpc.errors import abort

log = logging.getLogger(__name__)

HISTORY_OFF = "history is off on this node ([history] enabled = false in daemon.toml)"


class HistoryServicer:
    """Answers QueryHistory from the on-disk history (None: history is off on this node),
    and GetStateAt from the history and the event journal.

    Args:
        store: the history, or None where [history] enabled = false.
        node_gpus: the node's GPU indices now (empty while the backend is down).
        clock: seconds since the epoch, for a range that ends now.
        journal: the event journal, for GetStateAt (None: GetStateAt is not served).
    """

    def __init__(
        self,
        store: HistoryStore | None,
        node_gpus: Callable[[], Collection[int]],
        clock: Callable[[], float] = time.time,
        journal: EventJournal | None = None,
    ) -> None:
        self._store, self._node_gpus, self._clock = store, node_gpus, clock
        self._journal = journal

    def QueryHistory(
        self, request: pb.QueryHistoryRequest, context: grpc.ServicerContext
    ) -> pb.QueryHistoryResponse:
        log.debug("QueryHistory %d..%d %s GPUs %s from %s", request.start_unix_ms,
                  request.end_unix_ms, list(request.metrics), list(request.gpu_indices),
                  context.peer())  # fmt: skip
        if self._store is None:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, HISTORY_OFF)
        # While the backend is down the node's GPUs are those the history knows.
        gpus = self._node_gpus() or self._store.gpus()
        try:
            query = parse_query(request, int(self._clock() * 1000), gpus)
            return answer_query(self._store, query)
        except BadHistoryQuery as exc:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except HistoryDataLoss as exc:
            abort(context, grpc.StatusCode.DATA_LOSS, str(exc))
        except HistoryStoreError as exc:
            log.error("QueryHistory failed: %s", exc)
            abort(context, grpc.StatusCode.UNAVAILABLE, f"{exc}; try again later")

    def GetStateAt(
        self, request: pb.GetStateAtRequest, context: grpc.ServicerContext
    ) -> pb.NodeStateAt:
        log.debug("GetStateAt %d from %s", request.at_unix_ms, context.peer())
        if self._journal is None:
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "this daemon keeps no event journal")
        gpus = self._node_gpus() or (self._store.gpus() if self._store is not None else ())
        sources = Sources(self._store, self._journal, gpus)
        try:
            return state_at(sources, request.at_unix_ms, int(self._clock() * 1000))
        except BadMoment as exc:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except MomentToCome as exc:
            abort(context, grpc.StatusCode.OUT_OF_RANGE, str(exc))
        except HistoryDataLoss as exc:
            abort(context, grpc.StatusCode.DATA_LOSS, str(exc))
        except (HistoryStoreError, sqlite3.Error) as exc:
            log.error("GetStateAt failed: %s", exc)
            abort(context, grpc.StatusCode.UNAVAILABLE, f"{exc}; try again later")

"""Inventory and sample streams of NodeService: thin, it reads the sampler and history."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator, Sequence

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon import __version__
from node_daemon.backends.readings import BackendKind
from node_daemon.sampling.sample_ring import SampleRing
from node_daemon.sampling.sampler import Sampler
from node_daemon.sampling.slurm import SlurmWatcher
from node_daemon.sampling.wire import REPLAYED_SUFFIX, gpu_info_message

log = logging.getLogger(__name__)

_BACKENDS = {BackendKind.NVML: pb.BACKEND_NVML, BackendKind.SIMULATED: pb.BACKEND_SIMULATED}
# How often a waiting stream checks that its client is still there.
_STREAM_POLL_S = 1.0


class NodeServicer:
    """Answers inventory and sample-stream calls from the shared state."""

    def __init__(
        self,
        sampler: Sampler,
        history: SampleRing,
        backend: BackendKind,
        started_unix_ms: int,
        hostname: str | None = None,
        slurm: SlurmWatcher | None = None,
        thresholds: Callable[[], Sequence[pb.AlertThreshold]] | None = None,
        history_tiers: Callable[[], Sequence[pb.HistoryTier]] | None = None,
        demo: bool = False,
    ) -> None:
        """`demo`: a demo node's (Inventory.demo)."""
        self._demo = demo
        self._sampler, self._history, self._backend = sampler, history, backend
        # The alert lines in force (a reload changes them) and the on-disk history's tiers.
        self._thresholds, self._history_tiers = thresholds, history_tiers
        self._slurm = slurm
        self._started_unix_ms = started_unix_ms
        self._hostname = hostname or socket.gethostname()

    def GetInventory(
        self, request: pb.GetInventoryRequest, context: grpc.ServicerContext
    ) -> pb.Inventory:
        status = self._sampler.status
        facts = status.facts
        inventory = pb.Inventory(
            hostname=self._hostname,
            daemon_version=__version__,
            backend=_BACKENDS[self._backend],
            backend_state=pb.BACKEND_STATE_OK if status.ok else pb.BACKEND_STATE_DEGRADED,
            backend_detail=status.detail,
            sample_interval_ms=round(self._sampler.interval_s * 1000),
            history_seconds=round(self._history.capacity * self._sampler.interval_s),
            daemon_started_unix_ms=self._started_unix_ms,
            demo=self._demo,
        )
        slurm = self._slurm.state if self._slurm else None
        if slurm is not None:
            inventory.slurm_state = slurm.state
            if slurm.reason:
                inventory.slurm_reason = slurm.reason
        if facts is not None:
            if facts.driver_version is not None:
                inventory.driver_version = facts.driver_version
            if facts.cuda_version is not None:
                inventory.cuda_version = facts.cuda_version
            inventory.gpus.extend(gpu_info_message(g) for g in facts.gpus)
        if self._thresholds is not None:
            inventory.alert_thresholds.extend(self._thresholds())
        if self._history_tiers is not None:
            inventory.history_tiers.extend(self._history_tiers())
        return inventory

    def StreamSamples(
        self, request: pb.StreamSamplesRequest, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Yield pre-serialized SampleBatch bytes: replayed history first, then live."""
        peer = context.peer()
        context.add_callback(self._history.wake)  # a cancelled stream frees its worker at once
        if request.HasField("since_unix_ms"):
            replay, last_tick = self._history.since(request.since_unix_ms)
            log.info("stream to %s: replaying %d batches", peer, len(replay))
            for entry in replay:
                yield entry.payload + REPLAYED_SUFFIX
        else:
            last_tick = self._history.latest_tick()
        while context.is_active() and not self._history.closed:
            for entry in self._history.wait_after(last_tick, _STREAM_POLL_S):
                yield entry.payload
                last_tick = entry.tick
        log.info("stream to %s ended", peer)

"""Usage accounting in a real in-process daemon: QueryUsage over gRPC, kept across a restart."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.commands.usage import main
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for


def query(daemon: NodeDaemon, by: int = pb.USAGE_GROUPING_NODE) -> pb.QueryUsageResponse:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        response: pb.QueryUsageResponse = pb_grpc.NodeServiceStub(channel).QueryUsage(
            pb.QueryUsageRequest(group_by=by), timeout=5
        )
    return response


def test_daemon_meters_serves_and_keeps_usage(
    start_daemon: DaemonFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    daemon = start_daemon(gpus=2, model="h100", seed=2, state_dir=state, hostname="node-u")
    wait_for(lambda: daemon.sampler.sweeps >= 10, what="10 sweeps")
    first = query(daemon)
    assert first.node == "node-u"
    assert first.kpis.gpu_seconds_total > 0
    # Seed 2 starts GPU 0 with a process: the node row carries their GPU-seconds.
    assert [row.key for row in first.rows] == ["node-u"]
    assert first.rows[0].gpu_seconds > 0
    assert main(["usage", "--node", str(daemon.address), "--by", "user"]) == 0
    assert "GPU-h" in capsys.readouterr().out
    daemon.stop(grace_s=0.5)

    again = start_daemon(gpus=2, model="h100", seed=2, state_dir=state, hostname="node-u")
    wait_for(lambda: again.sampler.sweeps >= 5, what="5 sweeps")
    later = query(again)
    # What the first run billed survived its stop, and the second run adds to it.
    assert later.kpis.gpu_seconds_total > first.kpis.gpu_seconds_total

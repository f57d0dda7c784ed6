"""`gpufleet queue | submit | move` (#14): the fleet queue from a shell, end to end.

Real daemons on loopback; the commands run as real processes with a console
settings profile naming both nodes. What they did is checked through the
daemons' own RPCs.
"""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_terminal import gpufleet

pytestmark = pytest.mark.usefixtures("workload_accounts")


@pytest.fixture
def pair(start_daemon: DaemonFactory, tmp_path: Path) -> tuple[NodeDaemon, NodeDaemon, Path]:
    """node-a, whose GPUs a simulated user computes on (seed 1: 3 of 4), and node-b (seed 0:
    1 of 4), and a home whose console settings list both."""
    a = start_daemon(gpus=4, seed=1, hostname="node-a")
    b = start_daemon(gpus=4, seed=0, hostname="node-b")
    for daemon in (a, b):
        wait_for(lambda d=daemon: d.sampler.latest is not None, what="a first sample")
    home = tmp_path / "home"
    (home / ".config" / "gpufleet").mkdir(parents=True)
    (home / ".config" / "gpufleet" / "console.toml").write_text(
        f'nodes = ["{a.address}", "{b.address}"]\n'
    )
    return a, b, home


def listed(daemon: NodeDaemon) -> list[pb.Workload]:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        reply = pb_grpc.NodeServiceStub(channel).ListWorkloads(
            pb.ListWorkloadsRequest(include_ended=True), timeout=5
        )
    return list(reply.workloads)


def test_submit_to_the_fleet_picks_the_node_with_most_gpus_free(pair) -> None:
    a, b, home = pair
    code, out, err = gpufleet(home, "submit", "--owner", "alice", "--gpus", "1", "--priority", "5",
                              "--time-limit", "90m", "--", "sleep", "300")  # fmt: skip
    assert code == 0, err
    assert out.strip() == "node-b/w-1 queued (chosen: 3 of 4 GPUs free)"
    (made,) = listed(b)
    assert (made.priority, made.time_limit_s, list(made.argv)) == (5, 5400, ["sleep", "300"])
    assert listed(a) == []


def test_submit_to_a_named_node_and_a_bad_time_limit(pair) -> None:
    home = pair[2]
    code, out, err = gpufleet(home, "submit", "--node", "node-a", "--owner", "alice", "--",
                              "sleep", "300")  # fmt: skip
    assert code == 0, err
    assert out.strip() == "node-a/w-1 queued"
    code, _, err = gpufleet(home, "submit", "--owner", "alice", "--time-limit", "soon", "--",
                            "true")  # fmt: skip
    assert code == 2 and "'soon' is not a time limit like 90m, 2h or 1d12h" in err


def test_queue_lists_the_fleet_in_queue_order_with_why_each_waits(pair) -> None:
    a, b, home = pair
    for node, priority in (("node-a", "0"), ("node-b", "9")):
        code, _, err = gpufleet(home, "submit", "--node", node, "--owner", "alice",
                                "--priority", priority, "--gpus", "4", "--auto", "--",
                                "sleep", "300")  # fmt: skip
        assert code == 0, err
    wait_for(lambda: all(w.wait_reason for d in (a, b) for w in listed(d)), 10, "wait reasons")
    code, out, err = gpufleet(home, "queue", "--json")
    assert code == 0, err
    rows = json.loads(out)["workloads"]
    assert [r["qualified_id"] for r in rows] == ["node-b/w-1", "node-a/w-1"]
    assert rows[0]["priority"] == 9 and rows[0]["state"] == "queued"
    assert rows[0]["wait_reason"].startswith("next in line:")
    assert rows[0]["held_gpu_indices"] == [1, 2, 3]  # GPU 0 of node-b computes for someone
    code, out, _ = gpufleet(home, "queue")
    assert out.splitlines()[0].split()[:3] == ["ID", "NAME", "OWNER"]
    assert "node-b/w-1" in out.splitlines()[1] and "held 1,2,3" in out


def test_move_to_another_node_and_start_it_there(pair) -> None:
    a, b, home = pair
    code, _, err = gpufleet(home, "submit", "--node", "node-a", "--owner", "alice",
                            "--name", "train", "--", "sleep", "300")  # fmt: skip
    assert code == 0, err
    code, out, err = gpufleet(home, "move", "node-a/w-1", "--to", "node-b", "--gpu", "2")
    assert code == 0, err
    assert out.strip() == "moved node-a/w-1 (train) of alice to node-b/w-1 and started on GPU 2"
    (copy,) = listed(b)
    assert copy.state == pb.WORKLOAD_STATE_RUNNING and list(copy.gpu_indices) == [2]
    assert copy.moved_from == "node-a/w-1"
    assert [w.state for w in listed(a)] == [pb.WORKLOAD_STATE_CANCELLED]
    code, _, err = gpufleet(home, "move", "node-a/w-1", "--to", "node-b")
    assert code == 2 and "no queued or running workload node-a/w-1" in err
    code, _, err = gpufleet(home, "move", "w-1", "--to", "node-b")
    assert code == 2 and "'w-1' is not NODE/ID" in err

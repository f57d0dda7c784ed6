"""`gpufleet release --gpu`: some GPUs of a reservation, from the terminal, to a real daemon."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gpufleet.v1 import node_pb2 as pb
from node_daemon.server import NodeDaemon
from tests.console.test_terminal import calm, gpufleet, home, stub

__all__ = ["calm", "home"]  # fixtures, shared with the terminal's other tests


def test_release_some_gpus_then_the_rest(home: Path, calm: NodeDaemon) -> None:
    address = str(calm.address)
    with stub(address) as node:
        until = int((time.time() + 3600) * 1000)
        made = node.Reserve(
            pb.ReserveRequest(gpu_indices=[0, 1], holder="alice", until_unix_ms=until), timeout=5
        )

    code, out, err = gpufleet(home, "release", address, made.id, "--gpu", "1", "--json")

    assert (code, err) == (0, "")
    kept = json.loads(out)["results"][0]
    assert (kept["id"], kept["gpus"], kept["active"]) == (made.id, [0], True)
    assert f"reservation {made.id} of GPU 0 for alice kept (GPU 1 released)" in kept["done"]

    code, out, err = gpufleet(home, "release", address, made.id, "--gpu", "3")
    assert code != 0 and f"reservation {made.id} does not hold GPU 3" in out + err

    code, out, _ = gpufleet(home, "release", address, made.id)
    assert code == 0 and f"reservation {made.id} of GPU 0 for alice released" in out

"""Slurm's view of the node, through a stub `sinfo` on PATH (Slurm is not installed here)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.sampling.slurm import SlurmNodeState, SlurmWatcher, parse_sinfo
from tests.conftest import DaemonFactory, wait_for


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("drained|GPU 3 swap scheduled\n", SlurmNodeState("drained", "GPU 3 swap scheduled")),
        ("mixed|none\n", SlurmNodeState("mixed", None)),
        ("draining*|Kill task failed\n", SlurmNodeState("draining", "Kill task failed")),
        ("", None),
    ],
)
def test_parse_sinfo(output: str, expected: SlurmNodeState | None) -> None:
    assert parse_sinfo(output) == expected


def stub_sinfo(directory: Path, state_file: Path) -> None:
    """A stub that answers like sinfo, from a file the test controls; it logs its args."""
    script = directory / "sinfo"
    script.write_text(f'#!/bin/sh\necho "$@" >> {directory}/args\ncat {state_file}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_drained_node_shows_in_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_daemon: DaemonFactory
) -> None:
    state = tmp_path / "state.txt"
    state.write_text("drained|GPU 3 swap scheduled\n")
    stub_sinfo(tmp_path, state)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr("node_daemon.sampling.slurm.POLL_S", 0.1)
    daemon = start_daemon(hostname="gpu-node-05.example.org")
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)

        def inventory() -> pb.Inventory:
            return stub.GetInventory(pb.GetInventoryRequest(), timeout=5)

        wait_for(lambda: inventory().HasField("slurm_state"), 10, "Slurm state")
        assert inventory().slurm_state == "drained"
        assert inventory().slurm_reason == "GPU 3 swap scheduled"
        state.write_text("idle|none\n")  # resumed by the admin
        wait_for(lambda: inventory().slurm_state == "idle", 10)
        assert not inventory().HasField("slurm_reason")
    # Slurm knows the node by its short name.
    assert "--nodes gpu-node-05 " in (tmp_path / "args").read_text()


def test_no_sinfo_means_no_slurm_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no sinfo
    watcher = SlurmWatcher("node")
    watcher.start()
    watcher.stop()
    assert watcher.state is None

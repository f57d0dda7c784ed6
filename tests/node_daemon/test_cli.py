"""`gpufleet daemon` as a user runs it: a real process, signals, bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import wait_for

DAEMON = [sys.executable, "-m", "node_daemon", "daemon"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAEMON, *args], capture_output=True, text=True, timeout=60)


def test_help_explains_every_option() -> None:
    result = run("--help")
    assert result.returncode == 0
    for option in ("--backend", "--gpus", "--scenario", "--listen", "--config", "--insecure"):
        assert option in result.stdout


def test_help_says_auto_never_simulates() -> None:
    words = " ".join(run("--help").stdout.split())  # argparse wraps the help text
    assert "auto (the default): this server's GPUs through NVML, never simulated" in words
    assert "simulated: only when asked for by name" in words


def test_refuses_non_loopback_without_insecure() -> None:
    result = run("--backend", "simulated", "--listen", "0.0.0.0:0")
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0:0 without TLS" in result.stderr
    assert "and tokens ([[auth.users]] or [auth] jwks_file)" in result.stderr
    assert "--insecure" in result.stderr


def test_bad_config_names_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "daemon.toml"
    config.write_text('[daemon]\nsample_interval_s = "fast"\n')
    result = run("--config", str(config))
    assert result.returncode == 2
    assert str(config) in result.stderr and "sample_interval_s" in result.stderr


def test_unknown_config_key_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "daemon.toml"
    config.write_text("[daemon]\nlisten_port = 5\n")
    result = run("--config", str(config))
    assert result.returncode == 2 and "unknown key(s) listen_port" in result.stderr


def test_serves_then_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    config = tmp_path / "daemon.toml"
    config.write_text("[daemon]\ngpus = 3\nsample_interval_s = 0.2\n")
    proc = subprocess.Popen(
        [*DAEMON, "--config", str(config), "--backend", "simulated",
         "--listen", "127.0.0.1:0", "--ready-file", str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(ready.exists, 30, "the daemon's ready file")
        with grpc.insecure_channel(ready.read_text().strip()) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
        assert len(inventory.gpus) == 3  # from the file
        assert inventory.sample_interval_ms == 200
        os.kill(proc.pid, signal.SIGTERM)
        output, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "received SIGTERM" in output and "stopping" in output

"""The committed generated modules are exactly what the script generates."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "protos" / "gpufleet" / "v1"


def test_generated_modules_are_current(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "protos" / "generate.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    fresh = tmp_path / "gpufleet" / "v1"
    names = sorted(p.name for p in fresh.iterdir() if "_pb2" in p.name)
    assert names == ["node_pb2.py", "node_pb2.pyi", "node_pb2_grpc.py", "node_pb2_grpc.pyi"]
    stale = [n for n in names if not filecmp.cmp(fresh / n, GENERATED / n, shallow=False)]
    assert not stale, f"regenerate with protos/generate.sh: {stale} differ"


def test_keepalive_settings_agree() -> None:
    """The console must not ping faster than the daemon allows ("too many pings")."""
    from console.connections.channel import CHANNEL_OPTIONS
    from node_daemon.server import SERVER_OPTIONS

    client, server = dict(CHANNEL_OPTIONS), dict(SERVER_OPTIONS)
    assert (
        client["grpc.keepalive_time_ms"] >= server["grpc.http2.min_ping_interval_without_data_ms"]
    )
    assert client["grpc.keepalive_timeout_ms"] < client["grpc.keepalive_time_ms"]
    assert server["grpc.keepalive_permit_without_calls"] == 1

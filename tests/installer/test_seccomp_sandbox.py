"""The daemon under the unit's seccomp filters: NVML's ctypes path, gRPC, SQLite, /proc.

`MemoryDenyWriteExecute=yes` and `SystemCallFilter=@system-service` are the
settings most likely to break a Python daemon that loads a C library through
ctypes (libffi closures want writable+executable memory on some builds). This
runs `gpufleet daemon --backend nvml` against the fake libnvidia-ml.so.1 under
the same filters (tests/installer/seccomp_sandbox.py) and checks that it
serves GPUs, reads another process's /proc entry and writes its journal.
"""

from __future__ import annotations

import ctypes.util
import getpass
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import wait_for
from tests.fake_nvml.fixture import FakeNvmlState, build_fake_nvml
from tests.installer.tools import ROOT, UNIT, require_tool

PROBE = """
import ctypes, errno, mmap, os, socket
def denied(call):
    try:
        call()
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "allowed"
rwx = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
print(denied(lambda: mmap.mmap(-1, 4096, prot=rwx)),
      denied(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
      denied(lambda: os.chroot("/")),
      denied(lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()),
      ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 7)())
"""


def sandboxed(*command: str) -> list[str]:
    require_tool("systemd-analyze", "systemd", "the daemon under the unit's seccomp filters")
    if ctypes.util.find_library("seccomp") is None:
        pytest.skip(
            "!!! libseccomp NOT INSTALLED: the daemon under the unit's seccomp filters is "
            "NOT VERIFIED; the project's test command installs package systemd !!!"
        )
    return [sys.executable, "-m", "tests.installer.seccomp_sandbox", str(UNIT), "--", *command]


def test_the_sandbox_applies_the_units_filters() -> None:
    """A control: what the unit forbids fails inside the sandbox (and would outside)."""
    result = subprocess.run(
        sandboxed(sys.executable, "-c", PROBE), cwd=ROOT, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    # W+X memory, netlink sockets and chroot are refused; IPv6 sockets and a ctypes
    # callback (a libffi closure: executable trampoline code) are fine.
    assert result.stdout.split() == ["EPERM", "EAFNOSUPPORT", "EPERM", "allowed", "7"]


@pytest.fixture
def nvml_state(tmp_path: Path) -> FakeNvmlState:
    sandboxed()  # skips first when the sandbox cannot be built here
    library = build_fake_nvml(tmp_path / "lib")
    return FakeNvmlState(tmp_path / "nvml_state.txt", library.parent)


def start_daemon(state: FakeNvmlState, workdir: Path) -> subprocess.Popen[str]:
    ready = workdir / "ready"
    command = sandboxed(
        sys.executable, "-m", "node_daemon", "daemon", "--backend", "nvml",
        "--listen", "127.0.0.1:0", "--interval", "0.2", "--ready-file", str(ready),
        "--state-dir", str(workdir / "state"),
    )  # fmt: skip
    env = {**os.environ, "LD_LIBRARY_PATH": str(state.lib_dir), "FAKE_NVML_STATE": str(state.path)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    wait_for(lambda: ready.exists() or proc.poll() is not None, 30, "the daemon to serve")
    if proc.poll() is not None:
        pytest.fail(f"the sandboxed daemon exited {proc.returncode}:\n{proc.communicate()[0]}")
    return proc


def first_process(stub: pb_grpc.NodeServiceStub, pid: int) -> pb.GpuProcess:
    for batch in stub.StreamSamples(pb.StreamSamplesRequest(), timeout=20):
        for gpu in batch.gpus:
            for process in gpu.processes:
                if process.pid == pid:
                    return process
    raise AssertionError(f"pid {pid} never appeared on a GPU")


def firing_rules(stub: pb_grpc.NodeServiceStub) -> set[str]:
    return {alert.rule for alert in stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts}


def test_daemon_serves_nvml_under_the_units_filters(
    nvml_state: FakeNvmlState, sleeper: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    nvml_state.set(gpu_count=2).add_process(0, sleeper.pid, 1 << 30).set_gpu(1, temp=90)
    proc = start_daemon(nvml_state, tmp_path)
    try:
        with grpc.insecure_channel((tmp_path / "ready").read_text().strip()) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
            assert inventory.backend_state == pb.BACKEND_STATE_OK, inventory.backend_detail
            assert len(inventory.gpus) == 2
            process = first_process(stub, sleeper.pid)
            assert (process.user, process.command) == (getpass.getuser(), "sleep 300")
            wait_for(lambda: "gpu_temp" in firing_rules(stub), 20, "the gpu_temp alert")
        assert (tmp_path / "state" / "journal.sqlite3").stat().st_size > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0]
    assert proc.returncode == 0, output
    assert "Operation not permitted" not in output, output

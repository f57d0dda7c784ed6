"""The test accounts' cleanup ends only what this test session started (tests/accounts.py).

In a container or chroot that shares the host's process table, a test
account's uid can be a host user's: `pkill -u` there ended every process of
that user. Here a throwaway account runs one process the session started and
one it did not (started through `setsid -f`, so it descends from init, as a
host user's would).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests import accounts
from tests.accounts import SKIP_REASON, account_exists, can_create_accounts
from tests.conftest import wait_for
from tests.daemon_process import DaemonProcess
from tests.own_processes import alive, descends_from_us, processes_of, seen

pytestmark = pytest.mark.skipif(not can_create_accounts(), reason=SKIP_REASON)
_NUMBERS = itertools.count()


def running_as(uid: int, command: bytes) -> list[int]:
    found = []
    for process in processes_of(uid):
        try:
            args = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if args == command and process.state not in "ZX":
            found.append(process.pid)
    return found


@pytest.fixture
def throwaway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    """An account of its own, listed as test-created in a list of its own: (name, uid)."""
    name = f"gft-{os.getpid() % 100000}-{next(_NUMBERS)}"
    # Reachable by the account (pytest's own directories are root's alone): a workload
    # creates its working directory in its home.
    homes = Path(tempfile.mkdtemp(prefix="gpufleet-test-throwaway-"))
    homes.chmod(0o755)
    subprocess.run(["useradd", "--create-home", "--base-dir", str(homes), "--shell", "/bin/sh",
                    "--user-group", name], check=True, capture_output=True)  # fmt: skip
    monkeypatch.setattr(accounts, "CREATED", tmp_path / "created")
    monkeypatch.setattr(accounts, "HOMES", homes)
    monkeypatch.setattr(accounts, "LEFT_IN_PLACE", [])  # not the run's own summary
    accounts.CREATED.write_text(f"{name}\n")
    uid = int(subprocess.run(["id", "-u", name], check=True, capture_output=True).stdout)
    try:
        yield name, uid
    finally:
        for pid in running_as(uid, b"sleep\x003001\x00"):  # the stranger, by its own pid
            os.kill(pid, signal.SIGKILL)
        # Gone, not only ended: the next throwaway account may get the same uid.
        wait_for(lambda: not processes_of(uid), 10, "the account's processes to be reaped")
        subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)
        shutil.rmtree(homes, ignore_errors=True)


def test_the_cleanup_leaves_a_process_of_the_uid_it_did_not_start(throwaway) -> None:
    name, uid = throwaway
    ours = subprocess.Popen(["sleep", "300"], user=name, start_new_session=True)
    try:
        subprocess.run(["setsid", "-f", "sleep", "3001"], user=name, check=True)
        wait_for(lambda: running_as(uid, b"sleep\x003001\x00"), 10, "the stranger to start")
        (stranger,) = running_as(uid, b"sleep\x003001\x00")
        assert not descends_from_us(stranger)  # as a host user's process would not
        accounts._remove_created()
        assert alive(stranger), "the cleanup killed a process it did not start"
        # The session's own: killed, and reaped by the cleanup (its uid would stay busy).
        assert seen(ours.pid) is None
        assert account_exists(name)  # left in place, and listed for the next session
        assert accounts.CREATED.read_text().split() == [name]
        (said,) = [line for line in accounts.LEFT_IN_PLACE if f"account {name} " in line]
        assert f"{stranger} (sleep 3001)" in said and f"userdel --remove {name}" in said
    finally:
        if ours.poll() is None:
            ours.kill()
            ours.wait(10)


@pytest.mark.slow
def test_the_cleanup_ends_a_workload_whose_daemon_was_killed(
    throwaway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, uid = throwaway
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "1").start()
    with grpc.insecure_channel(daemon.address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        queued = stub.SubmitWorkload(
            pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner=name, gpu_count=1), timeout=5
        )
        request = pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[0])
        runner = stub.AssignWorkload(request, timeout=5).pid
    wait_for(lambda: running_as(uid, b"sleep\x00300\x00"), 10, "the workload to start")
    (workload,) = running_as(uid, b"sleep\x00300\x00")
    daemon.kill()  # the runner is reparented away from this session
    wait_for(lambda: (seen(runner) or seen(1)).ppid != daemon.proc.pid, 10, "the reparenting")
    assert not descends_from_us(workload)
    monkeypatch.setattr(accounts, "OWN_DIRS", [tmp_path])  # the session's, as conftest's
    accounts._remove_created()
    assert not alive(workload), "the session's own workload was left running"
    assert not account_exists(name), accounts.LEFT_IN_PLACE
    assert not [line for line in accounts.LEFT_IN_PLACE if f"account {name} " in line]

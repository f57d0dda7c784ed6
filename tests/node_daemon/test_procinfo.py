"""procinfo against recorded /proc trees, and once against the real /proc."""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

from node_daemon.backends import procinfo
from node_daemon.backends.procinfo import ProcessDetails, describe_process

PID = 4242
BTIME = 1_700_000_000
START_TICKS = 123_456
DOCKER_ID = "3f4e1c2b9a8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f"
OTHER_ID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
POD = "kubepods-burstable-pod1f2e3d4c_5b6a_7980_1a2b_3c4d5e6f7a8b.slice"


def record_process(
    root: Path,
    *,
    pid: int = PID,
    cgroup: str = "0::/user.slice/user-1000.slice/session-3.scope\n",
    environ: bytes = b"HOME=/root\0PATH=/usr/bin\0",
    uid: int = 0,
    cmdline: bytes = b"python\0train.py\0--epochs\x0010\0",
    comm: str = "python",
) -> Path:
    """A /proc tree with /proc/stat and one process, as the kernel writes them."""
    (root / "stat").write_text(f"cpu  1 2 3 4\nbtime {BTIME}\nprocesses 99\n")
    proc = root / str(pid)
    proc.mkdir(parents=True)
    after_comm = ["S"] + ["0"] * 18 + [str(START_TICKS)] + ["0"] * 30  # fields 3..52
    # A command name with spaces and parentheses, as a process may set it.
    (proc / "stat").write_text(f"{pid} (my (odd) {comm}) " + " ".join(after_comm) + "\n")
    (proc / "status").write_text(
        f"Name:\t{comm}\nState:\tS (sleeping)\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n"
    )
    (proc / "cmdline").write_bytes(cmdline)
    (proc / "comm").write_text(comm + "\n")
    (proc / "cgroup").write_text(cgroup)
    (proc / "environ").write_bytes(environ)
    return proc


def expected_start_ms() -> int:
    return BTIME * 1000 + START_TICKS * 1000 // os.sysconf("SC_CLK_TCK")


def test_recorded_process_is_described(tmp_path: Path) -> None:
    record_process(tmp_path)

    details = describe_process(PID, tmp_path)

    assert details == ProcessDetails(
        start_time_unix_ms=expected_start_ms(),
        user=pwd.getpwuid(0).pw_name,
        command="python train.py --epochs 10",
        container_id=None,
        slurm_job_id=None,
    )


@pytest.mark.parametrize(
    ("cgroup", "container_id"),
    [
        pytest.param(f"0::/system.slice/docker-{DOCKER_ID}.scope\n", DOCKER_ID, id="docker-v2"),
        pytest.param(
            f"12:memory:/docker/{DOCKER_ID}\n11:cpu,cpuacct:/docker/{DOCKER_ID}\n1:name=systemd:/\n",
            DOCKER_ID,
            id="docker-v1-cgroupfs",
        ),
        pytest.param(
            "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
            f"libpod-{DOCKER_ID}.scope/container\n",
            DOCKER_ID,
            id="podman-rootless",
        ),
        pytest.param(
            f"0::/machine.slice/libpod-conmon-{OTHER_ID}.scope\n", None, id="podman-conmon"
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/{POD}/cri-containerd-{DOCKER_ID}.scope\n",
            DOCKER_ID,
            id="kubernetes-containerd-systemd",
        ),
        pytest.param(
            "11:devices:/kubepods/besteffort/pod1f2e3d4c-5b6a-7980-1a2b-3c4d5e6f7a8b/"
            f"{DOCKER_ID}\n",
            DOCKER_ID,
            id="kubernetes-cgroupfs",
        ),
        pytest.param(f"0::/kubepods.slice/{POD}/crio-{DOCKER_ID}.scope\n", DOCKER_ID, id="cri-o"),
        pytest.param("0::/user.slice/user-1000.slice/session-3.scope\n", None, id="no-container"),
    ],
)
def test_container_id_from_cgroup(tmp_path: Path, cgroup: str, container_id: str | None) -> None:
    record_process(tmp_path, cgroup=cgroup)

    assert describe_process(PID, tmp_path).container_id == container_id


@pytest.mark.parametrize(
    "cgroup",
    [
        pytest.param(
            "7:devices:/slurm/uid_1000/job_4711/step_0/task_0\n"
            "4:memory:/slurm/uid_1000/job_4711/step_0/task_0\n1:name=systemd:/\n",
            id="slurm-cgroup-v1",
        ),
        pytest.param(
            "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n", id="slurm-cgroup-v2"
        ),
        pytest.param(
            "0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0\n", id="batch"
        ),
    ],
)
def test_slurm_job_from_cgroup(tmp_path: Path, cgroup: str) -> None:
    record_process(tmp_path, cgroup=cgroup, environ=b"SLURM_JOB_ID=999\0")

    assert describe_process(PID, tmp_path).slurm_job_id == "4711"  # the cgroup wins


def test_slurm_job_from_environ(tmp_path: Path) -> None:
    record_process(tmp_path, environ=b"HOME=/home/ada\0SLURM_JOB_ID=991\0SLURM_NTASKS=1\0")

    assert describe_process(PID, tmp_path).slurm_job_id == "991"


def test_unreadable_environ_reads_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may run as root, who can read a mode-000 file: refuse the read instead.
    environ = record_process(tmp_path, environ=b"SLURM_JOB_ID=991\0") / "environ"
    read_bytes = Path.read_bytes

    def refuse_environ(path: Path) -> bytes:
        if path == environ:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse_environ)

    details = describe_process(PID, tmp_path)

    assert details.slurm_job_id is None
    assert details.command == "python train.py --epochs 10"  # the rest still reads


def test_vanished_process_reads_all_none(tmp_path: Path) -> None:
    record_process(tmp_path)

    assert describe_process(PID + 1, tmp_path) == ProcessDetails()
    assert procinfo.process_start_time_unix_ms(PID + 1, tmp_path) is None


def test_process_vanishing_mid_read_reads_none_not_raise(tmp_path: Path) -> None:
    proc = record_process(tmp_path)
    for name in ("stat", "status", "cmdline", "comm"):
        (proc / name).unlink()  # the directory lingers a moment after the files go

    details = describe_process(PID, tmp_path)

    assert (details.start_time_unix_ms, details.user, details.command) == (None, None, None)


def test_unknown_uid_reads_as_number(tmp_path: Path) -> None:
    record_process(tmp_path, uid=3_999_999)

    assert describe_process(PID, tmp_path).user == "3999999"


def test_empty_cmdline_falls_back_to_comm(tmp_path: Path) -> None:
    record_process(tmp_path, cmdline=b"", comm="kworker/0:1")

    assert describe_process(PID, tmp_path).command == "kworker/0:1"


def test_long_command_is_truncated(tmp_path: Path) -> None:
    record_process(tmp_path, cmdline=b"python\0" + b"x" * 2000 + b"\0")

    command = describe_process(PID, tmp_path).command

    assert command is not None
    assert len(command) == procinfo.COMMAND_MAX_CHARS
    assert command.startswith("python xxx")


def test_current_process_from_real_proc() -> None:
    details = describe_process(os.getpid())
    boot_ms = procinfo.boot_time_unix_s()

    assert details.user == pwd.getpwuid(os.getuid()).pw_name
    assert details.command is not None and "python" in details.command
    assert boot_ms is not None and details.start_time_unix_ms is not None
    assert boot_ms * 1000 <= details.start_time_unix_ms <= time.time() * 1000


def test_fresh_child_start_time_is_now() -> None:
    before_ms = time.time() * 1000
    child = subprocess.Popen(["sleep", "60"])
    try:
        start_ms = procinfo.process_start_time_unix_ms(child.pid)
        after_ms = time.time() * 1000
        assert start_ms is not None
        # btime has one-second precision; the start tick rounds down.
        assert before_ms - 2000 <= start_ms <= after_ms + 1000
        # The start tick against the uptime (not btime): a child started within the minute.
        ticks = procinfo.process_start_ticks(child.pid)
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        assert ticks is not None and 0 <= uptime_s - ticks / os.sysconf("SC_CLK_TCK") < 60
    finally:
        child.kill()
        child.wait()

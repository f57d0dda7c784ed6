"""Throwaway systemd containers that stay up, for tests that act on them from outside.

Each is systemd-nspawn booting this machine's own root file system through an
overlay whose writes land in a tmpfs (they vanish with the container), inside a
private mount namespace, with a private network (loopback only), so several can
run side by side with the same ports. /etc/systemd/system is a directory of the
test's own (default.target = multi-user.target, nothing else enabled), so a boot
starts little and is quick. Commands reach a running container through nsenter
into its init's namespaces (`run_in`), as root, under its systemd.

tests/installer/test_in_container.py boots one container that runs a script and
powers off; this module is for containers driven from the test (e.g. by Ansible:
tests/installer/test_ansible_role.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

BOOT_TIMEOUT_S = 240
# The environment of every command run inside: the container's own, not the test's.
INSIDE_ENV = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
              "LANG=C.UTF-8", "HOME=/root"]  # fmt: skip


def nspawn_unavailable() -> str | None:
    """Why no container can be booted here, or None."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("systemd-nspawn", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install systemd-container util-linux)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "no overlayfs"
    return None


@dataclass
class Container:
    """A booted container: its name and the host PID of its init (PID 1 inside)."""

    name: str
    proc: subprocess.Popen[str]
    leader: int

    def nsenter(self) -> list[str]:
        """The command prefix that runs a program inside, as root, in a clean environment."""
        return ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "-C",
                "-r", "-w", *INSIDE_ENV]  # fmt: skip


def run_in(node: Container, script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a shell script inside the container; its status and output, never raising on failure."""
    return subprocess.run([*node.nsenter(), "/bin/sh", "-c", script], capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def _unit_directory(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "default.target").symlink_to("/usr/lib/systemd/system/multi-user.target")
    return directory


def _start(name: str, scratch: Path, binds: Sequence[tuple[Path, str]]) -> subprocess.Popen[str]:
    scratch.mkdir(parents=True)
    units = _unit_directory(scratch / "units")
    (scratch / "overlay").mkdir()
    script = (
        'set -e; mount -t tmpfs tmpfs "$1"; mkdir "$1/upper" "$1/work" "$1/root"; '
        'mount -t overlay overlay -o lowerdir=/,upperdir="$1/upper",workdir="$1/work" "$1/root"; '
        'root="$1/root"; shift; exec systemd-nspawn -D "$root" --register=no --keep-unit '
        '--link-journal=no --private-network --console=pipe "$@" -b'
    )
    options = [f"--uuid={uuid.uuid4().hex}", f"--machine={name}", f"--hostname={name}",
               f"--bind={units}:/etc/systemd/system",
               *(f"--bind-ro={host}:{inside}" for host, inside in binds)]  # fmt: skip
    with (scratch / "nspawn.log").open("w") as log:  # the child keeps its own copy
        return subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
             str(scratch / "overlay"), *options],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )  # fmt: skip


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            found += [int(child) for child in children]
            todo += [int(child) for child in children]
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _leader(proc: subprocess.Popen[str]) -> int | None:
    """The container's init: the descendant that is PID 1 in a PID namespace of its own."""
    for pid in _descendants(proc.pid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines()
                      if line.startswith("NSpid:")), [])  # fmt: skip
        # Before it execs systemd, nspawn's own child is PID 1 there too: wait for systemd.
        if len(nspid) > 1 and nspid[-1] == "1" and _comm(pid) == "systemd":
            return pid
    return None


def _wait_booted(name: str, proc: subprocess.Popen[str], scratch: Path) -> Container:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    state = "not started"
    while time.monotonic() < deadline and proc.poll() is None:
        leader = _leader(proc)
        if leader is not None:
            container = Container(name, proc, leader)
            left = max(1.0, deadline - time.monotonic())
            try:
                answer = run_in(container, "systemctl is-system-running --wait", timeout=left)
                state = answer.stdout.strip()
            except subprocess.TimeoutExpired:
                state = "still starting"
            # degraded: some unit of this machine's own failed in the container; systemd runs.
            if state in ("running", "degraded"):
                return container
        time.sleep(0.2)  # polling for the init process to appear, bounded by the deadline
    log = (scratch / "nspawn.log").read_text(errors="replace")[-3000:]
    raise RuntimeError(f"container {name} did not boot ({state}); nspawn said:\n{log}")


@contextmanager
def booted(names: Sequence[str], scratch: Path,
           binds: Sequence[tuple[Path, str]] = ()) -> Iterator[list[Container]]:  # fmt: skip
    """Boot one container per name, in parallel; skip the test (loudly) where none boots here.

    Args:
        names: container (and host) names.
        scratch: a directory of the test's for each container's units and log.
        binds: (host path, path inside) pairs bound read-only into every container.
    """
    why = nspawn_unavailable()
    if why:
        pytest.skip(f"!!! NO CONTAINER BOOTED: {why}: nothing is tried under a real systemd !!!")
    procs = [_start(name, scratch / name, binds) for name in names]
    try:
        with ThreadPoolExecutor(len(names)) as pool:
            futures = [pool.submit(_wait_booted, name, proc, scratch / name)
                       for name, proc in zip(names, procs, strict=True)]  # fmt: skip
            errors = [future.exception() for future in futures]
        if all(errors):
            pytest.skip(f"!!! NO CONTAINER BOOTED here: nothing is tried under a real systemd: "
                        f"{errors[0]} !!!")  # fmt: skip
        failed = [error for error in errors if error]
        if failed:
            raise failed[0]  # some booted, one did not: that is a failure, not this machine
        yield [future.result() for future in futures]
    finally:
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)  # nspawn: a clean poweroff
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)

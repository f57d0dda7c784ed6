"""Who a GPU process is, read from /proc: start time, user, command, container, Slurm job.

Pure functions of a pid and a proc root (``/proc`` by default; tests pass a recorded
tree, a containerised daemon may pass the host's). A process can vanish between NVML
listing it and us reading /proc; then every field is None. Nothing here raises for a
missing or unreadable file.
"""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
COMMAND_MAX_CHARS = 512

# A 64-hex container id as runtimes put it in cgroup paths:
#   docker-<id>.scope, /docker/<id>, libpod-<id>.scope, cri-containerd-<id>.scope,
#   crio-<id>.scope, /kubepods/<qos>/pod<uid>/<id>, /actions_job/<id>
# but not libpod-conmon-<id>.scope (that is podman's monitor, outside the container).
_CONTAINER_ID = re.compile(r"(?:^|/|(?<!conmon)-)([0-9a-f]{64})(?:\.scope)?(?=/|$)")
# Slurm's cgroup: v1 /slurm/uid_1000/job_123/step_0, v2 .../slurmstepd.scope/job_123/step_0
_SLURM_JOB = re.compile(r"/job_(\d+)(?=/|$)")


@dataclass(frozen=True)
class ProcessDetails:
    """What /proc says about one process; None where it could not be read."""

    start_time_unix_ms: int | None = None
    user: str | None = None
    command: str | None = None
    container_id: str | None = None
    slurm_job_id: str | None = None


def describe_process(pid: int, proc_root: Path = PROC) -> ProcessDetails:
    """Everything we know about `pid`; all None if it has gone."""
    if not (proc_root / str(pid)).is_dir():
        return ProcessDetails()
    cgroup = _read_text(proc_root / str(pid) / "cgroup") or ""
    return ProcessDetails(
        start_time_unix_ms=process_start_time_unix_ms(pid, proc_root),
        user=process_user(pid, proc_root),
        command=process_command(pid, proc_root),
        container_id=container_id_from_cgroup(cgroup),
        slurm_job_id=slurm_job_from_cgroup(cgroup) or slurm_job_from_environ(pid, proc_root),
    )


def process_start_ticks(pid: int, proc_root: Path = PROC) -> int | None:
    """Field 22 of /proc/PID/stat: start time in clock ticks since boot.

    Exact and stable for the life of the process: the value to compare when
    making sure a pid still names the same process.
    """
    stat = _read_text(proc_root / str(pid) / "stat")
    if stat is None or ")" not in stat:
        return None
    # The command name (field 2) may hold spaces and ")": split after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        return int(fields[19])  # fields[0] is field 3 (state), so field 22 is fields[19]
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class ProcessIdentity:
    """One process for certain: the boot it runs in and its start tick.

    Both are exact and the wall clock moves neither, so a daemon that restarted
    tells its workload from a process that reuses the pid by comparing them.
    """

    boot_id: str
    start_ticks: int

    def to_text(self) -> str:
        return f"{self.boot_id} {self.start_ticks}\n"

    @classmethod
    def from_text(cls, text: str) -> ProcessIdentity | None:
        words = text.split()
        ticks = _int_or_none(words[1]) if len(words) == 2 else None
        return None if ticks is None else cls(words[0], ticks)


def boot_id(proc_root: Path = PROC) -> str | None:
    """The kernel's random id of this boot (/proc/sys/kernel/random/boot_id)."""
    text = (_read_text(proc_root / "sys" / "kernel" / "random" / "boot_id") or "").strip()
    return text or None


def process_identity(pid: int, proc_root: Path = PROC) -> ProcessIdentity | None:
    """Which process `pid` is now; None if it has gone (or /proc cannot say)."""
    ticks = process_start_ticks(pid, proc_root)
    boot = boot_id(proc_root)
    return None if ticks is None or boot is None else ProcessIdentity(boot, ticks)


# The boot time each proc root read first, kept for the life of this process.
_BOOT_TIMES: dict[Path, int] = {}


def boot_time_unix_s(proc_root: Path = PROC) -> int | None:
    """When the machine booted, in Unix seconds: /proc/stat's ``btime`` as first read.

    The kernel derives btime from the wall clock, so a clock step (NTP, a virtual
    machine resumed) moves it, and a step of a millisecond can move it a whole
    second. Start times are checked to the tick (a kill names its process by one),
    so every start time this process computes uses the boot time it read first.
    """
    kept = _BOOT_TIMES.get(proc_root)
    if kept is not None:
        return kept
    for line in (_read_text(proc_root / "stat") or "").splitlines():
        if line.startswith("btime "):
            read = _int_or_none(line.split()[1])
            if read is not None:
                _BOOT_TIMES[proc_root] = read
            return read
    return None


def process_start_time_unix_ms(pid: int, proc_root: Path = PROC) -> int | None:
    """When `pid` started, in Unix milliseconds (boot time has one-second precision)."""
    ticks = process_start_ticks(pid, proc_root)
    btime = boot_time_unix_s(proc_root)
    if ticks is None or btime is None:
        return None
    return btime * 1000 + ticks * 1000 // os.sysconf("SC_CLK_TCK")


def process_user(pid: int, proc_root: Path = PROC) -> str | None:
    """The real uid of the ``Uid:`` line of /proc/PID/status, as a name where one exists."""
    for line in (_read_text(proc_root / str(pid) / "status") or "").splitlines():
        if line.startswith("Uid:"):
            uid = _int_or_none(line.split()[1])
            return None if uid is None else _user_name(uid)
    return None


def process_argv(pid: int, proc_root: Path = PROC) -> list[bytes] | None:
    """/proc/PID/cmdline split at its NULs; None when it cannot be read (gone, hidden)."""
    raw = _read_bytes(proc_root / str(pid) / "cmdline")
    return None if raw is None else raw.split(b"\0")


def process_command(pid: int, proc_root: Path = PROC) -> str | None:
    """/proc/PID/cmdline joined with spaces (at most 512 chars), else /proc/PID/comm."""
    argv = process_argv(pid, proc_root) or []
    args = [arg.decode(errors="replace") for arg in argv if arg]
    if args:
        return " ".join(args)[:COMMAND_MAX_CHARS]
    comm = (_read_text(proc_root / str(pid) / "comm") or "").strip()
    return comm or None


def container_id_from_cgroup(cgroup: str) -> str | None:
    """The full 64-hex container id in a /proc/PID/cgroup text, if the process has one."""
    found: str | None = None
    for line in cgroup.splitlines():
        path = line.split(":", 2)[-1]
        for match in _CONTAINER_ID.finditer(path):
            found = match.group(1)
    return found


def slurm_job_from_cgroup(cgroup: str) -> str | None:
    """The Slurm job id in a /proc/PID/cgroup text (``.../job_NNN/...``), if any."""
    for line in cgroup.splitlines():
        match = _SLURM_JOB.search(line.split(":", 2)[-1])
        if match:
            return match.group(1)
    return None


def slurm_job_from_environ(pid: int, proc_root: Path = PROC) -> str | None:
    """``SLURM_JOB_ID`` from /proc/PID/environ (readable by its owner and root only)."""
    for entry in (_read_bytes(proc_root / str(pid) / "environ") or b"").split(b"\0"):
        if entry.startswith(b"SLURM_JOB_ID="):
            return entry.split(b"=", 1)[1].decode(errors="replace") or None
    return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None if it is gone or unreadable (vanished pid, permission)."""
    try:
        return path.read_bytes()
    except OSError:  # FileNotFoundError, ProcessLookupError, PermissionError, ...
        return None


def _read_text(path: Path) -> str | None:
    raw = _read_bytes(path)
    return None if raw is None else raw.decode(errors="replace")


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None

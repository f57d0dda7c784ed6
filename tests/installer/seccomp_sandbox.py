"""Run a command under the seccomp half of the daemon's systemd unit, without systemd.

The unit's `SystemCallFilter=`, `SystemCallErrorNumber=`, `MemoryDenyWriteExecute=`
and `RestrictAddressFamilies=` are seccomp filters that systemd installs before
it executes the daemon. This module installs the same filters through libseccomp
(the library systemd itself uses) and then executes the command, so a test can
check that Python, gRPC, SQLite and nvidia-ml-py's ctypes path run under them on
a machine where systemd is not running:

    python -m tests.installer.seccomp_sandbox UNIT_FILE -- COMMAND ARGS...

Groups such as ``@system-service`` are expanded with ``systemd-analyze
syscall-filter``, so the list is the installed systemd's own. What is not
emulated: the mount namespace settings (ProtectSystem=, PrivateTmp=, ...),
DevicePolicy=, and the rarely hit filters of LockPersonality=,
RestrictRealtime= and RestrictNamespaces=.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import socket
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ = 4
SCMP_CMP_GE = 5
SCMP_CMP_MASKED_EQ = 7
PR_SET_NO_NEW_PRIVS = 38
SHM_EXEC = 0o100000
# Families above this are all denied (AF_MAX on current kernels is 46).
AF_LIMIT = 64


def scmp_act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class ScmpArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def unit_settings(unit_file: Path) -> dict[str, list[str]]:
    """The [Service] settings of a unit file, each key's assignments in order."""
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in unit_file.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line:
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def syscall_groups() -> dict[str, list[str]]:
    """Every `@group` of the installed systemd with its members (names and @groups)."""
    result = subprocess.run(
        ["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True
    )
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    for line in result.stdout.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif line.strip() and not line.strip().startswith("#") and line.startswith(" "):
            current.append(line.strip())
    return groups


def expand(names: Iterable[str], groups: dict[str, list[str]]) -> set[str]:
    found: set[str] = set()
    for name in names:
        found |= expand(groups[name], groups) if name.startswith("@") else {name}
    return found


class Filter:
    """One seccomp filter program built with libseccomp."""

    def __init__(self, lib: ctypes.CDLL, default_action: int) -> None:
        self._lib = lib
        self._ctx = lib.seccomp_init(default_action)
        if not self._ctx:
            raise OSError("seccomp_init failed")

    def add(self, action: int, name: str, *conditions: tuple[int, int, int, int]) -> bool:
        number = self._lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return False  # not a syscall of this architecture (e.g. a 32-bit one)
        array = (ScmpArgCmp * max(1, len(conditions)))(*(ScmpArgCmp(*c) for c in conditions))
        rc = self._lib.seccomp_rule_add_array(self._ctx, action, number, len(conditions), array)
        if rc < 0:
            raise OSError(-rc, f"seccomp_rule_add {name}: {os.strerror(-rc)}")
        return True

    def load(self) -> None:
        rc = self._lib.seccomp_load(self._ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {os.strerror(-rc)}")


def load_libseccomp() -> ctypes.CDLL:
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
    ]  # fmt: skip
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def syscall_filter(lib: ctypes.CDLL, settings: dict[str, list[str]]) -> Filter | None:
    """SystemCallFilter= as an allow list; denied calls fail with SystemCallErrorNumber=."""
    values = settings.get("SystemCallFilter", [])
    if not values:
        return None
    if any(v.startswith("~") for v in values):
        raise NotImplementedError("only allow-list SystemCallFilter= is emulated")
    code_name = settings.get("SystemCallErrorNumber", ["EPERM"])[-1]
    groups = syscall_groups()
    allowed = expand((n for v in values for n in v.split()), groups)
    # systemd always lets the service finish starting and exit.
    allowed |= expand(["@default"], groups) | {"execve", "exit", "exit_group"}
    program = Filter(lib, scmp_act_errno(getattr(errno, code_name)))
    for name in sorted(allowed):
        program.add(SCMP_ACT_ALLOW, name)
    return program


def write_execute_filter(lib: ctypes.CDLL, settings: dict[str, list[str]]) -> Filter | None:
    """MemoryDenyWriteExecute=yes as systemd builds it (seccomp-util.c)."""
    if settings.get("MemoryDenyWriteExecute", ["no"])[-1] not in ("yes", "true", "1", "on"):
        return None
    program = Filter(lib, SCMP_ACT_ALLOW)
    deny = scmp_act_errno(errno.EPERM)
    write_exec = mmap.PROT_WRITE | mmap.PROT_EXEC
    program.add(deny, "mmap", (2, SCMP_CMP_MASKED_EQ, write_exec, write_exec))
    program.add(deny, "mprotect", (2, SCMP_CMP_MASKED_EQ, mmap.PROT_EXEC, mmap.PROT_EXEC))
    program.add(deny, "pkey_mprotect", (2, SCMP_CMP_MASKED_EQ, mmap.PROT_EXEC, mmap.PROT_EXEC))
    program.add(deny, "shmat", (2, SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC))
    return program


def address_family_filter(lib: ctypes.CDLL, settings: dict[str, list[str]]) -> Filter | None:
    """RestrictAddressFamilies= (allow list): socket() of any other family fails."""
    values = [n for v in settings.get("RestrictAddressFamilies", []) for n in v.split()]
    if not values:
        return None
    allowed = {int(getattr(socket, name)) for name in values}
    program = Filter(lib, SCMP_ACT_ALLOW)
    deny = scmp_act_errno(errno.EAFNOSUPPORT)
    for family in range(AF_LIMIT):
        if family not in allowed:
            program.add(deny, "socket", (0, SCMP_CMP_EQ, family, 0))
    program.add(deny, "socket", (0, SCMP_CMP_GE, AF_LIMIT, 0))
    return program


def apply(unit_file: Path) -> None:
    """Install the unit's seccomp filters on this process (and what it executes)."""
    settings = unit_settings(unit_file)
    lib = load_libseccomp()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    builders = (write_execute_filter, address_family_filter, syscall_filter)
    programs = [p for p in (build(lib, settings) for build in builders) if p is not None]
    for program in programs:  # the allow list last: loading needs prctl and seccomp
        program.load()


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(f"usage: {sys.argv[0]} UNIT_FILE -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    apply(Path(argv[0]))
    os.execvp(argv[2], list(argv[2:]))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Real local accounts for workloads to run as: created by the tests as root, removed after.

A workload runs as its owner's local account (node_daemon/control/accounts.py),
so tests that launch workloads need accounts named like the owners they use.
Only missing accounts are created (homes under /tmp), and only those are
removed again, by the last test session that uses them: sessions running at
the same time share them through a lock file, and a marker file lists what
was created.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Every owner a test launches workloads for.
TEST_ACCOUNTS = ("alice", "bob", "carol", "worker", "otto", "ada", "vera", "dmitri", "erin")
SKIP_REASON = (
    "SKIPPED LOUDLY: launching workloads needs local accounts for their owners, and only root "
    "can create them; run the tests as root (CI does)"
)
LOCK = Path("/tmp/gpufleet-test-accounts.lock")
CREATED = Path("/tmp/gpufleet-test-accounts.created")
HOMES = Path("/tmp/gpufleet-test-homes")


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def can_create_accounts() -> bool:
    return os.geteuid() == 0 and shutil.which("useradd") is not None


@contextmanager
def local_accounts(names: tuple[str, ...] = TEST_ACCOUNTS) -> Iterator[None]:
    """The accounts exist while this runs; the last session out removes what tests created."""
    with open(LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _create_missing(names)
        fcntl.flock(lock, fcntl.LOCK_SH)  # others may use them too now
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another session still uses them; it removes them
            _remove_created()


def _create_missing(names: tuple[str, ...]) -> None:
    HOMES.mkdir(mode=0o755, exist_ok=True)
    HOMES.chmod(0o755)  # the accounts must reach their homes
    for name in names:
        if account_exists(name):
            _repair_leftover(name)
            continue
        subprocess.run(
            ["useradd", "--create-home", "--base-dir", str(HOMES), "--shell", "/bin/sh",
             "--user-group", name],
            check=True, capture_output=True,
        )  # fmt: skip
        with open(CREATED, "a") as created:
            created.write(f"{name}\n")


def _repair_leftover(name: str) -> None:
    """An account an interrupted session left behind: give it its home back, remove it later."""
    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    if home.parent != HOMES:
        return  # a real account of this machine: used as it is, never removed
    home.mkdir(mode=0o755, exist_ok=True)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    listed = CREATED.read_text().split() if CREATED.exists() else []
    if name not in listed:
        with open(CREATED, "a") as created:
            created.write(f"{name}\n")


def _remove_created() -> None:
    names = CREATED.read_text().split() if CREATED.exists() else []
    for name in names:
        # A workload a test left running would make userdel refuse: end them first.
        for _ in range(50):
            alive = subprocess.run(["pkill", "-KILL", "-u", name], check=False)
            if alive.returncode != 0:  # 1: no process was left
                break
            time.sleep(0.1)  # SIGKILL is asynchronous; nothing to wait on for another's child
        subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)
    CREATED.unlink(missing_ok=True)
    shutil.rmtree(HOMES, ignore_errors=True)

"""Real local accounts for workloads to run as: created by the tests as root, removed after.

A workload runs as its owner's local account (node_daemon/control/accounts.py),
so tests that launch workloads need accounts named like the owners they use.
Only missing accounts are created (homes under /tmp), and only those are
removed again, by the last test session that uses them: sessions running at
the same time share them through a lock file, and a marker file lists what
was created.

The cleanup ends only processes this test session started (tests/own_processes.py),
never every process of a uid: in a container or chroot that shares the host's
process table, the uid of a test account can be a host user's. An account that
still has other processes is left in place, and the end of the run says so.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.own_processes import Seen, end_own, processes_of

# Every owner a test launches workloads for.
TEST_ACCOUNTS = ("alice", "bob", "carol", "worker", "otto", "ada", "vera", "dmitri", "erin")
SKIP_REASON = (
    "SKIPPED LOUDLY: launching workloads needs local accounts for their owners, and only root "
    "can create them; run the tests as root (CI does)"
)
LOCK = Path("/tmp/gpufleet-test-accounts.lock")
CREATING = Path("/tmp/gpufleet-test-accounts.creating.lock")
CREATED = Path("/tmp/gpufleet-test-accounts.created")
HOMES = Path("/tmp/gpufleet-test-homes")
# The directories this session's daemons keep their workloads in (local_accounts sets them).
OWN_DIRS: list[Path] = []
# What the cleanup could not do and why, for the end of the run (tests/conftest.py).
LEFT_IN_PLACE: list[str] = []


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def can_create_accounts() -> bool:
    return os.geteuid() == 0 and shutil.which("useradd") is not None


@contextmanager
def local_accounts(
    names: tuple[str, ...] = TEST_ACCOUNTS, own_dirs: Sequence[Path] = ()
) -> Iterator[None]:
    """The accounts exist while this runs; the last session out removes what tests created.

    `own_dirs`: where this session's daemons keep their state (the session's temporary
    directory), so that a workload whose daemon a test stopped is still known as ours.
    """
    OWN_DIRS.extend(own_dirs)
    with open(LOCK, "a+") as lock:
        # Where another session made them and uses them, share them at once: two runs
        # (a developer's and a helper's, or make test's two workers) go side by side
        # instead of one waiting for the other's end. The shared lock, held throughout,
        # keeps them from being removed; making or repairing them takes a lock of its own.
        # (Upgrading this one to exclusive could wait for another session's whole run:
        # two sessions that found them missing both drop their shared lock to upgrade,
        # and the second's exclusive waits on the first's shared lock taken again.)
        fcntl.flock(lock, fcntl.LOCK_SH)
        if not all(_usable(name) for name in names):
            with open(CREATING, "a+") as creating:
                fcntl.flock(creating, fcntl.LOCK_EX)  # released as it closes
                _create_missing(names)  # only what is still missing once it holds it
        try:
            yield
        finally:
            for name in names:  # each session ends its own, even when another stays
                if account_exists(name):
                    end_own(pwd.getpwnam(name).pw_uid, OWN_DIRS)
            fcntl.flock(lock, fcntl.LOCK_UN)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another session still uses them; it removes them
            _remove_created()


def _usable(name: str) -> bool:
    """The account exists with its home (as _create_missing leaves it)."""
    try:
        return Path(pwd.getpwnam(name).pw_dir).is_dir()
    except KeyError:
        return False


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
    """Remove the accounts tests created; any still in use stays listed for the next session."""
    names = CREATED.read_text().split() if CREATED.exists() else []
    kept = remove_accounts(names, OWN_DIRS)
    if kept:
        CREATED.write_text("".join(f"{name}\n" for name in kept))
        return  # their homes stay with them
    CREATED.unlink(missing_ok=True)
    shutil.rmtree(HOMES, ignore_errors=True)


def remove_accounts(names: Sequence[str], own_dirs: Sequence[Path]) -> list[str]:
    """End what this session left running as each account, then remove it; those kept.

    An account that still runs something this session did not start (another
    session's workload, or a host user who has the same uid) is left in place,
    its processes untouched, and LEFT_IN_PLACE says so.
    """
    kept = []
    for name in names:
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue  # removed already
        end_own(uid, own_dirs)
        others = processes_of(uid)
        if others:
            _left_in_place(name, uid, "it still runs processes this test session did not "
                           f"start, none of which was signalled: {_described(others)}")  # fmt: skip
            kept.append(name)
            continue
        removed = subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)
        if removed.returncode not in (0, 12):  # 12: its home could not be removed
            _left_in_place(name, uid, f"userdel failed: {removed.stderr.decode().strip()}")
            kept.append(name)
    return kept


def _left_in_place(name: str, uid: int, why: str) -> None:
    LEFT_IN_PLACE.append(
        f"test account {name} (uid {uid}) was NOT removed: {why}. Once they have ended: "
        f"userdel --remove {name}"
    )


def _described(processes: Iterable[Seen]) -> str:
    described = []
    for pid in (p.pid for p in processes):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:
            command = b"(gone)"
        described.append(f"{pid} ({command.decode(errors='replace')[:80]})")
    return ", ".join(described)

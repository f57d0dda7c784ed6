"""Whose account a workload runs as: its owner's, never root's, never the daemon's.

A workload's owner is a gpufleet user name (or ``team:NAME``); the process runs
as a local account of the same name unless ``[workloads] accounts`` maps the
owner to another. A team's workload runs as the user who submitted it, unless
the team is mapped. The daemon checks the account when the workload is
submitted and again when it starts (an account may be removed meanwhile).

Only a daemon that may switch users (root, or CAP_SETUID and CAP_SETGID) runs
other people's workloads. One without that privilege, a personal or demo
daemon, runs only the workloads of the account it runs as: that account *is*
the owner then, not a stand-in for it.

A demo node (`gpufleet daemon --demo`, simulated GPUs on loopback only) is the
one exception: it has no real users to run as, so every workload runs as the
daemon's own account (`own_account`, root included when the demo runs as root)
and keeps its owner's name (alice, root, nobody, team:ml) in every record. The
host's accounts are never looked up or touched.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpufleet.policy import LOCAL_USER
from node_daemon.errors import Refused

CAP_SETGID, CAP_SETUID = 6, 7
# What a login shell would start with; the workload's own variables come on top.
LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"


class NoAccount(Refused):
    """The workload has no local account it may run as; the message says why and what to do."""


@dataclass(frozen=True)
class Account:
    """A local account a workload may run as."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str


def account_name(owner: str, submitter: str, accounts: Mapping[str, str]) -> str:
    """The local account name for a workload of `owner` submitted by `submitter`."""
    if owner in accounts:
        return accounts[owner]
    if owner.startswith("team:"):
        if not submitter or submitter == LOCAL_USER:  # no one in particular: no account
            raise NoAccount(
                f"a workload of {owner} runs as the user who submits it, and none was named; "
                f'map the team to an account in [workloads] accounts ("{owner}" = "NAME")'
            )
        return accounts.get(submitter, submitter)
    return owner


def daemon_may_switch_users() -> bool:
    """Root, or CAP_SETUID and CAP_SETGID in the effective set."""
    if os.geteuid() == 0:
        return True
    effective = _capabilities("CapEff")
    return bool(effective & (1 << CAP_SETUID)) and bool(effective & (1 << CAP_SETGID))


def check_account(name: str, may_switch: bool | None = None) -> Account:
    """The account `name`, if a workload may run as it here; else NoAccount saying why.

    `may_switch`: whether the launcher can start processes as other accounts
    (systemd's can, for an unprivileged daemon); None: whether the daemon can.
    """
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name) or len(name) > 256:
        raise NoAccount(f"{name!r} cannot be a local account name (empty, too long or control "
                        "characters)")  # fmt: skip
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):
        raise NoAccount(
            f"no local account {name!r} on this node to run the workload as: create it, or map "
            "the owner to an existing account in [workloads] accounts"
        ) from None
    if entry.pw_uid == 0:
        raise NoAccount(f"workloads never run as root (account {name!r} has uid 0)")
    daemon_uid = os.geteuid()
    if daemon_may_switch_users() if may_switch is None else may_switch:
        if entry.pw_uid == daemon_uid:
            raise NoAccount(
                f"workloads never run as the daemon's own account ({name!r}): map the owner "
                "to a personal account in [workloads] accounts"
            )
    elif entry.pw_uid != daemon_uid:
        raise NoAccount(
            f"this daemon runs as {_user_name(daemon_uid)} without the privilege to start "
            f"processes as {name!r} (it needs root, or CAP_SETUID and CAP_SETGID)"
        )
    return Account(name, entry.pw_uid, entry.pw_gid, entry.pw_dir, entry.pw_shell or "/bin/sh")


def own_account() -> Account:
    """The daemon's own account: a demo node's stand-in for every owner.

    A uid without a passwd entry (a container's) is named by its number.
    """
    uid = os.geteuid()
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        home = os.environ.get("HOME", "/")
        return Account(str(uid), uid, os.getegid(), home, "/bin/sh")
    return Account(entry.pw_name, uid, entry.pw_gid, entry.pw_dir, entry.pw_shell or "/bin/sh")


def login_environment(account: Account, declared: Mapping[str, str]) -> dict[str, str]:
    """A clean, login-like environment plus what the submitter declared; nothing of the daemon's."""
    env = {
        "HOME": account.home,
        "USER": account.name,
        "LOGNAME": account.name,
        "SHELL": account.shell,
        "PATH": LOGIN_PATH,
        "LANG": "C.UTF-8",
    }
    env.update(declared)
    return env


def working_directory(template: str, account: Account, workload_id: str) -> str:
    """The workload's own working directory, from the `[workloads] work_dir` template."""
    return str(Path(template.format(home=account.home, user=account.name, id=workload_id)))


def _capabilities(field: str) -> int:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1], 16)
    return 0


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)

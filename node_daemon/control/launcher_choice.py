"""Which launcher starts workloads on this node: `[workloads] launcher`, decided at start-up.

``auto`` takes systemd where it can work: systemd is PID 1, `systemd-run` and
`systemctl` are installed, and this daemon may start units (it is root, or
polkit grants it org.freedesktop.systemd1.manage-units, as the rule that
installer/install.sh installs does for the gpufleet user). Anywhere else
(containers, CI, a personal daemon on a workstation) it starts workloads
directly.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from node_daemon.control.launcher import DirectLauncher, Launcher
from node_daemon.control.systemd_launcher import SYSTEMCTL, SYSTEMD_RUN, SystemdLauncher
from node_daemon.errors import ConfigError

log = logging.getLogger(__name__)

SYSTEMD_RUNTIME_DIR = Path("/run/systemd/system")  # exists only where systemd is PID 1
MANAGE_UNITS = "org.freedesktop.systemd1.manage-units"
PKCHECK_TIMEOUT_S = 10.0


def choose_launcher(
    setting: str, journal_id: str, runtime_dir: Path = SYSTEMD_RUNTIME_DIR
) -> Launcher:
    """The launcher `setting` names; ConfigError when "systemd" cannot work here."""
    if setting == "direct":
        return DirectLauncher()
    problem = systemd_problem(runtime_dir)
    if setting == "systemd":
        if problem is not None:
            raise ConfigError(
                f'[workloads] launcher = "systemd", but {problem}: set launcher = "auto" '
                'or "direct"'
            )
        if not may_manage_units():
            log.warning(
                "polkit does not say this account may start systemd units: workloads "
                "will fail to start unless systemd allows it otherwise"
            )
        return _systemd(journal_id)
    if problem is None and not may_manage_units():
        problem = (
            "polkit does not let this account start systemd units (install.sh installs "
            "the rule for the gpufleet user)"
        )
    if problem is None:
        return _systemd(journal_id)
    log.info("workloads start directly as the daemon's children (launcher auto: %s)", problem)
    return DirectLauncher()


def _systemd(journal_id: str) -> Launcher:
    log.info("workloads start as transient systemd units, each as its owner's account")
    return SystemdLauncher(journal_id)


def systemd_problem(runtime_dir: Path = SYSTEMD_RUNTIME_DIR) -> str | None:
    """Why systemd cannot start workloads here, or None."""
    if not runtime_dir.is_dir():
        return f"systemd is not PID 1 here (no {runtime_dir})"
    missing = [tool for tool in (SYSTEMD_RUN, SYSTEMCTL) if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found"
    return None


def may_manage_units() -> bool:
    """Root, or polkit authorises this process to manage units (what systemd asks it)."""
    if os.geteuid() == 0:
        return True
    pkcheck = shutil.which("pkcheck")
    if pkcheck is None:
        return False  # no polkit: systemd refuses unprivileged callers
    command = [pkcheck, "--action-id", MANAGE_UNITS, "--process", str(os.getpid())]
    try:
        done = subprocess.run(command, capture_output=True, timeout=PKCHECK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("cannot ask polkit whether this daemon may start units: %s", exc)
        return False
    return done.returncode == 0

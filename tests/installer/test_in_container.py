"""install.sh into / under a real systemd: the unit starts, sandboxed, and does its job.

systemd does not run on a build machine, so this boots one in a throwaway
container: systemd-nspawn on an overlay of this machine's own root file system
(writes land in a tmpfs and vanish), inside a private mount namespace, with a
private network. tests/installer/container_e2e.sh then runs there as a unit:
install.sh (from an offline wheel directory this test prepares), the running
daemon's user, capabilities, seccomp and state directory, NVML through the
fake library reading another user's process, /metrics, workloads of a local
user (tests/installer/container_workloads.py: each in a transient unit of its
own, as that user, outside the daemon's sandbox; re-adopted after a restart;
a cancel ends its whole cgroup), the polkit rule refusing the daemon other
units, a child process that outlives a restart (KillMode=process), upgrade,
uninstall and purge. Then, in the same boot, the Debian package
(installer/deb/build-deb.sh, built here from the same offline wheels, and a
copy repacked as the next version): `apt-get install ./gpufleet-daemon_*.deb`
gives a running, hardened daemon; installing the next version restarts it and
keeps the config and the journal's records; `apt-get remove` keeps config,
state and user; `apt-get purge` removes them.

Needs root, systemd-nspawn (Debian package systemd-container) and overlayfs;
where the container cannot boot (e.g. inside an unprivileged container) it
skips, saying why.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.fake_nvml.fixture import build_fake_nvml
from tests.installer.built_packages import SKIP_DIRS, BuiltPackages, at_version, deb_field
from tests.installer.tools import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# The checkout, bound read-only into the container at a fixed path: the container's
# systemd mounts a fresh /tmp, which would hide a checkout (or a CI clone) under /tmp.
CHECKOUT_IN_CONTAINER = "/gf-checkout"
E2E_SCRIPT = f"{CHECKOUT_IN_CONTAINER}/tests/installer/container_e2e.sh"
BOOT_TIMEOUT_S = 840
EXPECTED = {
    "install_rc": "0", "active": "active", "enabled": "enabled", "answering": "yes",
    "user": "gpufleet", "cap_eff": "0000000000000000", "no_new_privs": "1", "seccomp": "2",
    "state_dir": "gpufleet 700", "journal": "yes", "config_mode": "root:gpufleet 640",
    "nvml_answering": "yes", "gpus": "2", "process_user": "root", "metrics": "yes",
    "polkit_rule": "root 644", "launcher": "systemd", "wl_exit": "WORKLOAD_STATE_FAILED:3",
    "wl_user": "gfalice", "wl_groups": "yes", "wl_own_cgroup": "yes", "wl_home": "secret-note",
    "wl_state_read": "denied", "wl_state_write": "denied", "wl_cwd": "yes",
    "wl_env_exact": "yes", "wl_argv_exact": "yes", "wl_env_file_gone": "yes",
    "wl_unit_released": "yes", "wl_main_in_unit": "yes", "wl_uid": "yes",
    "wl_secret_in_env": "yes", "wl_secret_in_argv": "no", "wl_survives_restart": "yes",
    "wl_readopted": "yes", "wl_cancelled": "WORKLOAD_STATE_CANCELLED", "wl_cgroup_emptied": "yes",
    "wl_root_refused": "FAILED_PRECONDITION", "wl_daemon_account_refused": "FAILED_PRECONDITION",
    "other_unit_refused": "yes", "victim_active": "active", "answering_after_workloads": "yes",
    "child_survives_restart": "yes", "upgrade_rc": "0", "config_kept": "1",
    "active_after_upgrade": "active", "uninstall_rc": "0", "venv_removed": "yes",
    "config_left": "yes", "purge_with_workload_rc": "1", "purge_rc": "0",
    "user_removed": "yes", "state_removed": "yes",
    "deb_install_rc": "0", "deb_active": "active", "deb_enabled": "enabled",
    "deb_answering": "yes", "deb_user": "gpufleet", "deb_cap_eff": "0000000000000000",
    "deb_no_new_privs": "1", "deb_seccomp": "2", "deb_state_dir": "gpufleet 700",
    "deb_config_mode": "root:gpufleet 640", "deb_polkit_rule": "root 644",
    "deb_version": "0.1.0+upgrade1", "deb_upgrade_rc": "0", "deb_restarted": "yes",
    "deb_answering_after_upgrade": "yes", "deb_config_kept": "1", "deb_records_kept": "yes",
    "deb_remove_rc": "0", "deb_stopped": "yes", "deb_venv_removed": "yes",
    "deb_config_left": "yes", "deb_state_left": "yes", "deb_user_left": "yes",
    "deb_purge_rc": "0", "deb_config_removed": "yes", "deb_state_removed": "yes",
    "deb_user_removed": "yes", "deb_opt_removed": "yes", "finished": "yes",
}  # fmt: skip


def require_container_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: the unit is not tried under a real systemd")
    if shutil.which("systemd-nspawn") is None or shutil.which("unshare") is None:
        pytest.skip(
            "!!! systemd-nspawn NOT INSTALLED: the unit is NOT STARTED under a real systemd "
            "(optional: apt-get install systemd-container) !!!"
        )
    if "overlay" not in Path("/proc/filesystems").read_text():
        pytest.skip("no overlayfs: the unit is not tried under a real systemd")


def offline_wheels(directory: Path, staging: Path) -> None:
    """This project and its dependencies as wheels, plus the build backend, for PIP_NO_INDEX."""
    shutil.copytree(ROOT, staging, ignore=SKIP_DIRS)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "-w", str(directory), str(staging)], check=True, timeout=600)
    subprocess.run([*pip, "download", "-d", str(directory), "setuptools>=77", "wheel"],
                   check=True, timeout=600)  # fmt: skip


def debian_packages(built: Path, directory: Path) -> None:
    """gpufleet-daemon as build-deb.sh makes it (`built`: conftest's, once), and the next version.

    The next one is the same package repacked with a later version: what an upgrade
    runs (prerm upgrade, unpack, postinst configure OLD) does not depend on its contents.
    """
    directory.mkdir()
    shutil.copy2(built, directory / "first.deb")
    version = deb_field(built, "Version")
    at_version(built, f"{version}+upgrade1", directory / "next").rename(directory / "next.deb")


def unit_directory(directory: Path) -> Path:
    """/etc/systemd/system of the container: boot to multi-user, run the script."""
    wants = directory / "multi-user.target.wants"
    wants.mkdir(parents=True)
    (directory / "gf-e2e.service").write_text(
        "[Unit]\nDescription=gpufleet installer end to end\nAfter=basic.target\n"
        f"[Service]\nType=oneshot\nExecStart=/bin/bash {E2E_SCRIPT}\nTimeoutStartSec=780\n"
    )
    (wants / "gf-e2e.service").symlink_to("../gf-e2e.service")
    (directory / "default.target").symlink_to("/usr/lib/systemd/system/multi-user.target")
    return directory


def boot(shared: Path, units: Path, scratch: Path) -> str:
    """Boot the container until the script powers it off; nspawn's own output."""
    script = (
        'set -e; mount -t tmpfs tmpfs "$1"; mkdir "$1/upper" "$1/work" "$1/root"; '
        'mount -t overlay overlay -o lowerdir=/,upperdir="$1/upper",workdir="$1/work" "$1/root"; '
        'exec systemd-nspawn -D "$1/root" --register=no --keep-unit --link-journal=no '
        '--private-network --console=pipe --uuid="$2" --machine=gpufleet-e2e '
        '--bind="$3":/etc/systemd/system --bind="$4":/gf --bind-ro="$5":"$6" -b'
    )
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
               str(scratch), uuid.uuid4().hex, str(units), str(shared), str(ROOT),
               CHECKOUT_IN_CONTAINER]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        return proc.communicate(timeout=BOOT_TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0] + f"\n(killed after {BOOT_TIMEOUT_S} s)"


def results(shared: Path) -> dict[str, str]:
    path = shared / "results"
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split(" ", 2)[1:] for line in lines if line.startswith("RESULT "))


def test_install_start_upgrade_uninstall_under_systemd(
    tmp_path: Path, built_packages: BuiltPackages
) -> None:
    require_container_tools()
    assert built_packages.deb is not None, built_packages.deb_missing  # unshare is here
    shared = tmp_path / "gf"
    shared.mkdir()
    (shared / "checkout").write_text(CHECKOUT_IN_CONTAINER)
    offline_wheels(shared / "wheels", tmp_path / "staging")
    build_fake_nvml(shared / "fakenvml")
    debian_packages(built_packages.deb, shared / "deb")
    (tmp_path / "overlay").mkdir()
    output = boot(shared, unit_directory(tmp_path / "units"), tmp_path / "overlay")
    found = results(shared)
    log = (shared / "log").read_text() if (shared / "log").exists() else ""
    if found.get("booted") != "yes":
        pytest.skip(f"the container did not boot here; nspawn said:\n{output[-3000:]}")
    wrong = {key: (found.get(key), value) for key, value in EXPECTED.items()
             if found.get(key) != value}  # fmt: skip
    assert not wrong, f"(got, expected): {wrong}\ncontainer log, last lines:\n{log[-6000:]}"
    assert float(found["exposure"]) <= 3.0
    assert float(found["deb_exposure"]) <= 3.0

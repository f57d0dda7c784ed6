"""install.sh, uninstall.sh and install-console.sh into throwaway roots.

Each install makes a venv and pip-installs this checkout into it: tens of
seconds, and the network unless pip's cache (~/.cache/pip, reused across runs)
or a local index has the dependencies. Hence `slow`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.installer.test_systemd_unit import verify, verify_root
from tests.installer.tools import DAEMON_TOML, INSTALLER, UNIT, require_tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

INSTALLED_UNIT = Path("etc/systemd/system/gpufleet-daemon.service")
VENV = Path("opt/gpufleet/venv")
CONFIG = Path("etc/gpufleet/daemon.toml")
POLKIT_RULE = Path("etc/polkit-1/rules.d/50-gpufleet-workloads.rules")


def run_script(script: str, *args: str) -> str:
    """Run an installer script; its output, or a failure that shows it."""
    # The scripts make their own venvs: nothing of the test's venv may leak in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}  # fmt: skip
    result = subprocess.run(
        [str(INSTALLER / script), *args], env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script} {' '.join(args)} failed:\n{output}"
    return output


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def server_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway root with the daemon installed by `install.sh --prefix`."""
    root = tmp_path_factory.mktemp("server-root")
    output = run_script("install.sh", "--prefix", str(root))
    assert "not creating user gpufleet" in output and "not starting the daemon" in output
    return root


def test_install_creates_a_working_venv_the_config_and_the_unit(server_root: Path) -> None:
    gpufleet = server_root / VENV / "bin" / "gpufleet"
    result = subprocess.run([gpufleet, "daemon", "--help"], capture_output=True, text=True,
                            timeout=60, check=True)  # fmt: skip
    assert "--config FILE" in result.stdout
    assert (server_root / CONFIG).read_text() == DAEMON_TOML.read_text()
    # The terminal commands need the console extra, which a server does not get:
    # they say so, and nothing else of `gpufleet` breaks for it.
    status = subprocess.run([gpufleet, "status", "--node", "127.0.0.1:1"], capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert status.returncode == 2, status.stderr
    assert "needs the console extra: pip install 'gpufleet[console]'" in status.stderr
    assert (server_root / INSTALLED_UNIT).read_text() == UNIT.read_text()
    assert (server_root / POLKIT_RULE).read_bytes() == (
        INSTALLER / "polkit" / POLKIT_RULE.name
    ).read_bytes()
    pip = [str(server_root / VENV / "bin" / "python"), "-m", "pip", "list"]
    pip_list = subprocess.run(pip, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "gpufleet" in pip_list and "PySide6" not in pip_list  # the daemon only: no Qt


def test_installed_unit_verifies_against_the_installed_venv(server_root: Path) -> None:
    """verify --root resolves ExecStart= inside the root: the installed gpufleet itself."""
    require_tool("systemd-analyze", "systemd", "the installed unit")
    try:
        result = verify(verify_root(server_root, server_root / INSTALLED_UNIT), INSTALLED_UNIT.name)
    finally:
        shutil.rmtree(server_root / "usr")  # systemd's own units, copied in for verify
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_running_it_again_upgrades_and_keeps_an_edited_config(server_root: Path) -> None:
    edited = (server_root / CONFIG).read_text() + 'metrics_hostname_label = "hostname"\n'
    (server_root / CONFIG).write_text(edited)
    output = run_script("install.sh", "--prefix", str(server_root))
    assert "upgrading the venv" in output and "keeping the existing" in output
    assert (server_root / CONFIG).read_text() == edited


def test_dry_run_changes_nothing(server_root: Path, tmp_path: Path) -> None:
    before = tree(server_root)
    run_script("install.sh", "--prefix", str(server_root), "--dry-run")
    run_script("uninstall.sh", "--prefix", str(server_root), "--purge", "--dry-run")
    assert tree(server_root) == before
    output = run_script("install.sh", "--prefix", str(tmp_path / "new"), "--dry-run")
    assert "would run:" in output and not (tmp_path / "new").exists()


def test_uninstall_keeps_config_and_state_unless_purged(server_root: Path) -> None:
    (server_root / "var/lib/gpufleet").mkdir(parents=True)
    (server_root / "var/lib/gpufleet/journal.sqlite3").write_bytes(b"")
    run_script("uninstall.sh", "--prefix", str(server_root))
    assert not (server_root / "opt/gpufleet").exists()
    assert not (server_root / INSTALLED_UNIT).exists()
    assert not (server_root / POLKIT_RULE).exists()
    assert (server_root / CONFIG).exists()
    assert (server_root / "var/lib/gpufleet/journal.sqlite3").exists()
    run_script("uninstall.sh", "--prefix", str(server_root), "--purge")
    assert not (server_root / "etc/gpufleet").exists()
    assert not (server_root / "var/lib/gpufleet").exists()


def test_console_install_into_a_throwaway_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_script("install-console.sh", "--prefix", str(home), "--node", "gpu-node-01:50051")
    gpufleet = home / ".local/share/gpufleet/venv/bin/gpufleet"
    result = subprocess.run([home / ".local/bin/gpufleet", "console", "--help"],
                            capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert "--node HOST:PORT" in result.stdout
    launcher = (home / ".local/share/applications/gpufleet-console.desktop").read_text()
    assert f'Exec="{gpufleet}" console' in launcher.splitlines()
    assert (home / ".local/share/icons/hicolor/scalable/apps/gpufleet-console.svg").exists()
    settings = home / ".config/gpufleet/console.toml"
    assert '"gpu-node-01:50051"' in settings.read_text()
    settings.write_text('nodes = ["mine:50051"]\n')
    output = run_script("install-console.sh", "--prefix", str(home), "--node", "other:1")
    assert "upgrading the venv" in output
    assert settings.read_text() == 'nodes = ["mine:50051"]\n'

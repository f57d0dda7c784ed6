"""The daemon's systemd unit: `systemd-analyze verify` clean, security exposure <= 3.0.

systemd need not run: `verify --root=DIR` loads the unit from a throwaway root
that holds systemd's own units (the targets it depends on) and a stand-in for
the ExecStart= program, which verify requires to exist and be executable.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.installer.seccomp_sandbox import unit_settings
from tests.installer.tools import UNIT, require_tool

MAX_EXPOSURE = 3.0
SYSTEM_UNIT_DIRS = (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system"))


def systemd_analyze() -> str:
    return require_tool("systemd-analyze", "systemd", "the systemd unit")


def exec_start_program(unit: Path) -> Path:
    return Path(unit_settings(unit)["ExecStart"][-1].split()[0])


def verify_root(root: Path, unit: Path) -> Path:
    """A root with systemd's units, `unit` in /etc/systemd/system, and its program."""
    system_units = next((d for d in SYSTEM_UNIT_DIRS if (d / "sysinit.target").exists()), None)
    if system_units is None:
        pytest.skip("!!! systemd's own units are missing: the unit is NOT VERIFIED !!!")
    shutil.copytree(system_units, root / "usr/lib/systemd/system", symlinks=True)
    installed = root / "etc/systemd/system" / unit.name
    if installed != unit:
        installed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(unit, installed)
    for program in (exec_start_program(unit), *exec_reload_programs(unit)):
        stand_in = root / program.relative_to("/")
        if not stand_in.exists():
            stand_in.parent.mkdir(parents=True, exist_ok=True)
            stand_in.write_text("#!/bin/sh\n")
            stand_in.chmod(0o755)
    return root


def exec_reload_programs(unit: Path) -> list[Path]:
    """ExecReload='s programs (/bin/kill), which verify also wants to find in the root."""
    return [Path(line.split()[0]) for line in unit_settings(unit).get("ExecReload", [])]


def verify(root: Path, unit_name: str) -> subprocess.CompletedProcess[str]:
    command = [systemd_analyze(), "verify", "--man=no", f"--root={root}", unit_name]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_unit_verifies_without_a_warning(tmp_path: Path) -> None:
    result = verify(verify_root(tmp_path, UNIT), UNIT.name)
    # verify exits 0 on unknown keys and bad values, which it only prints.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_verify_catches_a_bad_setting(tmp_path: Path) -> None:
    """The check above can fail: a misspelt value is reported."""
    broken = tmp_path / UNIT.name
    broken.write_text(UNIT.read_text().replace("KillMode=process", "KillMode=procss"))
    result = verify(verify_root(tmp_path / "root", broken), UNIT.name)
    assert "procss" in result.stdout + result.stderr


def test_security_exposure_is_at_most_3() -> None:
    command = [systemd_analyze(), "security", "--offline=yes", str(UNIT)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout)
    assert match, f"no exposure level in:\n{result.stdout}\n{result.stderr}"
    exposure = float(match.group(1))
    assert exposure <= MAX_EXPOSURE, result.stdout


def test_unit_runs_the_installed_daemon_as_designed() -> None:
    """The settings docs/operations.md relies on, against accidental edits."""
    settings = {key: values[-1] for key, values in unit_settings(UNIT).items()}
    assert exec_start_program(UNIT) == Path("/opt/gpufleet/venv/bin/gpufleet")
    assert "--config /etc/gpufleet/daemon.toml" in settings["ExecStart"]
    expected = {
        "User": "gpufleet", "Group": "gpufleet", "StateDirectory": "gpufleet",
        "ConfigurationDirectory": "gpufleet", "KillMode": "process", "Delegate": "yes",
        "Restart": "on-failure", "RestartPreventExitStatus": "2", "CapabilityBoundingSet": "",
        "DevicePolicy": "closed", "DeviceAllow": "char-nvidia* rw",
        "MemoryDenyWriteExecute": "yes", "ProtectProc": "default",
    }  # fmt: skip
    assert {key: settings.get(key) for key in expected} == expected

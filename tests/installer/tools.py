"""Paths of the installer's files, and the system tools its tests need."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = ROOT / "installer"
UNIT = INSTALLER / "systemd" / "gpufleet-daemon.service"
DESKTOP_ENTRY = INSTALLER / "desktop" / "gpufleet-console.desktop"
DAEMON_TOML = INSTALLER / "config" / "daemon.toml"
CONSOLE_TOML = INSTALLER / "config" / "console.toml"


def require_tool(tool: str, package: str, unverified: str) -> str:
    """The tool's path; without it, skip loudly: something stays unverified."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(
            f"!!! {tool} NOT INSTALLED: {unverified} is NOT VERIFIED; "
            f"the project's test command installs package {package} !!!"
        )
    return path

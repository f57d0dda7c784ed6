"""Servers and tools the tests run for real, from Debian packages.

installer/dev-setup.sh unpacks them into .tools/root (no system service is
installed or started); a system-wide install works too.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

UNPACKED = Path(__file__).resolve().parents[1] / ".tools" / "root" / "usr" / "bin"


def tool_path(name: str) -> str | None:
    unpacked = UNPACKED / name
    return str(unpacked) if unpacked.exists() else shutil.which(name)


def require_tool(name: str, package: str, what: str) -> str:
    """The tool's path, or skip the test loudly."""
    path = tool_path(name)
    if path is None:
        pytest.skip(
            f"!!! {name} NOT INSTALLED: {what} NOT TESTED. The project's test command "
            f"unpacks Debian's {package} into .tools/; elsewhere install it by hand !!!"
        )
    return path


def free_port() -> int:
    """A loopback port nothing listens on right now (for servers that need one up front)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

"""One version: pyproject's, node_daemon.__version__, the installed metadata and `--version`.

The daemon reports node_daemon.__version__ (Inventory.daemon_version, /metrics,
the console's inventory drift); a package is named after pyproject's. A release
that bumps one and not the other would show operators a version it is not.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from node_daemon import __version__

PYPROJECT = Path(__file__).parent.parent / "pyproject.toml"


def test_pyproject_and_the_package_say_the_same_version() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    if "version" in project.get("dynamic", ()):
        # Read from the package itself: then it is one source by construction.
        attr = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["dynamic"]["version"]
        assert attr == {"attr": "node_daemon.__version__"}
    else:
        assert project["version"] == __version__


def test_the_installed_distribution_has_that_version() -> None:
    try:
        installed = importlib.metadata.version("gpufleet")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("gpufleet is not installed (run from a bare checkout)")
    assert installed == __version__, "reinstall: the installed metadata is of another version"


def test_gpufleet_version_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "node_daemon", "--version"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, f"gpufleet {__version__}")

"""Fixtures for the installer's tests, shared with the daemon's."""

from __future__ import annotations

import pytest

from tests.fake_nvml.fixture import sleeper  # noqa: F401
from tests.installer.built_packages import BuiltPackages, build


@pytest.fixture(scope="session")
def built_packages(tmp_path_factory: pytest.TempPathFactory) -> BuiltPackages:
    """This tree's sdist, wheel and Debian package, built once (built_packages.py)."""
    return build(tmp_path_factory.mktemp("packages"))

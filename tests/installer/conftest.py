"""Fixtures for the installer's tests, shared with the daemon's."""

from tests.fake_nvml.fixture import sleeper  # noqa: F401

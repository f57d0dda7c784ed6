"""Fixtures for the daemon's tests."""

from tests.fake_nvml.fixture import fake_nvml, fake_nvml_lib, unloadable_nvml_dir  # noqa: F401

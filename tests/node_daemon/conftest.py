"""Fixtures for the daemon's tests.

The fake NVML's and the Alertmanager harness's fixtures are imported here once, so every
test module below uses them by name instead of re-binding them itself.
"""

from tests.fake_nvml.fixture import (  # noqa: F401
    fake_nvml,
    fake_nvml_lib,
    sleeper,
    unloadable_nvml_dir,
)
from tests.node_daemon.alertmanager_harness import (  # noqa: F401
    alertmanager,
    am_process,
    make_pusher,
    recorder,
)

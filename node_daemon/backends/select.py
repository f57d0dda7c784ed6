"""Choosing and building the backend named in the configuration."""

from __future__ import annotations

import logging

from node_daemon.backends.base import BackendUnavailable, GpuBackend
from node_daemon.backends.simulated import SimulatedBackend, load_scenario
from node_daemon.config import DaemonConfig

log = logging.getLogger(__name__)


def simulated_backend(config: DaemonConfig) -> SimulatedBackend:
    scenario = load_scenario(config.scenario) if config.scenario else None
    return SimulatedBackend(
        gpu_count=config.gpus,
        seed=config.seed,
        model=config.model,
        scenario=scenario,
        step_s=config.sample_interval_s * config.sim_speed,
    )


def nvml_backend() -> GpuBackend:
    from node_daemon.backends.nvml import NvmlBackend

    return NvmlBackend()


def build_backend(config: DaemonConfig) -> GpuBackend:
    """The configured backend; `auto` takes NVML when it loads, else the simulator."""
    if config.backend == "simulated":
        return simulated_backend(config)
    if config.backend == "nvml":
        # A missing driver is not fatal here: the daemon starts degraded and retries.
        return nvml_backend()
    backend = nvml_backend()
    try:
        backend.open()
    except BackendUnavailable as exc:
        log.warning("NVML not available (%s); using the simulated backend", exc)
        return simulated_backend(config)
    return backend

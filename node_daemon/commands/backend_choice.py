"""Choosing and building the backend named in the configuration.

Simulated GPUs are served only when asked for by name (`backend = "simulated"`):
`auto`, the default, is the server's real GPUs. A GPU server whose driver does
not load must say so (degraded, with the reason) rather than show invented GPUs
on every dashboard.
"""

from __future__ import annotations

import logging

from node_daemon.backends.base import GpuBackend
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
    """The configured backend; `auto` is NVML (the only real backend so far).

    NVML is not opened here: a missing driver is not fatal, the sampler opens
    the backend, reports the daemon degraded with the reason and retries.
    """
    if config.backend == "simulated":
        log.info("backend simulated: serving %d simulated GPUs", config.gpus)
        return simulated_backend(config)
    if config.backend == "auto":
        log.info("backend auto: this server's GPUs through NVML")
    return nvml_backend()

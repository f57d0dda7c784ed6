"""The simulated backend: a deterministic model of a GPU server for demos and tests."""

from __future__ import annotations

from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioError, load_scenario

__all__ = ["Scenario", "ScenarioError", "SimulatedBackend", "load_scenario"]

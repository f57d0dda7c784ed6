"""What a person asks of a node: the process to kill, the workload to submit. Plain values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from console.fleet.process_row import ProcessRow


@dataclass(frozen=True)
class KillTarget:
    """One process on one GPU, as the console saw it: what a kill names."""

    target: str
    node_name: str
    gpu: int
    process: ProcessRow

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass(frozen=True)
class WorkloadSpec:
    """What the submit dialog asks for."""

    name: str
    argv: tuple[str, ...]
    owner: str
    gpu_count: int = 1
    min_free_memory_bytes: int = 0
    auto_place: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0  # higher runs first
    time_limit_s: int = 0  # walltime; 0: the node's default

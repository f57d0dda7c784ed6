"""The processes a simulated GPU shows: the simulator's own, and the daemon's workloads."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from node_daemon.backends.readings import ProcessReading
from node_daemon.backends.simulated.memory import Flat, MemoryPattern

_USERS = ("alice", "bob", "carol", "dmitri", "erin", "farid")
_COMMANDS = (
    "python train.py --model llama-8b",
    "torchrun --nproc_per_node 8 finetune.py",
    "python -m vllm.entrypoints.api_server",
    "python eval.py --suite mmlu",
    "jupyter-kernel",
)


@dataclass
class SimProcess:
    pid: int
    user: str
    command: str
    pattern: MemoryPattern  # its memory over time
    started_unix_ms: int
    started_s: float = 0.0  # simulated seconds, for the pattern
    slurm_job_id: str | None = None
    container_id: str | None = None
    workload: bool = False  # a real process the daemon launched, shown here
    memory_bytes: float = 0.0
    # Its host side (a simulator's own process; a workload's is read from /proc): the
    # cores its input pipeline keeps busy at full load, and its resident memory.
    cpu_cores: float = 0.0
    host_memory_bytes: int = 0

    def __post_init__(self) -> None:
        self.memory_bytes = self.pattern.bytes_at(0.0)
        # From the pid, not the GPU's generator: the model's random stream stays as it was.
        host = random.Random(self.pid)
        self.cpu_cores = host.uniform(0.8, 3.5)
        self.host_memory_bytes = int(host.uniform(1.5, 24.0) * 2**30)

    def advance(self, now_s: float) -> None:
        self.memory_bytes = self.pattern.bytes_at(now_s - self.started_s)

    def reading(self, sm_util_pct: float) -> ProcessReading:
        """The process now, with its share `sm_util_pct` of the GPU's SM time.

        Its CPU use follows its GPU load (a data loader feeding a busy GPU);
        a workload's CPU and host memory are left to the backend's /proc reading.
        """
        load = sm_util_pct / 100.0
        own = not self.workload
        return ProcessReading(
            pid=self.pid,
            gpu_memory_bytes=int(self.memory_bytes),
            start_time_unix_ms=self.started_unix_ms,
            user=self.user,
            command=self.command,
            slurm_job_id=self.slurm_job_id,
            container_id=self.container_id,
            sm_util_pct=round(sm_util_pct, 1),
            cpu_pct=round(self.cpu_cores * 100.0 * (0.3 + 0.7 * load), 1) if own else None,
            host_memory_bytes=self.host_memory_bytes if own else None,
        )


class ProcessMaker:
    """Makes the simulator's own processes for one GPU, deterministically from its seed."""

    def __init__(self, index: int, seed: int, rng: random.Random, start_unix_ms: int) -> None:
        self._index, self._seed, self._rng = index, seed, rng
        self._start_unix_ms = start_unix_ms

    def make(
        self,
        running: int,
        total_bytes: int,
        now_s: float,
        pattern: MemoryPattern | None = None,
        command: str | None = None,
    ) -> SimProcess:
        """A process beside `running` others; its memory follows `pattern`, else a random
        share of `total_bytes` held flat."""
        pid = 100_000 + self._index * 1000 + running + self._rng.randrange(900)
        held = Flat(self._rng.uniform(0.2, 0.6) * total_bytes)
        return SimProcess(
            pid=pid,
            user=self._rng.choice(_USERS),
            command=command or self._rng.choice(_COMMANDS),
            pattern=pattern or held,
            started_unix_ms=self._start_unix_ms + int(now_s * 1000),
            started_s=now_s,
            slurm_job_id=self._slurm_job(),
            container_id=self._container(),
        )

    # Even seeds play Slurm nodes (one job per half node), odd ones container hosts.
    def _slurm_job(self) -> str | None:
        return str(41000 + self._seed * 10 + self._index // 4) if self._seed % 2 == 0 else None

    def _container(self) -> str | None:
        if self._seed % 2 == 0:
            return None
        return hashlib.sha256(f"{self._seed}-{self._index}".encode()).hexdigest()


def workload_process(
    pid: int, user: str, command: str, memory_bytes: int, started_ms: int
) -> SimProcess:
    """A real workload process 'running' on a simulated GPU: it holds memory, drives load."""
    return SimProcess(pid, user, command, Flat(float(memory_bytes)), started_ms, workload=True)

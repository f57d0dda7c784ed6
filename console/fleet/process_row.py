"""A process on a GPU as the console holds it: plain data, no Qt.

Its own module, beneath updates.py (a GPU's snapshot lists them) and health.py
(a GPU's condition names them), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessRow:
    pid: int
    user: str | None
    command: str | None
    gpu_memory_bytes: int | None
    start_time_unix_ms: int | None
    container_id: str | None
    slurm_job_id: str | None
    # nvitop's columns (None: not reported): the process's share of the GPU's SM
    # time and its CPU use over the daemon's last sampling interval (100 = one
    # core), and its resident host memory.
    sm_util_pct: float | None = None
    cpu_pct: float | None = None
    host_memory_bytes: int | None = None

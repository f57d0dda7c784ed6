"""Jobs from Slurm's accounting as the usage store keeps them: one row per (cluster, job, step).

A job read again (a second export that overlaps the first, the next poll while it
runs, its end) replaces its row, so however often it is seen it is counted once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, fields

from node_daemon.usage.sacct import SacctJob, split_by_utc_day


@dataclass(frozen=True)
class AccountedJob:
    """A job's GPU allocation on this node. `end_unix` None: running when last seen, billed
    up to `seen_unix` (a daemon that stops polling never bills a job on and on)."""

    cluster: str
    job_id: str
    step: str  # "" for the job's allocation (steps are inside it and never billed)
    user: str
    account: str
    start_unix: float
    end_unix: float | None
    seen_unix: float
    gpus: float  # GPUs this node's store bills: the job's, or its share on this node
    gpu_type: str
    state: str
    source: str  # "sacct poll" or the imported file's path

    @property
    def billed_end_unix(self) -> float:
        return self.end_unix if self.end_unix is not None else self.seen_unix

    def day_gpu_seconds(self) -> Iterator[tuple[str, float]]:
        """(UTC day, GPU-seconds) of the allocation, split at midnight."""
        start = dt.datetime.fromtimestamp(self.start_unix, dt.UTC)
        end = dt.datetime.fromtimestamp(max(self.billed_end_unix, self.start_unix), dt.UTC)
        for day, seconds in split_by_utc_day(start, end):
            yield day, seconds * self.gpus


JOB_COLUMNS = tuple(f.name for f in fields(AccountedJob))
UPSERT_JOB = (
    f"INSERT OR REPLACE INTO slurm_jobs ({', '.join(JOB_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(JOB_COLUMNS))})"
)
# Overlapping [?1, ?2): started before its end, and ended (or last seen) after its start.
SELECT_JOBS = (
    f"SELECT {', '.join(JOB_COLUMNS)} FROM slurm_jobs WHERE start_unix < ?2 "
    "AND (?1 IS NULL OR COALESCE(end_unix, seen_unix) > ?1) ORDER BY start_unix"
)


def job_values(job: AccountedJob) -> tuple[object, ...]:
    return tuple(getattr(job, name) for name in JOB_COLUMNS)


def from_sacct(job: SacctJob, seen_unix: float, source: str, per_node: bool) -> AccountedJob:
    """`per_node`: bill this node's share of a multi-node job (the poller asks sacct for
    this node's jobs); otherwise the whole job (an imported file goes to one store)."""
    return AccountedJob(
        cluster=job.cluster,
        job_id=job.job_id,
        step="",
        user=job.user,
        account=job.account,
        start_unix=job.start.timestamp(),
        end_unix=job.end.timestamp() if job.end is not None else None,
        seen_unix=seen_unix,
        gpus=job.gpus / job.nodes if per_node else float(job.gpus),
        gpu_type=job.gpu_type,
        state=job.state,
        source=source,
    )

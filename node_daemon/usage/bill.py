"""The bill: the meter's usage and Slurm's accounted jobs as pieces, each with its price.

The meter sees what processes did on this node's GPUs (occupancy, utilisation,
energy); Slurm's accounting says which GPUs a job held and which account pays.
Both see the same work, so they are merged per (day, user), never added: the
allocated GPU time is the larger of the two (a job that held GPUs it never used
still held them), and it is split over the user's accounts by their jobs' GPU
time; what the meter saw beyond the jobs goes to no account. Busy time, memory
and energy are the meter's, split in the same shares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from node_daemon.usage.accounted import AccountedJob
from node_daemon.usage.amounts import UsageAmounts
from node_daemon.usage.settings import Prices

HOUR_S = 3600.0
KWH_J = 3.6e6
NO_ACCOUNT = ""


@dataclass(frozen=True)
class Piece:
    """A part of one user's usage on one day, charged to one account, on one GPU model."""

    day: str
    user: str
    account: str  # "" where no Slurm account is known
    model: str
    amounts: UsageAmounts


@dataclass(frozen=True)
class Cost:
    gpu: float
    energy: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.gpu + other.gpu, self.energy + other.energy)


def cost_of(piece: Piece, prices: Prices) -> Cost:
    """Busy GPU-hours at busy_weight, the rest of the allocated hours at allocated_weight."""
    used = piece.amounts
    busy_h = min(used.busy_gpu_seconds, used.gpu_seconds) / HOUR_S
    idle_h = used.gpu_seconds / HOUR_S - busy_h
    rate = prices.per_gpu_hour(piece.model)
    gpu = rate * (prices.busy_weight * busy_h + prices.allocated_weight * idle_h)
    return Cost(gpu, prices.kwh * used.energy_joules / KWH_J)


JobTime = dict[tuple[str, str], dict[tuple[str, str], float]]


def job_time(
    jobs: Iterable[AccountedJob], wanted: Callable[[str], bool] | None, node_model: str
) -> JobTime:
    """GPU-seconds per (day, user), per (account, model), of the days `wanted` says yes to
    (None: all). A test of the day, not a list of days: a period from the first day there
    is to 9999-12-31 would be millions of them."""
    out: JobTime = {}
    for job in jobs:
        model = job.gpu_type or node_model
        for day, seconds in job.day_gpu_seconds():
            if wanted is None or wanted(day):
                by_account = out.setdefault((day, job.user), {})
                key = (job.account, model)
                by_account[key] = by_account.get(key, 0.0) + seconds
    return out


def pieces(
    metered: Iterable[tuple[str, str, UsageAmounts]], jobs: JobTime, node_model: str
) -> list[Piece]:
    """Every (day, user) of either source as its pieces (see the module's docstring)."""
    meter = {(day, user): used for day, user, used in metered}
    out: list[Piece] = []
    for day, user in meter.keys() | jobs.keys():
        out += _split(day, user, meter.get((day, user), UsageAmounts()),
                      jobs.get((day, user), {}), node_model)  # fmt: skip
    return out


def _split(
    day: str, user: str, used: UsageAmounts, jobs: dict[tuple[str, str], float], node_model: str
) -> list[Piece]:
    accounted = sum(jobs.values())
    if accounted <= 0:
        return [Piece(day, user, NO_ACCOUNT, node_model, used)]
    whole = max(used.gpu_seconds, accounted)
    shares = [(account, model, seconds) for (account, model), seconds in jobs.items()]
    if whole > accounted:
        shares.append((NO_ACCOUNT, node_model, whole - accounted))
    values = used.values()
    return [
        Piece(
            day, user, account, model, UsageAmounts(seconds, *_scaled(values[1:], seconds / whole))
        )
        for account, model, seconds in shares
    ]


def _scaled(values: tuple[float, ...], share: float) -> list[float]:
    return [v * share for v in values]

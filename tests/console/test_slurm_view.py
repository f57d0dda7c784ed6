"""The hover verdict of a Slurm job over a node, from Slurm's view (no Qt, no Slurm)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.fleet.slurm_model import SlurmJob, SlurmNode
from console.fleet.slurm_view import (
    SlurmView,
    can_reserve_in_slurm,
    can_steer,
    expand_hostlist,
    job_words,
    reservation_name,
    slurm_name,
)

WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def job(state: str = "PENDING", gpus: int | None = 2, partition: str = "gpu") -> SlurmJob:
    return SlurmJob(42, "train", "ada", "ml", partition, state, "BeginTime", gpus, None, 10, WHEN)


def node(state: str = "idle", used: int = 0, flags: tuple[str, ...] = (), reason: str = "",
         partitions: tuple[str, ...] = ("gpu",)) -> SlurmNode:  # fmt: skip
    return SlurmNode("gpu01", state, flags, reason, {"gpu": 8}, {"gpu": used}, partitions)


def test_a_pending_job_over_a_free_node_is_steered_there() -> None:
    verdict = can_steer(job(), 42, node(used=2), "gpu01")
    assert verdict.ok and verdict.reason == "Steer Slurm job 42 (train) to gpu01: 6 of 8 GPUs free"


def test_a_job_asking_more_than_is_free_may_go_but_waits() -> None:
    verdict = can_steer(job(gpus=4), 42, node(state="mixed", used=6), "gpu01")
    assert verdict.ok and verdict.reason.endswith("it waits there, 2 of 8 GPUs free")


@pytest.mark.parametrize(
    ("the_job", "the_node", "said"),
    [
        (None, node(), "Slurm no longer lists job 42"),
        (job(state="RUNNING"), node(), "job 42 is RUNNING: only a pending job can be steered"),
        (job(), None, "Slurm has no node 'gpu01' (nodes map by short host name)"),
        (job(), node(state="idle", flags=("DRAIN",), reason="fan"), "gpu01 is idle in Slurm: fan"),
        (job(), node(state="down", reason="not responding"), "down in Slurm: not responding"),
        (job(partition="cpu"), node(), "gpu01 is not in partition cpu (it is in gpu)"),
        (job(gpus=9), node(), "job 42 asks 9 GPUs; gpu01 has 8"),
    ],
)
def test_refusals_say_why_in_slurms_terms(
    the_job: SlurmJob | None, the_node: SlurmNode | None, said: str
) -> None:
    verdict = can_steer(the_job, 42, the_node, "gpu01")
    assert not verdict.ok and verdict.reason.endswith(said)


def test_a_job_of_several_partitions_goes_to_a_node_of_any_of_them() -> None:
    assert can_steer(job(partition="cpu,gpu"), 42, node(), "gpu01").ok


def test_names_and_the_queue() -> None:
    assert slurm_name("gpu01.dc1.example.com") == "gpu01" and slurm_name("gpu01") == "gpu01"
    view = SlurmView((job(), job(state="COMPLETED"), job(state="RUNNING")))
    assert [j.state for j in view.queue()] == ["PENDING", "RUNNING"]
    assert job_words(view.job(42), 42) == "Slurm job 42 (ada, train)"
    assert job_words(None, 7) == "Slurm job 7"


def test_a_holder_reserves_slurm_nodes_as_user_or_team_account() -> None:
    view = SlurmView(nodes={"gpu01": node(), "gpu02": node(state="down")})
    ask, verdict = can_reserve_in_slurm("team:ml", view, {"a:1": "gpu01"})
    assert verdict.ok and verdict.reason == "Reserve gpu01 in Slurm for account ml…"
    assert ask is not None and (ask.users, ask.accounts, ask.targets) == ((), ("ml",), ("a:1",))
    ask, verdict = can_reserve_in_slurm("ada", view, {"a:1": "gpu01"})
    assert ask is not None and ask.users == ("ada",) and ask.accounts == ()
    assert can_reserve_in_slurm("ada", view, {"b:1": "gpu02"})[1].reason == "gpu02 down in Slurm"
    assert not can_reserve_in_slurm("ada", view, {"c:1": "gpu07"})[1].ok


@pytest.mark.parametrize(
    ("hosts", "names"),
    [
        ("gpu[01-03]", ("gpu01", "gpu02", "gpu03")),
        ("gpu[01,04-05],cpu7", ("gpu01", "gpu04", "gpu05", "cpu7")),
        ("gpu01", ("gpu01",)),
        ("", ()),
    ],
)
def test_slurm_host_lists_expand(hosts: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(hosts) == names
    assert reservation_name("team:ml", "1201-2215") == "gpufleet-ml-1201-2215"

"""The console's Slurm client against a real Slurm: each change checked in Slurm's own answer."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from console.connections.slurm_rest import (
    ScontrolWithToken,
    SlurmAccess,
    SlurmError,
    SlurmRestClient,
)
from console.fleet.slurm_model import ReservationAsk
from tests.conftest import wait_for
from tests.slurm.harness import SlurmCluster


def field(shown: str, key: str) -> str:
    """One Key=Value of `scontrol -o show ...` (values without spaces)."""
    match = re.search(rf"(?:^|\s){key}=(\S*)", shown)
    assert match is not None, f"{key} not in {shown!r}"
    return match[1]


def later_job(slurm: SlurmCluster, jobs: list[int], *args: str) -> int:
    """A pending job that is not held (it may not start for an hour): it can be steered."""
    job_id = int(slurm.run("sbatch", "--parsable", "--begin=now+1hour", *args,
                           "--wrap", "sleep 600").strip())  # fmt: skip
    jobs.append(job_id)
    return job_id


def test_lists_a_pending_job_with_the_gpus_it_asked_for(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, cleanup_jobs: list[int]
) -> None:
    job_id = slurm.submit_held("--job-name=train-llm", "--gres=gpu:3", "--time=90")
    cleanup_jobs.append(job_id)
    job = next(j for j in slurm_rest.jobs() if j.job_id == job_id)
    shown = slurm.scontrol_show("job", str(job_id))
    assert (job.name, job.user, job.partition) == ("train-llm", "root", "gpu")
    assert job.pending and job.gpus == 3
    assert job.reason == field(shown, "Reason")
    assert job.time_limit == timedelta(minutes=90)
    assert job.priority == int(field(shown, "Priority"))
    assert job.account == field(shown, "Account").replace("(null)", "")


@pytest.mark.parametrize(
    ("asks", "gpus"),
    [
        (("--nodes=2", "--gpus-per-node=4"), 8),  # per node, times the nodes
        (("--gpus=5",), 5),  # per job
        (("--cpus-per-task=2",), None),  # none at all
    ],
)
def test_gpus_asked_however_the_job_asked(
    slurm: SlurmCluster,
    slurm_rest: SlurmRestClient,
    cleanup_jobs: list[int],
    asks: tuple[str, ...],
    gpus: int | None,
) -> None:
    job_id = slurm.submit_held(*asks)
    cleanup_jobs.append(job_id)
    assert slurm_rest.job(job_id).gpus == gpus


def test_steers_a_pending_job_to_a_node(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, cleanup_jobs: list[int]
) -> None:
    job_id = later_job(slurm, cleanup_jobs, "--gres=gpu:2")
    slurm_rest.steer_job(job_id, ["gpu02"])
    assert field(slurm.scontrol_show("job", str(job_id)), "ReqNodeList") == "gpu02"
    assert slurm_rest.job(job_id).required_nodes == ("gpu02",)


def test_steering_to_an_unknown_node_surfaces_slurms_refusal(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, cleanup_jobs: list[int]
) -> None:
    job_id = later_job(slurm, cleanup_jobs)
    with pytest.raises(SlurmError, match=r"(?i)invalid node name"):
        slurm_rest.steer_job(job_id, ["gpu99"])
    assert field(slurm.scontrol_show("job", str(job_id)), "ReqNodeList") == "(null)"


def test_cancels_a_job(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, cleanup_jobs: list[int]
) -> None:
    job_id = slurm.submit_held("--gres=gpu:1")
    cleanup_jobs.append(job_id)
    slurm_rest.cancel_job(job_id)
    assert field(slurm.scontrol_show("job", str(job_id)), "JobState") == "CANCELLED"


def test_lists_nodes_with_their_gpus_and_partitions(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, cleanup_jobs: list[int]
) -> None:
    job_id = int(slurm.run("sbatch", "--parsable", "--nodelist=gpu01", "--gres=gpu:2",
                           "--wrap", "sleep 600").strip())  # fmt: skip
    cleanup_jobs.append(job_id)
    wait_for(lambda: "RUNNING" in slurm.scontrol_show("job", str(job_id)), 30, "the job to run")
    nodes = {n.name: n for n in slurm_rest.nodes()}
    assert set(nodes) == set(slurm.nodes)
    assert (nodes["gpu01"].gpus, nodes["gpu01"].gpus_free) == (8, 6)
    assert (nodes["gpu02"].gpus, nodes["gpu02"].gpus_free) == (8, 8)
    assert nodes["gpu01"].partitions == ("gpu",)
    assert field(slurm.run("scontrol", "-d", "-o", "show", "node", "gpu01"), "GresUsed").startswith(
        "gpu:2"
    )


def test_drains_and_resumes_a_node_with_a_reason(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, slurm_scontrol: ScontrolWithToken
) -> None:
    try:
        slurm_scontrol.drain("gpu02", "fan 3 failing")
        shown = slurm.scontrol_show("node", "gpu02")
        assert "DRAIN" in field(shown, "State")
        assert "Reason=fan 3 failing" in shown
        node = next(n for n in slurm_rest.nodes() if n.name == "gpu02")
        assert node.drained and node.reason == "fan 3 failing"
    finally:
        slurm_scontrol.resume("gpu02")
    assert "DRAIN" not in field(slurm.scontrol_show("node", "gpu02"), "State")
    assert not next(n for n in slurm_rest.nodes() if n.name == "gpu02").drained


def test_creates_lists_and_deletes_a_reservation(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, slurm_scontrol: ScontrolWithToken
) -> None:
    name = f"gpufleet-{uuid.uuid4().hex[:8]}"
    ask = ReservationAsk(name, nodes=("gpu01",), users=("root",), duration=timedelta(hours=2),
                         flags=("IGNORE_JOBS",))  # fmt: skip
    slurm_scontrol.create_reservation(ask)
    try:
        shown = slurm.scontrol_show("reservation", name)
        assert (field(shown, "Nodes"), field(shown, "Users")) == ("gpu01", "root")
        assert field(shown, "Duration") == "02:00:00"
        listed = next(r for r in slurm_rest.reservations() if r.name == name)
        assert (listed.nodes, listed.users) == ("gpu01", ("root",))
        assert listed.end - listed.start == timedelta(hours=2)
        assert "IGNORE_JOBS" in listed.flags
    finally:
        slurm_scontrol.delete_reservation(name)
    assert name not in {r.name for r in slurm_rest.reservations()}
    with pytest.raises(AssertionError, match="not found"):
        slurm.scontrol_show("reservation", name)


def test_a_bad_token_surfaces_slurms_message(slurm: SlurmCluster) -> None:
    client = SlurmRestClient(SlurmAccess(slurm.rest_url, "root", "not-a-jwt"))
    with pytest.raises(SlurmError) as refused:
        client.jobs()
    assert refused.value.status == 500
    assert "Failed while looking for jobs" in str(refused.value)
    with pytest.raises(SlurmError, match=r"(?i)zero bytes|authentication|protocol"):
        ScontrolWithToken("not-a-jwt", slurm.layout.conf).drain("gpu01", "should not happen")
    assert "DRAIN" not in field(slurm.scontrol_show("node", "gpu01"), "State")


@pytest.mark.usefixtures("workload_accounts")
def test_slurm_decides_what_a_user_may_do(slurm: SlurmCluster, cleanup_jobs: list[int]) -> None:
    job_id = slurm.submit_held()
    cleanup_jobs.append(job_id)
    alice = SlurmAccess(slurm.rest_url, "alice", slurm.token("alice"))
    with pytest.raises(SlurmError, match=r"signal 9: Access/permission denied$"):
        SlurmRestClient(alice).cancel_job(job_id)
    assert field(slurm.scontrol_show("job", str(job_id)), "JobState") == "PENDING"
    # Slurm's word for "not an operator" when updating a node.
    with pytest.raises(SlurmError, match="Invalid user id"):
        ScontrolWithToken(alice.token, slurm.layout.conf).drain("gpu01", "not hers to drain")


def test_a_reservation_for_an_account_at_a_given_time(
    slurm: SlurmCluster, slurm_rest: SlurmRestClient, slurm_scontrol: ScontrolWithToken
) -> None:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    name = f"gpufleet-{uuid.uuid4().hex[:8]}"
    ask = ReservationAsk(name, nodes=("gpu01", "gpu02"), accounts=("research",), start=start,
                         end=start + timedelta(hours=3))  # fmt: skip
    slurm_scontrol.create_reservation(ask)
    try:
        listed = next(r for r in slurm_rest.reservations() if r.name == name)
        assert (listed.start, listed.end) == (start, start + timedelta(hours=3))
        assert listed.accounts == ("research",) and listed.users == ()
        assert field(slurm.scontrol_show("reservation", name), "Nodes") == "gpu[01-02]"
    finally:
        slurm_scontrol.delete_reservation(name)

"""The sacct poller against the real sacct: a test cluster with slurmdbd and MariaDB, jobs
run through it, read back by account as the daemon's poller reads them."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.poller import SacctPoller
from node_daemon.usage.query import query_usage
from node_daemon.usage.sacct import parse_sacct_jobs
from node_daemon.usage.store import USAGE_FILE, UsageStore
from tests.conftest import wait_for
from tests.slurm.accounting import missing_accounting
from tests.slurm.harness import SlurmCluster, missing_pieces, slurm_cluster


@pytest.fixture(scope="module")
def accounted() -> Iterator[SlurmCluster]:
    why = missing_pieces() or missing_accounting()
    if why is not None:
        pytest.skip(
            f"!!! SLURM WITH SLURMDBD CANNOT RUN: {why}. THE SACCT POLLER WAS NOT TESTED "
            "AGAINST THE REAL SACCT (only tests/node_daemon/test_sacct_poller.py ran). "
            "installer/dev-setup.sh test installs mariadb-server and slurmdbd !!!"
        )
    with slurm_cluster(accounting=True) as cluster:
        yield cluster


def run_job(cluster: SlurmCluster, *args: str) -> str:
    """Submit, and wait until the accounting has the job's end."""
    job = cluster.run("sbatch", "--parsable", *args, "--wrap", "sleep 2").strip().split(";")[0]

    def ended() -> bool:
        out = cluster.run("sacct", "-n", "-P", "-X", "-j", job, "--format=State,End")
        state, _, end = out.strip().partition("|")
        return state == "COMPLETED" and end not in ("", "Unknown")

    wait_for(ended, 60, f"job {job} in sacct as COMPLETED")
    return job


@pytest.fixture(scope="module")
def jobs(accounted: SlurmCluster) -> dict[str, str]:
    return {
        "one": run_job(accounted, "-A", "ml", "-w", "gpu01", "--gres=gpu:2"),
        "two_nodes": run_job(accounted, "-A", "vision", "-N", "2", "--gres=gpu:4"),
        "elsewhere": run_job(accounted, "-A", "ml", "-w", "gpu02", "--gres=gpu:1"),
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[UsageStore]:
    usage = UsageStore(tmp_path / USAGE_FILE)
    yield usage
    usage.close()


def elapsed_s(cluster: SlurmCluster, job: str) -> float:
    out = cluster.run(
        "sacct", "-n", "-P", "-X", "-j", job, "--format=JobID,User,Start,End,AllocTRES"
    )
    [found], _ = parse_sacct_jobs(out)
    assert found.end is not None
    return (found.end - found.start).total_seconds()


def test_the_poller_reads_this_nodes_jobs_by_account(
    accounted: SlurmCluster, jobs: dict[str, str], store: UsageStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("SLURM_CONF", str(accounted.layout.conf))
    poller = SacctPoller(store, 300, "gpu01", clock=lambda: time.time() + 5)
    new, updated = poller.poll() or (-1, -1)
    assert (new, updated) == (2, 0)  # gpu02's own job is not this node's
    stored = {job.job_id: job for job in store.jobs(None, 2e9)}
    assert set(stored) == {jobs["one"], jobs["two_nodes"]}
    one, two = stored[jobs["one"]], stored[jobs["two_nodes"]]
    assert (one.account, one.gpus, one.state, one.user) == ("ml", 2, "COMPLETED", "root")
    assert (two.account, two.gpus) == ("vision", 4)  # 8 GPUs on two nodes: this one's 4
    request = pb.QueryUsageRequest(group_by=pb.USAGE_GROUPING_ACCOUNT)
    answer = query_usage(store, [], lambda _u: (), request, "gpu01")
    accounts = {row.key: row.gpu_seconds for row in answer.rows}
    assert accounts == pytest.approx({
        "ml": 2 * elapsed_s(accounted, jobs["one"]),
        "vision": 4 * elapsed_s(accounted, jobs["two_nodes"]),
    })  # fmt: skip
    assert poller.poll() == (0, 2)  # the next poll overlaps: replaced, not added
    again = {row.key: row.gpu_seconds for row in query_usage(
        store, [], lambda _u: (), request, "gpu01").rows}  # fmt: skip
    assert again == accounts


def test_an_export_of_the_real_sacct_imports(
    accounted: SlurmCluster, jobs: dict[str, str], store: UsageStore
) -> None:
    """`sacct -P` as the docs tell an operator to export it, header and all."""
    start = (dt.datetime.now() - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    columns = "JobID,User,Account,Start,End,State,AllocTRES,NodeList,NNodes"
    out = accounted.run("sacct", "--parsable2", "--allusers", f"--starttime={start}",
                        f"--format={columns}")  # fmt: skip
    found, skipped = parse_sacct_jobs(out)
    assert {job.job_id for job in found} >= set(jobs.values())
    assert skipped > 0  # the batch and extern steps
    by_id = {job.job_id: job for job in found}
    assert (by_id[jobs["two_nodes"]].gpus, by_id[jobs["two_nodes"]].nodes) == (8, 2)

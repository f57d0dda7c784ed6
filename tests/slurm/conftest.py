"""The real Slurm of the Slurm tests: one cluster for the session (it takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.connections.slurm_rest import ScontrolWithToken, SlurmAccess, SlurmRestClient
from tests.slurm.harness import SlurmCluster, missing_pieces, slurm_cluster


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    """munged, slurmctld, two slurmd (gpu01, gpu02: 8 GPUs each) and slurmrestd on loopback."""
    why = missing_pieces()
    if why is not None:
        pytest.skip(
            f"!!! REAL SLURM CANNOT RUN: {why}. THE SLURM TESTS DID NOT RUN. "
            "installer/dev-setup.sh test installs Debian's Slurm packages !!!"
        )
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture
def slurm_rest(slurm: SlurmCluster) -> SlurmRestClient:
    """The console's client, as root (Slurm's administrator here)."""
    return SlurmRestClient(SlurmAccess(slurm.rest_url, "root", slurm.token("root")))


@pytest.fixture
def slurm_scontrol(slurm: SlurmCluster) -> ScontrolWithToken:
    return ScontrolWithToken(slurm.token("root"), slurm.layout.conf)


@pytest.fixture
def cleanup_jobs(slurm: SlurmCluster) -> Iterator[list[int]]:
    """Jobs a test submits are cancelled after it, whatever it did to them."""
    jobs: list[int] = []
    yield jobs
    for job_id in jobs:
        slurm.run("scancel", str(job_id))

"""What a workload starts with: its account, environment, working directory and GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from node_daemon.backends.readings import GpuStatic
from node_daemon.control.accounts import (
    NoAccount,
    check_account,
    daemon_may_switch_users,
    login_environment,
    own_account,
    working_directory,
)
from node_daemon.control.launcher import LaunchSpec
from node_daemon.control.records import Workload
from node_daemon.control.settings import WorkloadSettings


class CannotStart(Exception):
    """The workload cannot start now (no account, a GPU without identity); nothing ran."""


def launch_spec(
    workload: Workload,
    gpus: Sequence[int],
    facts: Mapping[int, GpuStatic],
    settings: WorkloadSettings,
    may_switch: bool | None = None,
    demo: bool = False,
) -> LaunchSpec:
    """The runner's spec for `workload` on `gpus`; CannotStart saying why not.

    `may_switch`: whether the launcher starts processes as other accounts
    (None: whether the daemon itself may). `demo`: a demo node's, run as the
    daemon's own account whoever the owner is (node_daemon.control.accounts).
    """
    uuids = [gpu_uuid(gpu, facts) for gpu in gpus]
    if demo:
        account, may_switch = own_account(), False
    else:
        try:
            account = check_account(workload.run_as or workload.owner, may_switch)
        except NoAccount as exc:
            raise CannotStart(f"workload {workload.id} cannot start: {exc}") from exc
    env = login_environment(account, workload.env)
    # Set last: a declared variable cannot point the workload at other GPUs.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(uuids)
    env["GPUFLEET_WORKLOAD_ID"] = workload.id
    work_dir = working_directory(settings.work_dir, account, workload.id)
    switch = daemon_may_switch_users() if may_switch is None else may_switch
    return LaunchSpec(list(workload.argv), env, account.name if switch else None, work_dir)


def gpu_uuid(gpu: int, facts: Mapping[int, GpuStatic]) -> str:
    """The UUID CUDA_VISIBLE_DEVICES names `gpu` by; CannotStart while it is unknown."""
    known = facts.get(gpu)
    if known is None or not known.uuid:
        # An empty CUDA_VISIBLE_DEVICES means "no GPU" to CUDA; a guessed one, someone else's.
        raise CannotStart(
            f"GPU {gpu}'s identity (UUID) is not known yet (it did not answer when the "
            "daemon started): nothing was started; try again once it reports"
        )
    return known.uuid

"""Workloads run as their owners' real local accounts, with nothing of the daemon's.

The daemon under test runs as root (as the tests do); the accounts are real,
created by the tests (tests/accounts.py).
"""

from __future__ import annotations

import pwd
from collections.abc import Iterator

import grpc
import pytest

from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.settings import AuthSettings
from node_daemon.control.settings import WorkloadSettings
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.token_users import TokenUsers

pytestmark = pytest.mark.usefixtures("workload_accounts")
ENDED = (pb.WORKLOAD_STATE_FINISHED, pb.WORKLOAD_STATE_FAILED, pb.WORKLOAD_STATE_CANCELLED)


def run_to_end(stub, argv: list[str], owner: str, metadata=(), **extra) -> tuple[pb.Workload, str]:  # type: ignore[no-untyped-def]
    """Submit, assign to GPU 0, wait for the end; the workload and its output."""
    request = pb.SubmitWorkloadRequest(argv=argv, owner=owner, gpu_count=1, **extra)
    queued = stub.SubmitWorkload(request, timeout=5, metadata=metadata)
    stub.AssignWorkload(pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[0]),
                        timeout=10, metadata=metadata)  # fmt: skip

    def ended() -> pb.Workload | None:
        listed = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5,
                                    metadata=metadata).workloads  # fmt: skip
        return next((w for w in listed if w.id == queued.id and w.state in ENDED), None)

    wait_for(ended, 15, f"workload {queued.id} to end")
    output = stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=queued.id),
                                    timeout=5, metadata=metadata)  # fmt: skip
    return ended(), output.output.decode()  # type: ignore[return-value]


def sleep_on_gpu_1(stub: pb_grpc.NodeServiceStub, owner: str) -> pb.Workload:
    """Submit `sleep 300` for `owner` and assign it to GPU 1; the test cancels it."""
    request = pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner=owner, gpu_count=1)
    queued: pb.Workload = stub.SubmitWorkload(request, timeout=5)
    stub.AssignWorkload(pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1]),
                        timeout=10)  # fmt: skip
    return queued


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    daemon = start_daemon(gpus=2, workloads=WorkloadSettings(accounts={"team:ml": "worker"}))
    wait_for(lambda: daemon.sampler.latest is not None)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def test_a_workload_runs_as_its_owner_with_a_clean_environment(
    node, monkeypatch: pytest.MonkeyPatch
) -> None:
    _daemon, stub = node
    monkeypatch.setenv("DAEMON_ONLY_SECRET", "s3cret-of-the-daemon")
    script = "id -un; id -gn; pwd; env"
    done, output = run_to_end(stub, ["sh", "-c", script], "alice", env={"MY_SETTING": "42"})
    assert done.state == pb.WORKLOAD_STATE_FINISHED and done.run_as == "alice", output
    user, group, cwd, *env_lines = output.splitlines()
    home = pwd.getpwnam("alice").pw_dir
    assert (user, group) == ("alice", "alice")
    assert cwd == f"{home}/gpufleet-workloads/{done.id}"
    env = dict(line.split("=", 1) for line in env_lines if "=" in line)
    assert env["HOME"] == home and env["USER"] == env["LOGNAME"] == "alice"
    assert env["MY_SETTING"] == "42" and env["CUDA_VISIBLE_DEVICES"].startswith("GPU-")
    assert "s3cret-of-the-daemon" not in output  # nothing of the daemon's environment
    login = {"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "PWD", "SHLVL", "_"}
    ours = {"MY_SETTING", "CUDA_VISIBLE_DEVICES", "GPUFLEET_WORKLOAD_ID"}
    assert set(env) - login - ours == set()


def test_a_workload_cannot_read_or_write_the_daemons_state(node) -> None:
    daemon, stub = node
    state = daemon.journal.path.parent
    script = (
        f"cat {state}/journal.sqlite3 > /dev/null && echo READ-JOURNAL; "
        f"echo x >> {state}/audit.sqlite3 && echo WROTE-AUDIT; "
        f"ls {state}/workloads > /dev/null && echo LISTED-OUTPUTS; true"
    )
    done, output = run_to_end(stub, ["sh", "-c", script], "bob")
    assert done.state == pb.WORKLOAD_STATE_FINISHED, output
    assert "Permission denied" in output
    for leaked in ("READ-JOURNAL", "WROTE-AUDIT", "LISTED-OUTPUTS"):
        assert leaked not in output


def test_a_teams_workload_runs_as_its_mapped_account(node) -> None:
    _daemon, stub = node
    done, output = run_to_end(stub, ["id", "-un"], "team:ml")
    assert (done.run_as, output) == ("worker", "worker\n")


@pytest.mark.parametrize(
    ("owner", "why"),
    [("no-such-account-here", "no local account 'no-such-account-here'"),
     ("root", "never run as root")],
)  # fmt: skip
def test_no_account_and_root_are_refused_at_submit(node, owner: str, why: str) -> None:
    _daemon, stub = node
    with pytest.raises(grpc.RpcError) as refused:
        stub.SubmitWorkload(pb.SubmitWorkloadRequest(argv=["true"], owner=owner, gpu_count=1),
                            timeout=5)  # fmt: skip
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert why in refused.value.details()
    listed = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
    assert list(listed.workloads) == []


def test_the_gpu_lists_the_workload_under_its_owner(node) -> None:
    daemon, stub = node
    queued = sleep_on_gpu_1(stub, "carol")

    def users_on_gpu_1() -> set[str | None]:
        latest = daemon.sampler.latest
        return {p.user for p in (latest.processes.get(1, ()) if latest else ())}

    wait_for(lambda: "carol" in users_on_gpu_1(), 15, "carol's process on GPU 1")
    stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)


# -- who sees a workload's environment and output --------------------------------------

USERS = TokenUsers(
    {"vera": Role.VIEWER, "otto": Role.OPERATOR, "ada": Role.ADMIN}, teams={"otto": ("ml",)}
)


@pytest.fixture
def secured(start_daemon: DaemonFactory) -> Iterator[pb_grpc.NodeServiceStub]:
    daemon = start_daemon(gpus=2, auth=AuthSettings(USERS.users),
                          workloads=WorkloadSettings(accounts={"team:ml": "worker"}))  # fmt: skip
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield pb_grpc.NodeServiceStub(channel)


def test_viewers_see_the_command_not_the_environment_or_output(secured) -> None:
    stub = secured
    secret = {"API_TOKEN": "hunter2"}
    done, output = run_to_end(secured, ["sh", "-c", "echo private output"], "team:ml",
                              USERS.bearer("otto"), env=secret)  # fmt: skip
    assert output == "private output\n"
    for who, sees in (("otto", True), ("ada", True), ("vera", False)):
        listed = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5,
                                    metadata=USERS.bearer(who)).workloads  # fmt: skip
        (shown,) = [w for w in listed if w.id == done.id]
        assert list(shown.argv) == ["sh", "-c", "echo private output"]
        assert (dict(shown.env) == secret) is sees and shown.env_hidden is not sees
    with pytest.raises(grpc.RpcError) as refused:
        stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=done.id), timeout=5,
                               metadata=USERS.bearer("vera"))  # fmt: skip
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    events = stub.StreamEvents(pb.StreamEventsRequest(), timeout=3, metadata=USERS.bearer("vera"))
    seen = []
    with pytest.raises(grpc.RpcError) as ended:  # the deadline ends the stream after the replay
        for event in events:
            seen.append(event)
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, ended.value.details()
    workload_events = [e for e in seen if e.HasField("workload") and e.workload.id == done.id]
    assert workload_events and all(not e.workload.env for e in workload_events)
    audit = stub.QueryAudit(pb.QueryAuditRequest(method="SubmitWorkload"), timeout=5,
                            metadata=USERS.bearer("ada")).records  # fmt: skip
    assert audit and all("hunter2" not in entry.params for entry in audit)
    assert any('"API_TOKEN": "(hidden)"' in entry.params for entry in audit)


def test_usage_is_billed_to_the_owner(node) -> None:
    _daemon, stub = node
    queued = sleep_on_gpu_1(stub, "dmitri")

    def dmitris_gpu_seconds() -> float:
        usage = stub.QueryUsage(pb.QueryUsageRequest(group_by=pb.USAGE_GROUPING_USER), timeout=5)
        return sum(row.gpu_seconds for row in usage.rows if row.key == "dmitri")

    wait_for(lambda: dmitris_gpu_seconds() > 0, 15, "GPU-seconds billed to dmitri")
    usage = stub.QueryUsage(pb.QueryUsageRequest(group_by=pb.USAGE_GROUPING_USER), timeout=5)
    assert "root" not in {row.key for row in usage.rows}  # not the daemon's account
    stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)

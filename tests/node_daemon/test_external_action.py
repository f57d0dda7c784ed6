"""RecordExternalAction over real gRPC: one record in the node's hash chain, its user the caller."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import verify
from node_daemon.auth.settings import AuthSettings
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory
from tests.node_daemon.token_users import TokenUsers

USERS = TokenUsers({"otto": Role.OPERATOR, "ada": Role.ADMIN})


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    daemon = start_daemon(gpus=1, auth=AuthSettings(USERS.users))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def test_an_external_action_is_one_record_of_the_chain(node) -> None:
    daemon, stub = node
    params = json.dumps({"reason": "fan swap", "nodes": "gpu01"})
    request = pb.RecordExternalActionRequest(
        system="slurm", action="drain", target="node=gpu01", params=params,
        result="OK",
    )  # fmt: skip
    resumed = pb.RecordExternalActionRequest(system="slurm", action="resume", target="node=gpu01",
                                             result="Invalid node state specified")  # fmt: skip
    first = stub.RecordExternalAction(resumed, timeout=5, metadata=USERS.bearer("ada"))
    written = stub.RecordExternalAction(request, timeout=5, metadata=USERS.bearer("otto"))
    assert (written.user, written.method, written.target) == ("otto", "slurm/drain", "node=gpu01")
    assert json.loads(written.params) == {"reason": "fan swap", "nodes": "gpu01"}
    records = stub.QueryAudit(
        pb.QueryAuditRequest(), timeout=5, metadata=USERS.bearer("ada")
    ).records
    # Written once, by the servicer: the interceptor does not add attempt/OK records.
    assert [r.seq for r in records if r.method == "slurm/drain"] == [written.seq]
    newest = max(records, key=lambda r: r.seq)
    assert newest.seq == written.seq and newest.hash == written.hash
    assert written.prev_hash == first.hash and written.seq == first.seq + 1
    assert (first.user, first.params, first.result) == ("ada", "{}", "Invalid node state specified")
    assert written.result == "OK" and written.peer.startswith("ipv4:127.0.0.1")
    assert verify(daemon.audit.path) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"params": "{not json"}, "params is no JSON"),
        ({"params": json.dumps({"x": "y" * 5000})}, "params is"),
        ({"system": ""}, "system"),
        ({"action": "Drain Now"}, "action"),
        ({"result": ""}, "result is empty"),
        ({"target": "t" * 600}, "target is 600 characters"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field(
    node, change: dict[str, str], named: str
) -> None:
    daemon, stub = node
    fields = {"system": "slurm", "action": "cancel_job", "target": "job=7", "params": "{}",
              "result": "OK"} | change  # fmt: skip
    head = daemon.audit.head
    with pytest.raises(grpc.RpcError) as raised:
        stub.RecordExternalAction(pb.RecordExternalActionRequest(**fields), timeout=5,
                                  metadata=USERS.bearer("otto"))  # fmt: skip
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert named in (raised.value.details() or "")
    assert daemon.audit.head == head
    # The daemon keeps serving.
    assert stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=USERS.bearer("otto")).user == "otto"

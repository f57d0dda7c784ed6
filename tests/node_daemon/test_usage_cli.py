"""`gpufleet usage` end to end against a real gRPC server answering QueryUsage.

The server here carries only the usage method (port 0, loopback), as the daemon
will once it mounts UsageServicer; TLS and token tests use the same server.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.commands.usage import call_metadata, main
from node_daemon.rpc.usage_servicer import UsageServicer
from node_daemon.usage.amounts import USAGE_COLUMNS
from node_daemon.usage.meter import UsageMeter
from node_daemon.usage.report import CSV_TAIL
from node_daemon.usage.store import USAGE_FILE, UsageStore
from tests.certs import Authority
from tests.node_daemon.test_usage import T0, gpu, no_reservations, proc
from tests.node_daemon.test_usage_query import WORKLOADS, teams_of

SERVICE = "gpufleet.v1.NodeService"
ONE_DAY_S = 86400


@pytest.fixture
def store(tmp_path: Path) -> Iterator[UsageStore]:
    usage = UsageStore(tmp_path / "node" / USAGE_FILE)
    yield usage
    usage.close()


@pytest.fixture
def meter(store: UsageStore) -> UsageMeter:
    """A meter that has seen two days: alice on GPU 0 both days, bob on GPU 1 the first hour.

    It flushes every 7 hours, so the last 6 hours are still in memory.
    """
    usage = UsageMeter(store, sample_interval_s=60.0, flush_interval_s=7 * 3600.0)
    for minute in range(2 * 24 * 60 + 1):
        bob = [proc(2, "bob", 4.0)] if minute <= 60 else []
        processes = {0: [proc(1, "alice", 8.0)], 1: bob}
        usage.observe(T0 + minute * 60, [gpu(0, 100.0, 500.0), gpu(1, 50.0, 250.0)],
                      processes, no_reservations)  # fmt: skip
    return usage


Server = Callable[..., str]


@pytest.fixture
def serve(store: UsageStore, meter: UsageMeter) -> Iterator[Server]:
    """Start a usage server; returns its address. `record` collects each call's metadata."""
    servers: list[grpc.Server] = []

    def start(credentials: grpc.ServerCredentials | None = None, record: list | None = None) -> str:  # type: ignore[type-arg]
        servicer = UsageServicer(store, lambda: WORKLOADS, teams_of, "gpu-node-7", meter.flush)
        methods = {"QueryUsage": _recording(servicer, record if record is not None else [])}
        server = grpc.server(futures.ThreadPoolExecutor(2, thread_name_prefix="usage-test-rpc"))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
        if credentials is None:
            port = server.add_insecure_port("127.0.0.1:0")
        else:
            port = server.add_secure_port("127.0.0.1:0", credentials)
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0).wait()


def _recording(servicer: UsageServicer, record: list) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
    def query(
        request: pb.QueryUsageRequest, context: grpc.ServicerContext
    ) -> pb.QueryUsageResponse:
        record.append(tuple(context.invocation_metadata()))
        return servicer.QueryUsage(request, context)

    return grpc.unary_unary_rpc_method_handler(
        query, pb.QueryUsageRequest.FromString, pb.QueryUsageResponse.SerializeToString
    )


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["usage", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_report_table_in_hours_and_kwh(serve: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--node", serve(), "--from", "2024-06-03")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["user", "GPU-h", "busy", "GPU-h", "GiB-h", "kWh", "reserved", "h",
                                "res.", "idle", "h", "workloads"]  # fmt: skip
    # alice: 48 GPU-h busy 48, 8 GiB x 48 h, 500 W x 48 h = 24 kWh; her workloads were earlier.
    assert lines[1].split() == ["alice", "48.00", "48.00", "384.00", "24.00", "0.00", "0.00", "0"]
    assert lines[2].split() == ["bob", "1.00", "0.50", "4.00", "0.25", "0.00", "0.00", "0"]
    assert "node gpu-node-7: 96.00 GPU-h observed, mean utilisation 75.0 %" in out


def test_report_by_team(serve: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--node", serve(), "--by", "team")
    assert code == 0
    keys = [line.split()[0] for line in out.splitlines()[1:4]]
    assert keys == ["team:ml", "team:vision", "(no"]  # "(no team)": carol's workload


def test_the_report_includes_usage_not_yet_flushed(
    serve: Server, store: UsageStore, capsys: pytest.CaptureFixture[str]
) -> None:
    flushed = sum(a.gpu_seconds for _, _, a in store.user_usage(None, None))
    assert flushed == pytest.approx(43 * 3600)
    code, out, _ = run_cli(capsys, "--node", serve(), "--by", "node")
    assert code == 0
    assert out.splitlines()[1].split()[:2] == ["gpu-node-7", "49.00"]


def test_csv_export_imports_into_another_node(
    serve: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "--node", serve(), "--csv", "--to", "2024-06-30")
    assert code == 0
    exported = list(csv.DictReader(io.StringIO(out)))
    assert list(exported[0]) == ["day", "user", *USAGE_COLUMNS, *CSV_TAIL]
    assert exported[0]["cost"] == exported[0]["currency"] == ""  # this node has no prices
    by_day_user = {(r["day"], r["user"]): r for r in exported}
    assert float(by_day_user[("2024-06-03", "alice")]["gpu_seconds"]) == pytest.approx(57600)
    assert float(by_day_user[("2024-06-04", "alice")]["gpu_seconds"]) == pytest.approx(ONE_DAY_S)
    assert by_day_user[("2024-06-02", "alice")]["workloads"] == "1"
    export = tmp_path / "export.csv"
    export.write_text(out, encoding="utf-8")

    new_node = tmp_path / "new-node"
    code, out, _ = run_cli(capsys, "import", "--state-dir", str(new_node), "--csv", str(export))
    assert code == 0
    assert "imported" in out and "GPU-hours added" in out
    copy = UsageStore(new_node / USAGE_FILE)
    copied = {(day, user): a for day, user, a in copy.user_usage(None, None)}
    copy.close()
    assert copied[("2024-06-05", "alice")].gpu_seconds == pytest.approx(8 * 3600)
    assert sum(a.energy_joules for a in copied.values()) == pytest.approx(
        500.0 * 2 * ONE_DAY_S + 250.0 * 3600, rel=1e-6
    )


def test_csv_by_day_has_no_key_column(serve: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "--node", serve(), "--csv", "--by", "day", "--from", "2024-06-03"
    )
    assert code == 0
    exported = list(csv.DictReader(io.StringIO(out)))
    assert [r["day"] for r in exported] == ["2024-06-03", "2024-06-04", "2024-06-05"]
    assert "user" not in exported[0]


def test_the_token_goes_as_bearer_metadata(
    serve: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[tuple[str, str], ...]] = []
    code, _, _ = run_cli(capsys, "--node", serve(record=calls), "--token", "s3cret")
    assert code == 0
    assert ("authorization", "Bearer s3cret") in calls[0]
    assert call_metadata(None) == ()


def test_tls_with_the_nodes_ca(
    serve: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    authority = Authority()
    issued = authority.issue("localhost", server=True)
    address = serve(grpc.ssl_server_credentials([(issued.key, issued.cert)]))
    ca = tmp_path / "ca.crt"
    ca.write_bytes(authority.pem)
    code, out, _ = run_cli(capsys, "--node", address, "--ca", str(ca))
    assert code == 0
    assert "alice" in out
    code, _, err = run_cli(capsys, "--node", address)  # plaintext to a TLS port
    assert code == 1
    assert "UNAVAILABLE" in err


def test_bad_requests_are_invalid_argument(serve: Server) -> None:
    with grpc.insecure_channel(serve()) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        for request in (
            pb.QueryUsageRequest(from_day="2024-13-01"),
            pb.QueryUsageRequest(from_day="2024-06-05", to_day="2024-06-01"),
        ):
            with pytest.raises(grpc.RpcError) as failed:
                stub.QueryUsage(request, timeout=5)
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "day" in (failed.value.details() or "")


def test_cli_reports_server_errors(serve: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--node", serve(), "--from", "2024-06-05", "--to", "2024-06-01")
    assert code == 1
    assert "INVALID_ARGUMENT: from_day 2024-06-05 is after to_day 2024-06-01" in err


def test_cli_needs_a_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys)
    assert code == 2
    assert "--node HOST:PORT is required" in err


def test_two_nodes_are_refused_not_one_silently_dropped(
    serve: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """#16: `--node A --node B` used to report B alone, as if A had no usage."""
    first, second = serve(), serve()
    code, out, err = run_cli(capsys, "--node", first, "--node", second)
    assert code == 2
    assert out == ""
    assert f"one --node per report (given {first}, {second})" in err


def test_import_of_the_same_sacct_file_twice_counts_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "7|alice|2024-06-01T10:00:00|2024-06-01T11:00:00|gres/gpu=2\n", encoding="utf-8"
    )
    state = tmp_path / "state"
    code, out, _ = run_cli(capsys, "import", "--state-dir", str(state), "--sacct", str(sacct),
                           "--timezone", "UTC")  # fmt: skip
    assert code == 0
    assert "1 jobs new, 0 already known" in out
    assert "2.00 GPU-hours in these jobs" in out
    code, out, _ = run_cli(capsys, "import", "--state-dir", str(state), "--sacct", str(sacct),
                           "--timezone", "UTC")  # fmt: skip
    assert code == 0
    assert "0 jobs new, 1 already known (replaced, not added)" in out
    store = UsageStore(state / USAGE_FILE)
    jobs = store.jobs(None, 2e9)
    store.close()
    assert [(j.job_id, j.gpus, j.end_unix - j.start_unix) for j in jobs] == [("7", 2, 3600)]


def test_import_of_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "import", "--state-dir", str(tmp_path), "--csv", "nope.csv")
    assert code == 1
    assert "cannot read nope.csv" in err

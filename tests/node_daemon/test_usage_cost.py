"""The bill: [usage.prices] turn a known usage into the expected cost, over real gRPC from a
real daemon; no prices, no cost; prices reload live; bad prices are refused by key."""

from __future__ import annotations

import datetime as dt
from dataclasses import fields
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.commands.usage import main
from node_daemon.config import ConfigError, DaemonConfig, load_config_file
from node_daemon.reload import plan_reload
from node_daemon.server import NodeDaemon
from node_daemon.usage.importer import import_file, import_sacct_file
from node_daemon.usage.settings import Prices, UsageSettings
from node_daemon.usage.store import USAGE_FILE, UsageStore
from tests.conftest import DaemonFactory
from tests.installer.test_config_examples import documented_keys
from tests.installer.tools import DAEMON_TOML

SAMPLES = Path(__file__).parent / "sacct"
PRICES = """
[usage.prices]
currency = "EUR"
gpu_hour = { "H100" = 2.50, "A100" = 1.50, default = 1.00 }
kwh = 0.30
busy_weight = 1.0
allocated_weight = 0.5
"""
# alice on 2024-05-01, metered on this node: 2 GPU-hours, 1 of them busy, 2.5 MJ.
CSV = """\
day,user,gpu_seconds,busy_gpu_seconds,memory_gib_seconds,energy_joules,reserved_seconds,reserved_idle_seconds
2024-05-01,alice,7200,3600,0,2500000,0,0
"""
# On the simulated H100 node: 2.50 * (1 h busy * 1.0 + 1 h idle * 0.5); 0.30 * 2.5 MJ in kWh.
ALICE_GPU_EUR = 2.50 * (1.0 + 0.5)
ALICE_ENERGY_EUR = 0.30 * 2.5e6 / 3.6e6
# From sacct (no utilisation known: all at allocated_weight): bob 0.5 h of one A100,
# dave 1 h of two H100, frank 2 h of 16 GPUs of no type (the node's H100s), alice's job
# 4711 4 h of two (account ml).
BOB_EUR = 1.50 * 0.5 * 0.5
DAVE_EUR = 2.50 * 0.5 * 2
FRANK_EUR = 2.50 * 0.5 * 32
ALICE_JOB_EUR = 2.50 * 0.5 * 8


def config_with(tmp_path: Path, text: str) -> DaemonConfig:
    path = tmp_path / "daemon.toml"
    path.write_text(text, encoding="utf-8")
    return load_config_file(path)


def query(
    daemon: NodeDaemon, by: pb.UsageGrouping.ValueType = pb.USAGE_GROUPING_USER
) -> pb.QueryUsageResponse:
    request = pb.QueryUsageRequest(from_day="2024-05-01", to_day="2024-06-30", group_by=by)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        answer: pb.QueryUsageResponse = pb_grpc.NodeServiceStub(channel).QueryUsage(
            request, timeout=5
        )
    return answer


def known_usage(state: Path, tmp_path: Path) -> None:
    """May's metered usage (our CSV) and June's Slurm jobs into the node's store."""
    csv = tmp_path / "may.csv"
    csv.write_text(CSV, encoding="utf-8")
    store = UsageStore(state / USAGE_FILE)
    import_file(store, csv)
    import_sacct_file(store, SAMPLES / "header_slurm23.txt", dt.UTC)
    store.close()


@pytest.fixture
def priced(start_daemon: DaemonFactory, tmp_path: Path) -> NodeDaemon:
    state = tmp_path / "state"
    known_usage(state, tmp_path)
    usage = config_with(tmp_path, PRICES).usage
    return start_daemon(gpus=2, model="h100", state_dir=state, usage=usage)


def test_the_bill_of_a_known_usage(priced: NodeDaemon) -> None:
    answer = query(priced)
    assert answer.currency == "EUR"
    rows = {row.key: row for row in answer.rows}
    assert rows["alice"].gpu_cost == pytest.approx(ALICE_GPU_EUR + ALICE_JOB_EUR)
    assert rows["alice"].energy_cost == pytest.approx(ALICE_ENERGY_EUR)
    assert rows["alice"].cost == pytest.approx(ALICE_GPU_EUR + ALICE_JOB_EUR + ALICE_ENERGY_EUR)
    assert rows["bob"].cost == pytest.approx(BOB_EUR)
    assert rows["dave"].cost == pytest.approx(DAVE_EUR)
    assert rows["frank"].cost == pytest.approx(FRANK_EUR)
    assert rows["bob"].energy_cost == 0  # sacct measures no energy


def test_the_bill_by_account_and_by_day(priced: NodeDaemon) -> None:
    accounts = {row.key: row for row in query(priced, pb.USAGE_GROUPING_ACCOUNT).rows}
    # alice's 4711 was 2 GPUs for 4 h on June 1-2: all at allocated_weight on H100.
    assert accounts["ml"].cost == pytest.approx(ALICE_JOB_EUR)
    assert accounts["vision"].cost == pytest.approx(BOB_EUR + DAVE_EUR)
    assert accounts["physics"].cost == pytest.approx(FRANK_EUR)
    assert accounts["(no account)"].cost == pytest.approx(ALICE_GPU_EUR + ALICE_ENERGY_EUR)
    days = {row.key: row.cost for row in query(priced, pb.USAGE_GROUPING_DAY).rows}
    assert sum(days.values()) == pytest.approx(sum(a.cost for a in accounts.values()))
    assert days["2024-05-01"] == pytest.approx(ALICE_GPU_EUR + ALICE_ENERGY_EUR)


def test_without_prices_no_cost(start_daemon: DaemonFactory, tmp_path: Path) -> None:
    state = tmp_path / "state"
    known_usage(state, tmp_path)
    daemon = start_daemon(gpus=2, model="h100", state_dir=state)
    answer = query(daemon)
    assert answer.currency == ""
    assert answer.rows
    assert not any(row.HasField("cost") or row.HasField("gpu_cost") for row in answer.rows)


def test_prices_reload_live(priced: NodeDaemon, tmp_path: Path) -> None:
    cheaper = config_with(
        tmp_path, PRICES.replace("allocated_weight = 0.5", "allocated_weight = 0")
    )
    plan = plan_reload(priced.config, cheaper)
    assert plan.changes == ("usage prices changed",)
    priced.reconfigure(plan.config)
    rows = {row.key: row for row in query(priced).rows}
    assert rows["bob"].cost == 0  # no busy time known: nothing billed at weight 0
    assert rows["alice"].gpu_cost == pytest.approx(2.50 * 1.0)  # its busy hour only


def test_the_poll_interval_is_restart_only(tmp_path: Path) -> None:
    old = config_with(tmp_path, PRICES)
    new = config_with(tmp_path, "[usage]\nsacct_poll_interval_s = 60\n" + PRICES)
    plan = plan_reload(old, new)
    assert plan.needs_restart == ("usage.sacct_poll_interval_s",)
    assert plan.config.usage.sacct_poll_interval_s == 300


def test_the_cli_shows_cost_and_takes_the_account_grouping(
    priced: NodeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    node = str(priced.address)
    span = ["--from", "2024-05-01", "--to", "2024-06-30"]
    assert main(["usage", "--node", node, "--by", "account", *span]) == 0
    out = capsys.readouterr().out
    heading, *lines = out.splitlines()
    assert heading.split()[:1] == ["account"] and "cost EUR" in heading
    physics = next(line for line in lines if line.startswith("physics"))
    assert f"{FRANK_EUR:,.2f}" in physics.split()
    assert main(["usage", "--node", node, "--by", "user", "--csv", *span]) == 0
    csv_lines = capsys.readouterr().out.splitlines()
    header = csv_lines[0].split(",")
    frank = next(line.split(",") for line in csv_lines if ",frank," in line)
    assert float(frank[header.index("cost")]) == pytest.approx(FRANK_EUR)
    assert frank[header.index("currency")] == "EUR"
    assert frank[header.index("accounts")] == "physics"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[usage.prices]\ngpu_hour = 1.0\n', r"usage.prices.currency must be an ISO 4217 code"),
        ('[usage.prices]\ncurrency = "EUR"\nkwh = -1\n', r"usage.prices.kwh must be a number >= 0"),
        ('[usage.prices]\ncurrency = "EUR"\ngpu_hour = { H100 = "two" }\n',
         r'usage.prices.gpu_hour."H100" must be a number'),
        ('[usage.prices]\ncurrency = "EUR"\nper_hour = 1\n',
         r"unknown key\(s\) per_hour in \[usage.prices\]"),
        ("[usage]\nsacct_poll_interval_s = 5\n", r"usage.sacct_poll_interval_s must be 0 \(off\)"),
        ("[usage]\nprice = 1\n", r"unknown key\(s\) price in \[usage\]"),
    ],
)  # fmt: skip
def test_bad_prices_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_with(tmp_path, table)


def test_model_prices_match_by_name() -> None:
    prices = Prices("EUR", {"H100": 2.5, "H100 NVL": 3.0, "default": 1.0})
    assert prices.per_gpu_hour("NVIDIA H100 80GB HBM3") == 2.5
    assert prices.per_gpu_hour("NVIDIA H100 NVL") == 3.0  # the longest key that fits
    assert prices.per_gpu_hour("h100") == 2.5  # sacct's gres type
    assert prices.per_gpu_hour("NVIDIA L40S") == 1.0
    assert Prices("EUR", {"H100": 2.5}).per_gpu_hour("NVIDIA L40S") == 0.0


def test_daemon_toml_documents_the_usage_keys() -> None:
    keys = documented_keys(DAEMON_TOML.read_text(encoding="utf-8"))
    assert {f.name for f in fields(UsageSettings)} - {"prices"} <= keys["usage"]
    assert {f.name for f in fields(Prices)} <= keys["usage.prices"]

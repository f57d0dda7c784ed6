"""The Usage tab's bill: cost columns in the nodes' currency, the account grouping, the CSV,
against two real daemons with [usage.prices] and a known usage in their stores."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QDate, Qt

from console.connections.security import LinkSecurity
from console.fleet.model import NodeRecord
from console.fleet.updates import LinkState
from console.fleet.usage import MIXED, UsageRow
from console.main_window import MainWindow
from console.session import ConsoleSession
from node_daemon.usage.importer import import_sacct_file
from node_daemon.usage.settings import Prices, UsageSettings
from node_daemon.usage.store import USAGE_FILE, UsageStore
from tests.conftest import DaemonFactory

SAMPLES = Path(__file__).parents[1] / "node_daemon" / "sacct"
EUR = UsageSettings(0, Prices("EUR", {"H100": 2.5, "A100": 1.5, "default": 1.0},
                              allocated_weight=0.5))  # fmt: skip
# frank's 2 h of 16 GPUs (physics), at allocated_weight on the node's H100s, on each node.
PHYSICS_EUR = 2 * 2.50 * 0.5 * 32


def node_with_jobs(start_daemon: DaemonFactory, tmp_path: Path, name: str) -> str:
    state = tmp_path / name
    store = UsageStore(state / USAGE_FILE)
    import_sacct_file(store, SAMPLES / "header_slurm23.txt", dt.UTC)
    store.close()
    daemon = start_daemon(gpus=2, model="h100", hostname=name, state_dir=state, usage=EUR)
    return str(daemon.address)


@pytest.fixture
def window(qtbot, start_daemon: DaemonFactory, tmp_path: Path) -> Iterator[MainWindow]:  # type: ignore[no-untyped-def]
    targets = [node_with_jobs(start_daemon, tmp_path, f"bill-{i}") for i in (1, 2)]
    main = MainWindow(ConsoleSession(targets, security=LinkSecurity(), profile="test"))
    qtbot.addWidget(main)
    main.session.start()
    main.show()
    for target in targets:
        node: NodeRecord = main.session.fleet.node(target)
        qtbot.waitUntil(lambda n=node: n.state is LinkState.CONNECTED, timeout=15_000)
    yield main
    main.session.stop()


def refresh(qtbot, main: MainWindow, grouping: str) -> None:  # type: ignore[no-untyped-def]
    panel = main.reports.usage_panel
    panel.grouping.setCurrentText(grouping)
    for check, edit, day in ((panel.since_on, panel.since, QDate(2024, 6, 1)),
                             (panel.until_on, panel.until, QDate(2024, 6, 30))):  # fmt: skip
        check.setChecked(True)
        edit.setDate(day)
    with qtbot.waitSignal(main.reports.usage_model.refreshed, timeout=10_000):
        panel.refresh.click()


def header(main: MainWindow, column: int) -> str:
    role = Qt.ItemDataRole.DisplayRole
    return str(main.reports.usage_model.headerData(column, Qt.Orientation.Horizontal, role))


def test_the_usage_tab_bills_by_account_in_the_nodes_currency(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    refresh(qtbot, window, "account")
    model = window.reports.usage_model
    rows = {row.key: row for row in model.rows()}
    assert set(rows) == {"ml", "vision", "physics"}
    assert rows["physics"].cost == pytest.approx(PHYSICS_EUR)  # both nodes' jobs summed
    assert rows["physics"].currency == "EUR" and rows["physics"].accounts == ("physics",)
    headers = [header(window, c) for c in range(model.columnCount())]
    assert headers[0] == "account"
    assert {"cost EUR", "GPU cost EUR", "energy cost EUR", "accounts"} <= set(headers)
    cost_column = headers.index("cost EUR")
    shown = {model.index(r, 0).data(): model.index(r, cost_column).data()
             for r in range(model.rowCount())}  # fmt: skip
    assert shown["physics"] == f"{PHYSICS_EUR:,.2f}"
    out = tmp_path / "bill.csv"
    window.reports.usage_panel.choose_path = lambda: str(out)
    window.reports.usage_panel.export.click()
    lines = {line["account"]: line for line in csv.DictReader(io.StringIO(out.read_text()))}
    assert float(lines["physics"]["cost"]) == pytest.approx(PHYSICS_EUR)
    assert lines["physics"]["currency"] == "EUR"


def test_users_carry_their_accounts(qtbot, window: MainWindow) -> None:  # type: ignore[no-untyped-def]
    refresh(qtbot, window, "user")
    rows = {row.key: row for row in window.reports.usage_model.rows()}
    assert rows["bob"].accounts == ("vision",)
    assert rows["bob"].cost == pytest.approx(2 * 1.50 * 0.5 * 0.5)  # an A100 half-hour, twice


def test_costs_in_two_currencies_are_not_added() -> None:
    eur = UsageRow("ml", 3600, cost=2.0, gpu_cost=2.0, energy_cost=0.0, currency="EUR")
    usd = UsageRow("ml", 3600, cost=3.0, gpu_cost=3.0, energy_cost=0.0, currency="USD")
    unpriced = UsageRow("ml", 3600)
    assert eur.plus(unpriced).cost == 2.0 and eur.plus(unpriced).currency == "EUR"
    mixed = eur.plus(usd)
    assert (mixed.cost, mixed.currency, mixed.gpu_seconds) == (None, MIXED, 7200)
    assert unpriced.plus(unpriced).cost is None

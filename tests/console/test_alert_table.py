"""The alert table follows the alert book row by row (real Qt models and view, offscreen).

A reset per change re-sorted and re-filtered every alert and dropped the
selection; updates, new alerts and removed ones are applied in place, and the
rows always read as a fresh model's would.
"""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QItemSelectionModel
from pytestqt.qtbot import QtBot

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import AlertBook, EventRow
from console.fleet.model import FleetModel
from console.fleet.updates import AlertsUpdate
from console.qt.alert_model import ALERT_ROLE, COLUMNS, AlertTableModel
from console.views.alerts.alert_panel import AlertPanel
from gpufleet.v1.alert_severity import Severity

A, B = "127.0.0.1:1", "127.0.0.1:2"
T0 = 1_800_000_000_000


def alert(target: str, id_: str, **changes: object) -> AlertRow:
    row = AlertRow(
        target, id_, f"gpu_temp/{id_}", "gpu_temp", Severity.WARNING, True, 1, "GPU-1", None,
        80.0, "°C", f"{id_} temperature 80 °C", T0, T0, None, 1, "", None, None, "", "",
    )  # fmt: skip
    return dataclasses.replace(row, **changes)


def book_of(n: int) -> dict[str, list[AlertRow]]:
    """n alerts over two nodes, starts a second apart, every fifth critical."""
    by_node: dict[str, list[AlertRow]] = {A: [], B: []}
    for i in range(n):
        target = A if i % 2 else B
        severity = Severity.CRITICAL if i % 5 == 0 else Severity.WARNING
        by_node[target].append(
            alert(target, f"a-{i}", severity=severity, started_unix_ms=T0 + i * 1000)
        )
    return by_node


def put(fleet: FleetModel, by_node: dict[str, list[AlertRow]]) -> None:
    for target, rows in by_node.items():
        fleet.apply(AlertsUpdate(target, tuple(rows), "j", 0))


def fleet_with(by_node: dict[str, list[AlertRow]]) -> FleetModel:
    fleet = FleetModel(ring_capacity=16)
    for target in by_node:
        fleet.add_node(target)
    put(fleet, by_node)
    return fleet


def shown_panel(qtbot: QtBot, by_node: dict[str, list[AlertRow]]) -> tuple[FleetModel, AlertPanel]:
    """The fleet holding `by_node`'s alerts, and an alert panel over it, shown."""
    fleet = fleet_with(by_node)
    panel = AlertPanel(AlertTableModel(fleet))
    qtbot.addWidget(panel)
    panel.show()
    return fleet, panel


def table(model: AlertTableModel) -> list[list[str]]:
    return [
        [model.index(r, c).data() for c in range(model.columnCount())]
        for r in range(model.rowCount())
    ]


def test_changes_apply_in_place_and_read_as_a_fresh_table(qtbot) -> None:
    by_node = book_of(300)
    fleet, panel = shown_panel(qtbot, by_node)
    model = panel.model
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    inserted: list[int] = []
    model.rowsInserted.connect(lambda _p, first, last: inserted.extend(range(first, last + 1)))
    removed: list[int] = []
    model.rowsRemoved.connect(lambda _p, first, last: removed.extend(range(first, last + 1)))
    # Acknowledged, cleared (a new sort key: it moves), one gone, two new (one the newest).
    rows_a = by_node[A]
    rows_a[3] = dataclasses.replace(rows_a[3], acknowledged_by="erin", acknowledged_unix_ms=T0)
    rows_a[7] = dataclasses.replace(rows_a[7], firing=False, cleared_unix_ms=T0 + 5000)
    del rows_a[10]
    rows_a.append(alert(A, "a-new", severity=Severity.CRITICAL, started_unix_ms=T0 + 10**6))
    rows_a.append(alert(A, "a-old", started_unix_ms=T0 - 10**6))
    put(fleet, by_node)
    model.refresh()
    assert resets == []
    assert len(removed) == 2 and len(inserted) == 3  # a-15 moved (cleared), a-21 gone; 2 new
    assert table(model) == table(AlertTableModel(fleet))
    assert model.alert(0).id == "a-new"  # firing critical, newest: first


def test_a_selected_alert_stays_selected_and_its_buttons_follow_it(qtbot) -> None:
    by_node = book_of(40)
    fleet, panel = shown_panel(qtbot, by_node)
    model = panel.model
    chosen = by_node[A][2]
    row = next(r for r in range(panel.proxy.rowCount())
               if panel.proxy.index(r, 0).data(ALERT_ROLE).uid == chosen.uid)  # fmt: skip
    panel.table.selectionModel().select(
        panel.proxy.index(row, 0),
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    assert panel.acknowledge.isEnabled()
    # Another alert appears elsewhere in the fleet, then ours is acknowledged.
    by_node[B].append(alert(B, "b-new", started_unix_ms=T0 + 10**6))
    put(fleet, by_node)
    model.refresh()
    assert [a.uid for a in panel.selected_alerts()] == [chosen.uid]
    by_node[A][2] = dataclasses.replace(chosen, acknowledged_by="erin", acknowledged_unix_ms=T0)
    put(fleet, by_node)
    model.refresh()
    assert [a.acknowledged_by for a in panel.selected_alerts()] == ["erin"]
    assert not panel.acknowledge.isEnabled()


def test_a_large_change_resets_the_table(qtbot) -> None:
    fleet = fleet_with(book_of(10))
    model = AlertTableModel(fleet)
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    put(fleet, book_of(400))  # a node's first listing, say: hundreds at once
    model.refresh()
    assert resets == [True]
    assert table(model) == table(AlertTableModel(fleet))


def test_a_node_keeps_its_newest_cleared_alerts_only(qtbot) -> None:
    book = AlertBook(max_cleared=3)
    seq = 0

    def event(row: AlertRow) -> None:
        nonlocal seq
        seq += 1
        kind = "alert_raised" if row.firing else "alert_cleared"
        book.add_event(
            EventRow(row.target, seq, T0 + seq, kind, 1, row.summary, "", row, False), "j"
        )

    for i in range(6):
        event(alert(A, f"a-{i}"))
    event(alert(B, "b-0", firing=False, cleared_unix_ms=T0))
    for i in range(5):  # a-0 cleared first ... a-4 last; a-5 still firing
        event(alert(A, f"a-{i}", firing=False, cleared_unix_ms=T0 + i))
    held = {a.id for a in book.alerts()}
    assert held == {"a-2", "a-3", "a-4", "a-5", "b-0"}
    event(alert(A, "a-2"))  # fires again: no longer counted as cleared
    event(alert(A, "a-5", firing=False, cleared_unix_ms=T0 + 9))
    assert {a.id for a in book.alerts()} == {"a-2", "a-3", "a-4", "a-5", "b-0"}
    # A node's listing (at connect) counts too: its cleared alerts over the cap are dropped.
    listing = [alert(B, f"b-{i}", firing=False, cleared_unix_ms=T0 + i) for i in range(5)]
    book.replace_node_alerts(B, listing, "j", 0)
    assert {a.id for a in book.alerts() if a.target == B} == {"b-2", "b-3", "b-4"}


def test_the_consoles_own_cleared_alerts_are_bounded_too(qtbot) -> None:
    book = AlertBook(max_cleared=2)
    for i in range(4):  # one not-responding alert per outage, each raised and cleared
        for firing in (True, False):
            row = alert(A, f"local-{i}", firing=firing, cleared_unix_ms=None if firing else T0 + i)
            book.add_local_event(
                EventRow(A, 0, T0 + i, "alert_cleared", None, row.summary, "", row, False)
            )
    assert {a.id for a in book.alerts()} == {"local-2", "local-3"}
    book.replace_node_alerts(A, [alert(A, "a-1")], "j", 0)  # a listing keeps the local ones
    assert {a.id for a in book.alerts()} == {"local-2", "local-3", "a-1"}


def test_columns_are_narrow_then_fitted_to_the_first_alerts_once(qtbot) -> None:
    """Nine columns of Qt's 100 px wanted a horizontal scroll bar beside the GPU detail on a
    1366x768 screen; the first alerts fit them, and a person's widths stay after that."""
    fleet = fleet_with({A: []})
    model = AlertTableModel(fleet)
    panel = AlertPanel(model)
    qtbot.addWidget(panel)
    panel.resize(840, 300)
    panel.show()
    header = panel.table.horizontalHeader()
    last = model.columnCount() - 1
    assert all(header.sectionSize(c) <= 72 for c in range(last))
    qtbot.waitUntil(lambda: not panel.table.horizontalScrollBar().isVisible(), timeout=3000)
    put(fleet, {A: [alert(A, "a-1", rule="gpu_temperature_critical")]})
    model.refresh()
    rule = COLUMNS.index("Rule")
    assert header.sectionSize(rule) > 72  # the rule's name whole
    header.resizeSection(rule, 90)  # a person narrows it
    put(fleet, {A: [alert(A, "a-1"), alert(A, "a-2", rule="x" * 60)]})
    model.refresh()
    assert header.sectionSize(rule) == 90

"""The console's replay and `gpufleet status --at TIME --json` agree at one moment (#30).

test_replay.py's incident (a real daemon heats GPU 1 to a critical alert that clears as
it cools, its history on disk). For a moment before, during and after the alert, the
console is moved there by typing the moment, and the terminal commands run as real
processes at the same moment: every reading the console's tiles show, each GPU's health
state and drain, and the alerts firing (with their severity and GPU) are what
`status --at --json` and `alerts --at --json` print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.fleet import columns
from console.fleet.columns import COLUMNS, value
from console.main_window import MainWindow
from console.qt import roles
from gpufleet.v1.alert_severity import Severity
from tests.console.test_replay import (  # noqa: F401
    Incident,
    firing_ids,
    incident,
    shown_at,
    type_moment,
    window,
)
from tests.console.test_terminal import gpufleet, home  # noqa: F401
from tests.console.test_terminal_moment import local_iso

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)


def printed(home: Path, *argv: str) -> dict[str, Any]:  # noqa: F811
    code, out, err = gpufleet(home, *argv, "--json")
    assert code in (0, 1), err  # 1: a critical alert fired at the moment
    result: dict[str, Any] = json.loads(out)
    return result


def test_status_at_agrees_with_the_console_at_the_same_moment(
    qtbot,  # type: ignore[no-untyped-def]
    window: MainWindow,  # noqa: F811
    incident: Incident,  # noqa: F811
    home: Path,  # noqa: F811
) -> None:
    target, items = incident.target, window.session.items
    for name, at_ms in (("before", incident.before), ("during", incident.during),
                        ("after", incident.after)):  # fmt: skip
        type_moment(qtbot, window, at_ms)
        shown_at(qtbot, window, target, at_ms)
        status = printed(home, "status", "--node", target, "--at", local_iso(at_ms))
        assert status["at_unix_ms"] == at_ms, name
        (node,) = status["nodes"]
        assert [r["gpu"] for r in node["readings"]] == [0, 1], name
        for reading in node["readings"]:
            tile = items.gpu_index(target, reading["gpu"])
            row = tile.data(roles.METRIC_ROLE)
            for metric in COLUMNS:  # every reading the console keeps for a tile
                shown = value(row, metric)
                said = reading[metric.field]
                where = (name, reading["gpu"], metric.field)
                if said is None:
                    assert shown is None, where
                else:
                    # the ring keeps the shown unit (GiB for memory) as float32
                    expected = said * columns.shown(metric).scale
                    assert shown == pytest.approx(expected, rel=1e-6), where
            condition = tile.data(roles.CONDITION_ROLE)
            assert condition is not None, (name, reading["gpu"])
            assert condition.state.name.lower() == reading["health_state"], name
            assert condition.drained == reading["drained"], name

        alerts = printed(home, "alerts", "--node", target, "--at", local_iso(at_ms))
        firing = {a["id"]: a for a in alerts["alerts"]}
        assert set(firing) == firing_ids(window), name
        assert (incident.alert_id in firing) == (name == "during"), name
        counts = {s: 0 for s in node["alerts"]}
        for alert in firing.values():
            counts[alert["severity"]] += 1
        assert counts == node["alerts"], name  # status's counts are the alerts listed
        for gpu in (0, 1):  # each tile's alert disc: the worst alert then on that GPU
            disc = items.gpu_index(target, gpu).data(roles.ALERT_ROLE)
            said = [Severity[a["severity"].upper()] for a in firing.values() if a["gpu"] == gpu]
            assert disc is max(said, default=None), (name, gpu, said)

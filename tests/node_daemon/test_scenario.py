from __future__ import annotations

from pathlib import Path

import pytest

from node_daemon.backends.simulated import ScenarioError, load_scenario


def test_demo_scenario_loads_in_time_order() -> None:
    scenario = load_scenario(Path(__file__).parents[2] / "resources/scenarios/demo.toml")
    kinds = [e.kind for e in scenario.events]
    assert {"overheat", "leak", "ecc", "lost", "recover"} <= set(kinds)
    assert [e.at_s for e in scenario.events] == sorted(e.at_s for e in scenario.events)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[event]]\nat = 1\nkind = "melt"', "kind must be one of"),
        ('[[event]]\nat = -1\nkind = "lost"', "'at' must be a number"),
        ('[[event]]\nat = 1\nkind = "load"', "needs a number 'util'"),
        ("[[event]\n", "not valid TOML"),
    ],
)
def test_bad_scenario_names_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(path)
    assert str(path) in str(info.value)

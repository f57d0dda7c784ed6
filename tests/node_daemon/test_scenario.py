from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufleet.v1.gpu_metrics import ECC_CORRECTED_TOTAL, PCIE_REPLAY_TOTAL, ROW_REMAP_PENDING
from node_daemon.backends.readings import GpuHealth
from node_daemon.backends.simulated import ScenarioError, SimulatedBackend, load_scenario
from node_daemon.backends.simulated.scenario import scenario_event


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


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_every_new_kind_loads_with_its_keys(tmp_path: Path) -> None:
    text = "\n".join(
        f'[[event]]\nat = {i}\ngpu = 1\nkind = "{kind}"\n{keys}'
        for i, (kind, keys) in enumerate([
            ("fan_fail", "minutes = 15"), ("ecc_storm", "rate = 30"), ("remap_pending", ""),
            ("remap_failure", ""), ("pcie_replay_storm", "rate = 200"), ("nvlink_down", "link = 4"),
            ("nvlink_errors", "rate = 5"), ("stutter", "seconds = 90"),
            ("leak", "rate_mib_per_min = 100\nbusy = true"), ("weight_load", "gib = 20"),
            ("alloc_free", "gib = 6\nperiod_s = 120"), ("recovery_action", "value = 2"),
            ("reset", ""), ("xid", "xid = 79"),
        ])
    )  # fmt: skip
    events = {e.kind: e for e in load_scenario(write(tmp_path, text)).events}
    assert events["fan_fail"].get("minutes") == 15.0
    assert events["leak"].get("rate_mib_per_min") == 100.0 and events["leak"].get("busy") == 1.0
    assert events["alloc_free"].get("period_s") == 120.0 and events["alloc_free"].get("gib") == 6.0
    assert events["nvlink_down"].value == 4.0 and events["recovery_action"].get("value") == 2.0
    assert events["remap_pending"].get("rows") == 1.0  # the default
    assert events["stutter"].get("seconds") == 90.0 and events["xid"].value == 79.0


def test_defaults_apply_when_a_key_is_left_out() -> None:
    leak = scenario_event(5, 0, "leak")
    assert leak.get("rate_mib_per_min") == 2880.0 and leak.get("busy") == 0.0
    assert scenario_event(5, 0, "ecc_storm").get("rate") == 20.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('kind = "ecc_storm"\nrate = 0', "'rate' of 'ecc_storm' must be > 0"),
        ('kind = "pcie_replay_storm"\nrate = -5', "'rate' of 'pcie_replay_storm' must be > 0"),
        ('kind = "nvlink_down"', "kind 'nvlink_down' needs a number 'link'"),
        ('kind = "nvlink_down"\nlink = 18', "'link' of 'nvlink_down' must be >= 0 and <= 17"),
        ('kind = "nvlink_down"\nlink = 1.5', "needs a whole number 'link'"),
        ('kind = "nvlink_errors"\nrate = "lots"', "needs a number 'rate', got 'lots'"),
        ('kind = "leak"\nbusy = 1', "'busy' of 'leak' must be true or false"),
        ('kind = "leak"\nrate = 100', "kind 'leak' takes 'rate_mib_per_min', 'busy', not ['rate']"),
        ('kind = "weight_load"', "kind 'weight_load' needs a number 'gib'"),
        ('kind = "weight_load"\ngib = 0', "'gib' of 'weight_load' must be > 0"),
        ('kind = "alloc_free"\nperiod_s = 1', "'period_s' of 'alloc_free' must be >= 10"),
        (
            'kind = "recovery_action"\nvalue = 5',
            "'value' of 'recovery_action' must be >= 0 and <= 4",
        ),
        ('kind = "fan_fail"\nminutes = 0', "'minutes' of 'fan_fail' must be > 0"),
        ('kind = "stutter"\nseconds = 0', "'seconds' of 'stutter' must be >= 1"),
        ('kind = "reset"\ncount = 1', "kind 'reset' takes no other keys, not ['count']"),
        ('kind = "remap_pending"\nrows = 0', "'rows' of 'remap_pending' must be >= 1"),
    ],
)
def test_bad_values_of_new_kinds_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, f"[[event]]\nat = 3\ngpu = 2\n{text}\n")
    with pytest.raises(ScenarioError, match=re.escape(message)) as info:
        load_scenario(path)
    assert str(path) in str(info.value) and "event 1" in str(info.value)


def test_events_made_in_code_are_checked_as_files_are() -> None:
    with pytest.raises(ScenarioError, match=re.escape("'rate' of 'ecc_storm' must be > 0")):
        scenario_event(10, 0, "ecc_storm", rate=0)
    assert scenario_event(10, 0, "nvlink_down", link=2).value == 2.0


# The example in docs/health.md ("Trying it in the simulator"), kept loadable here.
HEALTH_EXAMPLE = """
[[event]]
at = 30
gpu = 0
kind = "fan_fail"          # cooling fails over 10 min: fan to 100 %, temperature rising
minutes = 10

[[event]]
at = 30
gpu = 1
kind = "ecc_storm"         # 40 correctable ECC errors a minute: an ECC storm
rate = 40

[[event]]
at = 60
gpu = 2
kind = "remap_pending"     # a row remapped, waiting for a GPU reset: needs reset

[[event]]
at = 60
gpu = 3
kind = "stutter"           # readings fail now and then for 2 min, then Xid 79
seconds = 120

[[event]]
at = 90
gpu = 4
kind = "nvlink_down"       # NVLink 3 goes down
link = 3

[[event]]
at = 90
gpu = 5
kind = "leak"              # 100 MiB/min on a busy GPU
rate_mib_per_min = 100
busy = true

[[event]]
at = 90
gpu = 6
kind = "weight_load"       # a model server loads 20 GiB of weights: not a leak
gib = 20

[[event]]
at = 120
gpu = 7
kind = "pcie_replay_storm" # PCIe replays 200 a minute
rate = 200

[[event]]
at = 600
gpu = 2
kind = "reset"             # the GPU reset: the pending remap is done
"""


def test_the_health_docs_example_loads_and_plays(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, HEALTH_EXAMPLE))
    assert len(scenario.events) == 9
    backend = SimulatedBackend(gpu_count=8, model="h100", scenario=scenario)
    backend.open()
    readings = [backend.advance(10.0) for _ in range(62)]  # to 620 s, past the reset
    last = readings[-1]
    assert last[3].health is GpuHealth.LOST and last[4].nvlink_down_links == (3,)
    assert last[1][ECC_CORRECTED_TOTAL] >= 40 * 4 and last[7][PCIE_REPLAY_TOTAL] >= 200 * 2
    assert readings[10][2][ROW_REMAP_PENDING] == 1 and last[2][ROW_REMAP_PENDING] == 0

"""The fleet model without Qt: rings, gaps, de-duplication, structure changes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.identity import Identity
from console.fleet.model import Change, FleetModel
from console.fleet.ring import SampleRing
from console.fleet.updates import (
    IdentityUpdate,
    InventoryUpdate,
    LinkState,
    LinkUpdate,
    NodeInfo,
    SamplesUpdate,
)
from gpufleet.policy import Role
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from tests.console.hand_fed import gpus_of, simulated_node

TARGET = "127.0.0.1:1"


def info(gpus: int = 2, uuid_prefix: str = "GPU-a") -> NodeInfo:
    alike = gpus_of(gpus, uuid_prefix, memory_total_bytes=None, power_limit_w=None)
    return simulated_node("node", alike)


def samples(time_s: float, temp: float, gpus: int = 2) -> SamplesUpdate:
    rows = np.full((gpus, COLUMN_COUNT), np.nan, dtype=np.float32)
    rows[:, column(TEMP_GPU_C)] = temp
    return SamplesUpdate(TARGET, time_s, rows, (), replayed=False)


def connected_fleet() -> FleetModel:
    fleet = FleetModel(ring_capacity=8)
    fleet.add_node(TARGET)
    fleet.apply(InventoryUpdate(TARGET, info()))
    return fleet


def test_ring_orders_oldest_first_and_overwrites() -> None:
    ring = SampleRing(4, 1, COLUMN_COUNT)
    for t in range(1, 7):
        ring.append(float(t), np.full((1, COLUMN_COUNT), t, dtype=np.float32), 1.0)
    times, temps = ring.series(0, column(TEMP_GPU_C))
    assert times.tolist() == [3.0, 4.0, 5.0, 6.0]
    assert temps.tolist() == [3.0, 4.0, 5.0, 6.0]


def test_gap_in_time_becomes_nan_row() -> None:
    fleet = connected_fleet()
    for t, temp in ((1.0, 40.0), (2.0, 41.0), (10.0, 50.0)):
        fleet.apply(samples(t, temp))
    times, temps = fleet.node(TARGET).ring.series(0, column(TEMP_GPU_C))
    assert times.tolist() == [1.0, 2.0, 3.0, 10.0]
    assert temps[:2].tolist() == [40.0, 41.0] and math.isnan(temps[2]) and temps[3] == 50.0


def test_duplicate_or_older_samples_are_dropped() -> None:
    fleet = connected_fleet()
    assert fleet.apply(samples(5.0, 40.0)) is Change.DATA
    assert fleet.apply(samples(5.0, 99.0)) is Change.NONE
    assert fleet.apply(samples(4.0, 99.0)) is Change.NONE
    assert len(fleet.node(TARGET).ring) == 1


def test_reconnect_with_same_gpus_keeps_history() -> None:
    fleet = connected_fleet()
    fleet.apply(samples(1.0, 40.0))
    assert fleet.apply(InventoryUpdate(TARGET, info())) is Change.DATA
    assert len(fleet.node(TARGET).ring) == 1


def test_different_gpus_restructure_the_node() -> None:
    fleet = connected_fleet()
    fleet.apply(samples(1.0, 40.0))
    assert (
        fleet.apply(InventoryUpdate(TARGET, info(gpus=3, uuid_prefix="GPU-b"))) is Change.STRUCTURE
    )
    assert fleet.node(TARGET).gpu_count == 3 and len(fleet.node(TARGET).ring) == 0


def test_samples_decoded_for_old_inventory_are_ignored() -> None:
    fleet = connected_fleet()
    assert fleet.apply(samples(1.0, 40.0, gpus=3)) is Change.NONE


def test_apply_all_reports_strongest_change_per_node() -> None:
    fleet = FleetModel()
    fleet.add_node(TARGET)
    changes = fleet.apply_all([
        LinkUpdate(TARGET, LinkState.CONNECTED),
        InventoryUpdate(TARGET, info()),
        samples(1.0, 40.0),
        LinkUpdate("unknown:1", LinkState.CONNECTED),
    ])  # fmt: skip
    assert changes == {TARGET: Change.STRUCTURE}
    assert fleet.node(TARGET).state is LinkState.CONNECTED


def test_an_unchanged_inventory_or_identity_keeps_the_object_views_compare_by() -> None:
    fleet = connected_fleet()
    held = fleet.node(TARGET).info
    assert fleet.apply(InventoryUpdate(TARGET, info())) is Change.DATA  # equal, a new object
    assert fleet.node(TARGET).info is held
    drained = dataclasses.replace(info(), slurm_state="drained")
    fleet.apply(InventoryUpdate(TARGET, drained))
    assert fleet.node(TARGET).info is drained
    who = Identity("erin", Role.OPERATOR, ("ml",))
    fleet.apply(IdentityUpdate(TARGET, who))
    fleet.apply(IdentityUpdate(TARGET, dataclasses.replace(who)))
    assert fleet.node(TARGET).identity is who
    fleet.apply(IdentityUpdate(TARGET, dataclasses.replace(who, role=Role.VIEWER)))
    assert fleet.node(TARGET).identity.role is Role.VIEWER  # type: ignore[union-attr]

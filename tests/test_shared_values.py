"""The shared value types the daemon and the console both use agree with the contract."""

from __future__ import annotations

from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity


def test_severities_are_the_wire_enums_numbers() -> None:
    wire = {name.removeprefix("SEVERITY_"): number for name, number in pb.Severity.items()}
    assert {s.name: int(s) for s in Severity} == {
        name: number for name, number in wire.items() if name != "UNSPECIFIED"
    }
    assert Severity.WARNING.label == "warning"
    assert max(Severity.INFO, Severity.CRITICAL) is Severity.CRITICAL


def test_workload_states_are_the_wire_enums_states() -> None:
    wire = {name.removeprefix("WORKLOAD_STATE_") for name, _ in pb.WorkloadState.items()}
    assert {s.name for s in WorkloadState} == wire - {"UNSPECIFIED"}

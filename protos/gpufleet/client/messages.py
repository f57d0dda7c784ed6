"""The gpufleet.v1 messages the calls answer with (and the few a request nests), by name.

Code that talks to nodes through the client reads answers as these messages;
it names their types from here, so it depends on the client, not on the
generated module's layout.
"""

from __future__ import annotations

from gpufleet.v1.node_pb2 import (
    Alert,
    FaultIncident,
    GpuCondition,
    GpuFaultRecord,
    GpuSample,
    GpuStateAt,
    HealthReason,
    Inventory,
    NodeStateAt,
    Reservation,
    SampleBatch,
    Silence,
    SilenceMatcher,
    SubmitWorkloadRequest,
    Workload,
)

__all__ = [
    "Alert",
    "FaultIncident",
    "GpuCondition",
    "GpuFaultRecord",
    "GpuSample",
    "GpuStateAt",
    "HealthReason",
    "Inventory",
    "NodeStateAt",
    "Reservation",
    "SampleBatch",
    "Silence",
    "SilenceMatcher",
    "SubmitWorkloadRequest",
    "Workload",
]

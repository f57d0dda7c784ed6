"""Immutable messages from the connection layer to the fleet model.

The network thread builds them (decoding protobuf there, off the GUI thread);
the GUI thread applies them to the FleetModel once per frame.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.health import NO_SIGNALS, GpuCondition, HealthSignals, MigInstanceRow
from console.fleet.history_range import TierReach
from console.fleet.identity import Identity
from console.fleet.process_row import ProcessRow
from console.fleet.silences import SilenceRow
from gpufleet.v1.alert_severity import Severity


class LinkState(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    UNREACHABLE = "unreachable"
    # The node answered, and refused us: UNAUTHENTICATED or PERMISSION_DENIED.
    DENIED = "denied"


@dataclass(frozen=True)
class GpuSnapshot:
    """The latest state of one GPU that is not a number: health, error, processes.

    Its numbers are in the ring (NodeRecord.value, SampleRing.newest), decoded
    from the same sample in the same pass.
    """

    index: int
    health: str
    error: str
    processes: tuple[ProcessRow, ...]
    # The node's judgement of the GPU (None: a daemon that judges no health).
    condition: GpuCondition | None = None
    signals: HealthSignals = NO_SIGNALS
    mig_instances: tuple[MigInstanceRow, ...] = ()


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    name: str
    serial: str | None
    pci_bus_id: str | None
    memory_total_bytes: int | None
    power_limit_w: float | None
    vbios_version: str | None = None
    mig_enabled: bool = False
    # power.default_limit: where self-healing's power cap returns to.
    power_limit_default_w: float | None = None


@dataclass(frozen=True)
class AlertLine:
    """One threshold of the node's own alert rules (Inventory.alert_thresholds)."""

    metric: str  # catalogue field, e.g. "temp_gpu_c"
    rule: str  # e.g. "gpu_temp"
    severity: Severity
    value: float  # in the metric's wire unit; the alert raises at or above it


@dataclass(frozen=True)
class NodeInfo:
    hostname: str
    driver_version: str | None
    cuda_version: str | None
    daemon_version: str
    backend: str
    backend_ok: bool
    backend_detail: str
    sample_interval_s: float
    gpus: tuple[GpuInfo, ...]
    # Slurm's view of the node where it runs: state (e.g. "drained") and reason.
    slurm_state: str | None = None
    slurm_reason: str | None = None
    # The node's alert lines and on-disk history tiers; empty from a daemon that does not say.
    alert_thresholds: tuple[AlertLine, ...] = ()
    history_tiers: tuple[TierReach, ...] = ()


@dataclass(frozen=True)
class LinkUpdate:
    target: str
    state: LinkState
    detail: str = ""


@dataclass(frozen=True)
class IdentityUpdate:
    """Who we are on the node (WhoAmI after each connect); None: the node cannot say."""

    target: str
    identity: Identity | None


@dataclass(frozen=True)
class QueryResult:
    """The answer to a query (audit log, usage), decoded off the GUI thread.

    `query_id` tells the asker which of its queries this answers; `payload` is
    what the query's decoder made of the reply (None when not ok).
    """

    target: str
    what: str
    query_id: int
    ok: bool
    message: str
    payload: object = None


@dataclass(frozen=True)
class InventoryUpdate:
    target: str
    info: NodeInfo


@dataclass(frozen=True)
class SamplesUpdate:
    """One tick of a node: its ring rows (gpus, columns; console.fleet.columns) and snapshots."""

    target: str
    time_s: float
    rows: npt.NDArray[np.float32]
    gpus: tuple[GpuSnapshot, ...]
    replayed: bool


@dataclass(frozen=True)
class AlertsUpdate:
    """A node's alert listing (on every connect): it replaces what we held."""

    target: str
    alerts: tuple[AlertRow, ...]
    journal_id: str
    last_seq: int


@dataclass(frozen=True)
class EventUpdate:
    target: str
    event: EventRow
    journal_id: str


@dataclass(frozen=True)
class QueueUpdate:
    """A node's queued and running workloads, polled while some wait: their wait reasons."""

    target: str
    workloads: tuple[WorkloadRow, ...]


@dataclass(frozen=True)
class ControlUpdate:
    """A node's reservations and workloads (on every connect): they replace what we held."""

    target: str
    reservations: tuple[ReservationRow, ...]
    workloads: tuple[WorkloadRow, ...]


@dataclass(frozen=True)
class KillReport:
    """How a kill went: "terminated", "killed", "already_gone" or "unkillable"."""

    outcome: str
    detail: str

    @property
    def ended(self) -> bool:
        return self.outcome in ("terminated", "killed", "already_gone")


@dataclass(frozen=True)
class WorkloadOutputText:
    target: str
    workload_id: str
    text: str  # the tail of the output, decoded leniently
    total_bytes: int


# What an answer carries besides ok and message, by request.
Payload = (
    AlertRow
    | ReservationRow
    | WorkloadRow
    | SilenceRow
    | KillReport
    | WorkloadOutputText
    | GpuCondition
    | None
)


@dataclass(frozen=True)
class CommandResult:
    """The answer to something a person asked a node to do (acknowledge, reserve, kill...)."""

    target: str
    what: str  # e.g. "acknowledge a-12"
    ok: bool
    message: str
    alert: AlertRow | None = None
    # The decoded reply of any other request (reservation, workload, kill report, output).
    payload: Payload = None


Update = (
    LinkUpdate
    | InventoryUpdate
    | SamplesUpdate
    | AlertsUpdate
    | EventUpdate
    | ControlUpdate
    | QueueUpdate
    | CommandResult
    | IdentityUpdate
    | QueryResult
)

"""The fleet's inventory, one row per GPU, and the values that drift from the majority.

A small driver or CUDA difference between nodes can change training results, so
the console points out every value that differs from what most of the fleet
runs. Plain Python: the Qt table model and the CSV export both read from here.
"""

from __future__ import annotations

import csv
import functools
import io
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from console.fleet.model import FleetModel, NodeRecord
from console.fleet.updates import GpuInfo, NodeInfo


@dataclass(frozen=True)
class InventoryRow:
    """One GPU and the node it sits in. None: the node did not report the value."""

    node: str
    target: str
    gpu_index: int
    model: str
    uuid: str
    serial: str | None
    pci_bus_id: str | None
    vbios_version: str | None
    driver_version: str | None
    cuda_version: str | None
    daemon_version: str | None
    backend: str
    # Who we are on the node (WhoAmI): "otto (operator) by token"; None until known.
    signed_in_as: str | None = None
    # When that credential stops working there: "2026-12-01 22:17", "does not expire".
    credential_expires: str | None = None


@dataclass(frozen=True)
class Column:
    key: str  # the InventoryRow attribute
    header: str


COLUMNS: tuple[Column, ...] = (
    Column("node", "Node"),
    Column("target", "Target"),
    Column("gpu_index", "GPU"),
    Column("model", "Model"),
    Column("uuid", "UUID"),
    Column("serial", "Serial"),
    Column("pci_bus_id", "PCI bus ID"),
    Column("vbios_version", "VBIOS"),
    Column("driver_version", "Driver"),
    Column("cuda_version", "CUDA"),
    Column("daemon_version", "Daemon"),
    Column("backend", "Backend"),
    Column("signed_in_as", "Signed in as"),
    Column("credential_expires", "Credential expires"),
)
# Node-wide values, compared node against node (a node's GPUs share them).
NODE_DRIFT_KEYS = ("driver_version", "cuda_version", "daemon_version")
VBIOS_KEY = "vbios_version"
DRIFT_HEADER = "Differs from majority"

DriftKey = tuple[int, str]  # (row number in the rows given, column key)


@dataclass(frozen=True)
class Drift:
    """Why a value is flagged: what the majority runs instead, and how many run it."""

    majority: str
    count: int
    total: int
    unit: str  # what was counted: "nodes", or "GPUs" for VBIOS
    scope: str  # whose majority, e.g. "the fleet's majority"

    def describe(self) -> str:
        share = f"{self.count} of {self.total} {self.unit}"
        return f"differs from {self.scope}: {self.majority} on {share}"


def inventory_rows(fleet: FleetModel) -> list[InventoryRow]:
    """One row per GPU of every node that has sent its inventory, in fleet then GPU order."""
    return [row for node in fleet for row in node_rows(node)]


def node_rows(node: NodeRecord) -> list[InventoryRow]:
    """One node's rows (none before its inventory came)."""
    info = node.info
    return [_row(node, info, gpu) for gpu in info.gpus] if info else []


def _row(node: NodeRecord, info: NodeInfo, gpu: GpuInfo) -> InventoryRow:
    return InventoryRow(
        node=node.name,
        target=node.target,
        gpu_index=gpu.index,
        model=gpu.name,
        uuid=gpu.uuid,
        serial=gpu.serial,
        pci_bus_id=gpu.pci_bus_id,
        # GpuInfo gained its VBIOS late; without the field, it reads as not reported.
        vbios_version=getattr(gpu, "vbios_version", None),
        driver_version=info.driver_version,
        cuda_version=info.cuda_version,
        daemon_version=info.daemon_version or None,
        backend=info.backend,
        signed_in_as=node.identity.describe() if node.identity else None,
        credential_expires=_expires_text(node),
    )


def _expires_text(node: NodeRecord) -> str | None:
    """An absolute local time: the table does not age, and a CSV keeps its meaning."""
    if node.identity is None:
        return None
    expires = node.identity.expires_unix_ms
    if expires is None:
        return "does not expire"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(expires / 1000))


def cell_text(row: InventoryRow, key: str) -> str:
    """The text shown in the table and written to CSV: empty when not reported."""
    value = getattr(row, key)
    return "" if value is None else str(value)


@functools.lru_cache(maxsize=4096)  # a sort asks each cell many times; texts repeat
def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sorts "node-2" before "node-10" and "12.4" before "12.10"."""
    parts = re.split(r"(\d+)", text)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.casefold()) for p in parts if p)


def find_drift(rows: Sequence[InventoryRow]) -> dict[DriftKey, Drift]:
    """The cells whose value differs from the majority, keyed by (row number, column key).

    Driver, CUDA and daemon versions are compared across nodes, one vote per node
    (a node with eight GPUs does not outvote one with two). The VBIOS is compared
    among GPUs of the same model, one vote per GPU: different models legitimately
    run different VBIOS versions.

    The majority is the most common reported value. When two or more values tie
    for most common there is no majority, and nothing is flagged in that column
    (or, for VBIOS, in that model). Values a node did not report (None) are never
    drift and do not vote.
    """
    drift: dict[DriftKey, Drift] = {}
    for key in NODE_DRIFT_KEYS:
        drift.update(_node_drift(rows, key))
    drift.update(_vbios_drift(rows))
    return drift


def _node_drift(rows: Sequence[InventoryRow], key: str) -> dict[DriftKey, Drift]:
    per_node = {row.target: cell_text(row, key) for row in rows}
    votes = Counter(v for v in per_node.values() if v)
    return _flag(rows, range(len(rows)), key, votes, "nodes", "the fleet's majority")


def _vbios_drift(rows: Sequence[InventoryRow]) -> dict[DriftKey, Drift]:
    by_model: defaultdict[str, list[int]] = defaultdict(list)
    for number, row in enumerate(rows):
        by_model[row.model].append(number)
    drift: dict[DriftKey, Drift] = {}
    for model, numbers in by_model.items():
        votes = Counter(v for n in numbers if (v := cell_text(rows[n], VBIOS_KEY)))
        scope = f"the majority of {model} GPUs"
        drift.update(_flag(rows, numbers, VBIOS_KEY, votes, "GPUs", scope))
    return drift


def _flag(
    rows: Sequence[InventoryRow],
    numbers: Iterable[int],
    key: str,
    votes: Counter[str],
    unit: str,
    scope: str,
) -> dict[DriftKey, Drift]:
    majority = _majority(votes)
    if majority is None:
        return {}
    reason = Drift(majority, votes[majority], votes.total(), unit, scope)
    return {
        (n, key): reason for n in numbers if (text := cell_text(rows[n], key)) and text != majority
    }


def _majority(votes: Counter[str]) -> str | None:
    """The most common value, or None when there are no votes or the top is a tie."""
    top = votes.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def drift_count(rows: Sequence[InventoryRow], drift: dict[DriftKey, Drift]) -> int:
    """Differing values as a person counts them: a node's driver once, not once per GPU."""
    return len({_value_identity(rows[n], key) for n, key in drift})


def _value_identity(row: InventoryRow, key: str) -> tuple[str, int | None, str]:
    return (row.target, None if key in NODE_DRIFT_KEYS else row.gpu_index, key)


def drift_summary(count: int) -> str:
    if count == 0:
        return "no drift"
    values = "1 value differs" if count == 1 else f"{count} values differ"
    return f"{values} from the fleet's majority"


def inventory_csv(rows: Sequence[InventoryRow]) -> str:
    """The export: a header, then one line per GPU with the table's text.

    The last column names the columns whose value differs from the majority
    (e.g. "Driver; CUDA"), so the highlighting survives in a spreadsheet.
    """
    drift = find_drift(rows)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([c.header for c in COLUMNS] + [DRIFT_HEADER])
    for number, row in enumerate(rows):
        cells = [cell_text(row, c.key) for c in COLUMNS]
        flagged = "; ".join(c.header for c in COLUMNS if (number, c.key) in drift)
        writer.writerow([*cells, flagged])
    return out.getvalue()

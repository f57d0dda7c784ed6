"""What the console's drags carry: a queued workload, a user or team, a GPU process, a node.

Each is JSON under its own MIME type (plus plain text, so a drop into a text
editor says what was dragged). A drag names things (node, ids, pid and start
time); the drop target looks the current state up in the fleet model.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QMimeData

from console.fleet.control import WorkloadRow
from console.fleet.control_requests import KillTarget
from console.fleet.process_row import ProcessRow

WORKLOAD_MIME = "application/x-gpufleet-workload"
HOLDER_MIME = "application/x-gpufleet-holder"
PROCESS_MIME = "application/x-gpufleet-process"
NODE_MIME = "application/x-gpufleet-node"  # a node's block header, dragged (onto the drain zone)


def _pack(mime_type: str, payload: dict[str, Any], text: str) -> QMimeData:
    data = QMimeData()
    data.setData(mime_type, json.dumps(payload).encode("utf-8"))
    data.setText(text)
    return data


def _unpack(data: QMimeData, mime_type: str) -> dict[str, Any] | None:
    if not data.hasFormat(mime_type):
        return None
    try:
        payload = json.loads(bytes(data.data(mime_type).data()).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) else None


def _pair(data: QMimeData, mime_type: str, first: str, second: str) -> tuple[str, str] | None:
    """Two named strings of a payload, or None where the drag lacks either."""
    payload = _unpack(data, mime_type)
    if payload is None or not {first, second} <= payload.keys():
        return None
    return str(payload[first]), str(payload[second])


def workload_mime(workload: WorkloadRow) -> QMimeData:
    payload = {"target": workload.target, "id": workload.id, "label": workload.label}
    return _pack(WORKLOAD_MIME, payload, f"{workload.target} {workload.label}")


def read_workload(data: QMimeData) -> tuple[str, str] | None:
    """(node target, workload id), or None."""
    return _pair(data, WORKLOAD_MIME, "target", "id")


def holder_mime(holder: str) -> QMimeData:
    return _pack(HOLDER_MIME, {"holder": holder}, holder)


def read_holder(data: QMimeData) -> str | None:
    payload = _unpack(data, HOLDER_MIME)
    return None if payload is None else str(payload.get("holder", ""))


def process_mime(victim: KillTarget) -> QMimeData:
    p = victim.process
    payload = {
        "target": victim.target, "node": victim.node_name, "gpu": victim.gpu, "pid": p.pid,
        "user": p.user, "command": p.command, "gpu_memory_bytes": p.gpu_memory_bytes,
        "start_time_unix_ms": p.start_time_unix_ms, "container_id": p.container_id,
        "slurm_job_id": p.slurm_job_id, "sm_util_pct": p.sm_util_pct, "cpu_pct": p.cpu_pct,
        "host_memory_bytes": p.host_memory_bytes,
    }  # fmt: skip
    return _pack(PROCESS_MIME, payload, f"pid {p.pid} {p.command or ''}".strip())


def read_process(data: QMimeData) -> KillTarget | None:
    payload = _unpack(data, PROCESS_MIME)
    if payload is None:
        return None
    try:
        process = ProcessRow(
            pid=int(payload["pid"]), user=payload.get("user"), command=payload.get("command"),
            gpu_memory_bytes=payload.get("gpu_memory_bytes"),
            start_time_unix_ms=payload.get("start_time_unix_ms"),
            container_id=payload.get("container_id"), slurm_job_id=payload.get("slurm_job_id"),
            sm_util_pct=payload.get("sm_util_pct"), cpu_pct=payload.get("cpu_pct"),
            host_memory_bytes=payload.get("host_memory_bytes"),
        )  # fmt: skip
        gpu = int(payload["gpu"])
        return KillTarget(str(payload["target"]), str(payload["node"]), gpu, process)
    except (KeyError, TypeError, ValueError):
        return None


def node_mime(target: str, name: str) -> QMimeData:
    return _pack(NODE_MIME, {"target": target, "name": name}, name)


def read_node(data: QMimeData) -> tuple[str, str] | None:
    """(node target, its name), or None."""
    return _pair(data, NODE_MIME, "target", "name")


def drag_text(data: QMimeData) -> str:
    """What a drag's compact label says: "PID 4242 · python train.py", "workload w-3 (train)"."""
    process = _unpack(data, PROCESS_MIME)
    if process is not None:
        command = process.get("command") or ""
        return f"PID {process.get('pid')}" + (f" \N{MIDDLE DOT} {command}" if command else "")
    workload = _unpack(data, WORKLOAD_MIME)
    if workload is not None:
        return f"workload {workload.get('label') or workload.get('id')}"
    holder = read_holder(data)
    if holder is not None:
        return f"reserve for {holder}"
    node = read_node(data)
    if node is not None:
        return f"node {node[1]}"
    return data.text()

"""SlurmJobTableModel: Slurm's pending and running jobs, one row each; pending ones drag."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from PySide6.QtCore import QMimeData, QModelIndex, Qt

from console.fleet.slurm_model import SlurmJob
from console.fleet.slurm_view import SlurmView
from console.qt.row_table import SORT_ROLE, Index, RowTableModel
from console.qt.slurm_mime import SLURM_JOB_MIME, slurm_job_mime

JOB_ROLE = int(Qt.ItemDataRole.UserRole) + 40


def limit_text(limit: timedelta | None) -> str:
    if limit is None:
        return "unlimited"
    minutes = int(limit.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    text = f"{rest // 60}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _reason(job: SlurmJob) -> str:
    return "" if job.reason in ("None", "") else job.reason


CELLS = (
    ("ID", lambda j: str(j.job_id), lambda j: j.job_id),
    ("Name", lambda j: j.name, None),
    ("User", lambda j: j.user, None),
    ("Account", lambda j: j.account, None),
    ("Partition", lambda j: j.partition, None),
    ("GPUs", lambda j: "" if j.gpus is None else str(j.gpus), lambda j: j.gpus or 0),
    ("State", lambda j: j.state, None),
    ("Reason", _reason, None),
    ("Time limit", lambda j: limit_text(j.time_limit),
     lambda j: j.time_limit or timedelta.max),
    ("Priority", lambda j: str(j.priority), lambda j: j.priority),
    ("Submitted", lambda j: j.submit_time.astimezone().strftime("%b %d %H:%M"),
     lambda j: j.submit_time),
)  # fmt: skip


class SlurmJobTableModel(RowTableModel):
    headers = tuple(c[0] for c in CELLS)
    record_role = JOB_ROLE
    _rows: Sequence[SlurmJob]

    def on_view_changed(self, view: SlurmView) -> None:
        self._show_rows(view.queue())

    def job(self, row: int) -> SlurmJob:
        return self._rows[row]

    def cell(self, job: SlurmJob, column: int, role: int) -> Any:
        _, text, key = CELLS[column]
        if role == Qt.ItemDataRole.DisplayRole:
            return text(job)
        if role == SORT_ROLE and key is not None:
            return key(job)
        if role == Qt.ItemDataRole.ToolTipRole and job.pending:
            return "Drag onto a node's tile to steer it there (its required node list)"
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        if index.isValid() and self._rows[index.row()].pending:
            return flags | Qt.ItemFlag.ItemIsDragEnabled
        return flags

    def mimeTypes(self) -> list[str]:
        return [SLURM_JOB_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        pending = [self._rows[i.row()] for i in indexes if self._rows[i.row()].pending]
        return slurm_job_mime(pending[0]) if pending else QMimeData()

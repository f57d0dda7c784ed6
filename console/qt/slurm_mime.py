"""A pending Slurm job in a drag: its id under its own MIME type (and text for an editor)."""

from __future__ import annotations

import json

from PySide6.QtCore import QMimeData

from console.fleet.slurm_model import SlurmJob

SLURM_JOB_MIME = "application/x-gpufleet-slurm-job"


def slurm_job_mime(job: SlurmJob) -> QMimeData:
    data = QMimeData()
    data.setData(SLURM_JOB_MIME, json.dumps({"job_id": job.job_id}).encode())
    data.setText(f"Slurm job {job.job_id} ({job.name})")
    return data


def read_slurm_job(data: QMimeData) -> int | None:
    if not data.hasFormat(SLURM_JOB_MIME):
        return None
    try:
        payload = json.loads(bytes(data.data(SLURM_JOB_MIME).data()).decode())
        return int(payload["job_id"])
    except (ValueError, KeyError, TypeError):
        return None

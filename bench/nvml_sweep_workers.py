"""Starting, driving and stopping bench/nvml_sweep_worker.py processes."""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvml_sweep_fake import FakeNvml

WORKER = Path(__file__).resolve().with_name("nvml_sweep_worker.py")


class WorkerError(RuntimeError):
    pass


@dataclass
class Worker:
    """One tool in one process, reading one fake library (`variant`)."""

    tool: str
    variant: str
    proc: subprocess.Popen[str]
    log_path: Path
    ops: list[str] = field(default_factory=list)
    versions: dict[str, str | None] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.tool}@{self.variant}"

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise WorkerError(f"{self.key} has exited:\n{self.log_tail()}") from exc
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"{self.key} has exited:\n{self.log_tail()}")
        return dict(json.loads(line))

    def time(self, op: str, sweeps: int, warmup: int) -> dict[str, list[float]]:
        reply = self.request({"cmd": "time", "op": op, "sweeps": sweeps, "warmup": warmup})
        return {"wall": list(reply["wall"]), "cpu": list(reply["cpu"])}

    def count(self, op: str) -> dict[str, dict[str, int]]:
        reply = self.request({"cmd": "count", "op": op})
        return {"calls": dict(reply["calls"]), "missing": dict(reply["missing"])}

    def log_tail(self, lines: int = 15) -> str:
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close its stdin (it exits), then make sure it has."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_worker(python: Path, tool: str, fake: FakeNvml, variant: str, log_dir: Path) -> Worker:
    """Start `tool`'s worker on `fake`; raises WorkerError if it cannot set up."""
    log_path = log_dir / f"worker-{tool}-{variant}.log"
    with log_path.open("w", encoding="utf-8") as log_file:
        proc = subprocess.Popen(
            [str(python), str(WORKER), tool],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=fake.env(),
        )
    worker = Worker(tool, variant, proc, log_path)
    try:
        hello = worker._read()
    except WorkerError:
        worker.stop()
        raise
    if not hello.get("ready"):
        worker.stop()
        raise WorkerError(f"{tool} could not start: {hello.get('error')}")
    worker.ops = list(hello["ops"])
    worker.versions = dict(hello["versions"])
    return worker

"""A real daemon process whose config the test rewrites and reloads with a real SIGHUP."""

from __future__ import annotations

import os
import re
import signal
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import wait_for
from tests.daemon_process import DaemonProcess
from tests.tools import free_port

# A reload's result: its summary (INFO), or why it was rejected (ERROR; WARNING where it would
# lower the security posture). Its other warnings (needs a restart, lowered as allowed) are not.
RESULT = re.compile(
    r" (INFO|WARNING|ERROR) gpufleet\.daemon: (reload: (?!needs a restart|.* lowers the security)"
    r".*|reload rejected.*)$",
    re.M,
)
# GPU 1 falls off the bus at once: a firing alert no reload of other rules may touch.
LOST_GPU_SCENARIO = '[[event]]\nat = 0.1\ngpu = 1\nkind = "lost"\n'


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


class ReloadableDaemon:
    """`gpufleet daemon --config FILE` (simulated, 2 GPUs, GPU 1 lost) with /metrics."""

    def __init__(self, workdir: Path, config: str, *flags: str) -> None:
        self.config = workdir / "daemon.toml"
        self.config.write_text(config, encoding="utf-8")
        scenario = workdir / "scenario.toml"
        scenario.write_text(LOST_GPU_SCENARIO, encoding="utf-8")
        self.metrics_port = free_port()
        self.process = DaemonProcess(
            workdir, "--config", str(self.config), "--backend", "simulated", "--gpus", "2",
            "--scenario", str(scenario), "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            *flags,
        )  # fmt: skip

    def start(self, credentials: grpc.ChannelCredentials | None = None) -> ReloadableDaemon:
        """Start it, and `stub` on a channel to its port on loopback (TLS with `credentials`)."""
        self.process.start()
        assert self.process.proc is not None
        self.pid = self.process.proc.pid
        self.channel = self.connect(credentials)
        self.stub = pb_grpc.NodeServiceStub(self.channel)
        return self

    @property
    def loopback_address(self) -> str:
        return f"127.0.0.1:{self.process.address.rsplit(':', 1)[1]}"

    def connect(self, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
        if credentials is None:
            return grpc.insecure_channel(self.loopback_address)
        return grpc.secure_channel(self.loopback_address, credentials)

    def reload(self, config: str | None = None) -> str:
        """Write `config` (if given), send SIGHUP, and return the reload's result line."""
        if config is not None:
            self.config.write_text(config, encoding="utf-8")
        before = len(self.results())
        os.kill(self.pid, signal.SIGHUP)
        wait_for(lambda: len(self.results()) > before, 15, "the reload's result in the log")
        return self.results()[before]

    def results(self) -> list[str]:
        return [m.group(2) for m in RESULT.finditer(self.log())]

    def log(self) -> str:
        return self.process.log.read_text(encoding="utf-8", errors="replace")

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    def alive(self) -> bool:
        """Same process, still running (a reload never restarts it)."""
        proc = self.process.proc
        return proc is not None and proc.pid == self.pid and proc.poll() is None

    def stop(self) -> None:
        self.channel.close()
        self.process.stop()


class Collected:
    """Reads a server stream on a thread of its own until cancelled; what came, in order."""

    def __init__(self, stream: grpc.Future, name: str) -> None:
        self._stream = stream
        self._items: list[object] = []
        self._lock = threading.Lock()
        self.error: grpc.RpcError | None = None
        self._thread = threading.Thread(target=self._read, name=f"test-{name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for item in self._stream:  # type: ignore[attr-defined]
                with self._lock:
                    self._items.append(item)
        except grpc.RpcError as exc:
            self.error = exc

    def items(self) -> list[object]:
        with self._lock:
            return list(self._items)

    def count(self) -> int:
        with self._lock:
            return len(self._items)

    def close(self) -> None:
        self._stream.cancel()
        self._thread.join(10)


def open_streams(stub: pb_grpc.NodeServiceStub, token: str) -> tuple[Collected, Collected]:
    """StreamSamples (live) and StreamEvents (the whole journal, then live), as `token`."""
    samples = stub.StreamSamples(pb.StreamSamplesRequest(), metadata=bearer(token))
    events = stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), metadata=bearer(token))
    return Collected(samples, "samples"), Collected(events, "events")


def events_of(events: Collected, kind: int, rule: str) -> list[pb.Event]:
    found = [e for e in events.items() if isinstance(e, pb.Event)]
    return [e for e in found if e.kind == kind and e.alert.rule == rule]


def firing(stub: pb_grpc.NodeServiceStub, token: str, rule: str) -> pb.Alert | None:
    alerts = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5, metadata=bearer(token)).alerts
    return next((a for a in alerts if a.rule == rule), None)


def more_than(collected: Collected, count: int) -> Callable[[], bool]:
    """A condition for wait_for: more than `count` items came."""
    return lambda: collected.count() > count

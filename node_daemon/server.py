"""NodeDaemon: composes backend, sampler, history and the gRPC server."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from gpufleet.v1 import node_pb2 as pb
from node_daemon import __version__
from node_daemon.alertmanager_link import AlertmanagerLink
from node_daemon.alerts.engine import AlertEngine
from node_daemon.auth.audit import FILE_SCHEMA as AUDIT_SCHEMA
from node_daemon.auth.audit import AuditLog
from node_daemon.auth.denials import DenialLimiter
from node_daemon.auth.interceptor import AuthInterceptor
from node_daemon.backends.base import GpuBackend
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.config import DaemonConfig, alertmanager_settings, resolve_state_dir, teams_of
from node_daemon.control.kill_service import ProcessKiller
from node_daemon.control.reservations import ReservationLedger
from node_daemon.control.wire import workload_messages
from node_daemon.control.workloads import NodeView, WorkloadManager
from node_daemon.healing.build import build_healer, node_now
from node_daemon.healing.wire import policy_message
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.boot import current_boot_id
from node_daemon.health.events import health_events
from node_daemon.health.fault_record import FaultRecorder
from node_daemon.health.model import GpuCondition
from node_daemon.history.demo_day import seed_demo_day
from node_daemon.history.query import tier_messages
from node_daemon.history.store import FILE_SCHEMA as HISTORY_SCHEMA
from node_daemon.history.store import HISTORY_FILE, HistoryStore
from node_daemon.journal.event_journal import FILE_SCHEMA as JOURNAL_SCHEMA
from node_daemon.journal.event_journal import EventJournal, JournalError
from node_daemon.journal.fault_store import JournalFaultStore
from node_daemon.journal.health_store import JournalHealthStore
from node_daemon.journal.schema_version import FileSchema, refuse_newer_files
from node_daemon.listen import ListenAddress, parse_listen_address
from node_daemon.metrics.exporter import MetricsExporter
from node_daemon.metrics.reloads import ReloadStats
from node_daemon.rpc.alert_servicer import AlertServicer
from node_daemon.rpc.auth_servicer import AuthServicer
from node_daemon.rpc.control_servicer import ControlServicer
from node_daemon.rpc.guard import RateLimitedLog, RpcGuard
from node_daemon.rpc.health_servicer import HealthServicer
from node_daemon.rpc.history_servicer import HistoryServicer
from node_daemon.rpc.node_servicer import NodeServicer
from node_daemon.rpc.service import SERVICE_NAME, node_service_handler
from node_daemon.rpc.stream_admission import StreamAdmission
from node_daemon.rpc.threshold_lines import alert_thresholds
from node_daemon.rpc.usage_servicer import UsageServicer
from node_daemon.sampling.pace import Pace
from node_daemon.sampling.sample_ring import SampleRing
from node_daemon.sampling.sampler import BackendStatus, Sampler
from node_daemon.sampling.slurm import SlurmWatcher
from node_daemon.server_tls import ReloadableServerCredentials
from node_daemon.usage import USAGE_FILE, UsageMeter, UsageStore
from node_daemon.usage.poller import SacctPoller
from node_daemon.usage.store import FILE_SCHEMA as USAGE_SCHEMA

log = logging.getLogger(__name__)


# Keepalive must agree with the console's (console/connections/channel.py).
# The daemon pings each client every 3 s and drops one that has not answered
# within 3 s, so a dead client's stream (and its worker) is freed within ~6 s.
# gRPC core (1.85) enforces the wait through ping_timeout_ms, which defaults to
# a minute; keepalive_timeout_ms alone left a dead client's stream open ~70 s.
# It allows a client's pings every 1 s, below the console's 2 s: a client that
# pings faster than allowed is sent GOAWAY (too_many_pings) and disconnected.
SERVER_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 3_000),
    ("grpc.keepalive_timeout_ms", 3_000),
    ("grpc.http2.ping_timeout_ms", 3_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 1_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 4 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]
# The event engine holder's target (NodeDaemon._engine_holder): the discard port, never
# dialled, as the channel makes no call.
ENGINE_HOLDER_TARGET = "127.0.0.1:9"
# Workers beyond the `max_streams` that streams may hold: unary calls (ack,
# kill) and health checks always find one, however many streams are open.
UNARY_WORKERS = 16
# Calls beyond the workers wait in the executor's queue, up to this many, before
# gRPC refuses them (RESOURCE_EXHAUSTED): a burst waits instead of failing, and
# a flood cannot queue without bound.
QUEUED_CALLS = 32
JOURNAL_FILE = "journal.sqlite3"
AUDIT_FILE = "audit.sqlite3"


class NodeDaemon:
    """One node's daemon. `start()` binds and serves; `stop()` drains and stops."""

    def __init__(
        self,
        config: DaemonConfig,
        backend: GpuBackend,
        address: ListenAddress,
        sweep_clock: Callable[[], float] = time.time,
        *,
        boot_id: str | None = None,
        denials: DenialLimiter | None = None,
    ) -> None:
        """`sweep_clock` stamps each sweep (the wall clock; a test's, to step it).
        `boot_id`: this boot's (default: the kernel's); a test's, to emulate reboots.
        `denials`: the audit log's bound on denial records (default: the daemon's)."""
        self.config = config
        self.history = SampleRing(round(config.history_seconds / config.sample_interval_s))
        self.sampler = Sampler(
            backend, self.history, config.sample_interval_s, config.process_interval_s,
            clock=sweep_clock,
        )  # fmt: skip
        # All checked before any is opened: one too new must not leave the others migrated.
        refuse_newer_files(state_files(resolve_state_dir(config), config.history.enabled))
        self.journal = EventJournal(resolve_state_dir(config) / JOURNAL_FILE)
        self.audit = AuditLog(
            resolve_state_dir(config) / AUDIT_FILE, anchor=self.journal, denials=denials
        )
        self.auth_interceptor = AuthInterceptor(config.auth, self.audit)
        self.alerts = AlertEngine(self.journal, config.alerts)
        self.alerts.set_audit_problem(lambda: self.audit.problem)
        self.alerts.set_node_labels(self._node_labels())
        # Judged before each batch is built, so each sample carries its tick's condition.
        boot = boot_id if boot_id is not None else current_boot_id()
        self.health = HealthAssessor(config.health, JournalHealthStore(self.journal), boot_id=boot)
        self.health.add_listener(self._on_health_change)
        self.sampler.set_health_judge(self.health.judge)
        # Each GPU's fault record, by UUID, kept in the journal (health/fault_record.py).
        faults = JournalFaultStore(self.journal)
        self.faults = FaultRecorder(self._uuid_of, faults.save, faults.load())
        # Adaptive sampling by the alert lines in force (a reload's at the next sweep).
        self.sampler.set_pace(Pace(config.pace, self._temperature_lines))
        self.alerts.set_health_lookup(self.health.condition)
        self.reservations = ReservationLedger(self.journal, self._gpu_count)
        self.workloads = WorkloadManager(
            self.journal, resolve_state_dir(config) / "workloads", self.reservations,
            self._node_view, self._teams_of,
            hooks=backend if hasattr(backend, "attach_process") else None,  # type: ignore[arg-type]
            settings=config.workloads, demo=config.demo,
        )  # fmt: skip
        self.usage_store = UsageStore(resolve_state_dir(config) / USAGE_FILE)
        if config.demo and config.history.enabled:  # validate: only a simulated node
            seed_demo_day(
                resolve_state_dir(config) / HISTORY_FILE,
                config.history,
                round(config.sample_interval_s * 1000),
                {"gpu_count": config.gpus, "seed": config.seed, "model": config.model},
            )
        # Every tick on disk, downsampled (docs/daemon.md, History); None where it is off.
        self.history_store = (
            HistoryStore(resolve_state_dir(config) / HISTORY_FILE, config.history,
                         round(config.sample_interval_s * 1000))
            if config.history.enabled else None
        )  # fmt: skip
        self.usage = UsageMeter(
            self.usage_store, config.sample_interval_s, self._teams_of,
            config.usage_flush_interval_s,
        )  # fmt: skip
        self.killer = ProcessKiller(
            self.sampler, self.journal, self.alerts.report_unkillable,
            config.allow_kill_job_processes,
            backend if hasattr(backend, "remove_simulated_process") else None,  # type: ignore[arg-type]
        )  # fmt: skip
        self.alerts.set_reservation_lookup(self._reserved_for)
        self._hostname = config.hostname or socket.gethostname()
        self.healer = build_healer(
            config.healing, journal=self.journal, audit=self.audit, backend=backend,
            sampler=self.sampler, control=self.health, killer=self.killer,
            workloads=self.workloads, slurm_node=self._hostname.split(".")[0],
            slurm_reason=lambda: self.slurm.state.reason if self.slurm.state else None,
            host=self._hostname, boot_id=boot,
        )  # fmt: skip
        self.alertmanager = AlertmanagerLink(self.alerts, self._hostname)
        # [alertmanager] urls and [daemon] alertmanager_urls (and --alertmanager) together.
        self.alertmanager.configure(alertmanager_settings(config))
        self._tls: ReloadableServerCredentials | None = None
        self.reloads = ReloadStats(time.time())  # SIGHUP's results, on /metrics
        self.metrics = self._build_metrics(backend)
        self._health = health.HealthServicer()
        # Holds gRPC's event engine for the life of the process: the server's own
        # reference goes when its serving thread destroys it at stop, and an engine torn
        # down then closes its epoll fd under its poller threads, which crash the
        # process (epoll_wait: Bad file descriptor) when load keeps one from seeing the
        # shutdown first. Never used for a call: it never connects.
        self._engine_holder = grpc.insecure_channel(ENGINE_HOLDER_TARGET)
        self._server = self._build_server(backend)
        self.port = self._bind(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}: address in use or not available")
        self.address = ListenAddress(address.host, self.port)
        self._stopped = threading.Event()
        self._stop_done = threading.Event()  # set when stop() has closed everything
        self._disk_warnings = RateLimitedLog("after-sweep step postponed", logger=log)

    def _bind(self, address: ListenAddress) -> int:
        tls = self.config.auth.tls
        if tls is None:
            return self._server.add_insecure_port(str(address))
        self._tls = ReloadableServerCredentials(tls)
        return self._server.add_secure_port(str(address), self._tls.credentials)

    def reconfigure(self, config: DaemonConfig) -> None:
        """Apply a reloaded config (node_daemon.reload.plan_reload's `config`, whose
        restart-only settings are those in force) without dropping a call or a stream.

        What can fail (certificate files, Alertmanager's TLS) is tried first: ConfigError
        then, and nothing has changed. The rest cannot fail, and every new call is judged
        by the new users, keys and revocations; open streams keep running.
        """
        tls, certificate = self._tls, None
        if tls is not None and config.auth.tls is not None:
            # Read again even when the paths are the same: a certificate renewed in place.
            certificate = tls.prepare(config.auth.tls)
        self.alertmanager.configure(alertmanager_settings(config))
        if tls is not None and certificate is not None:
            tls.use(certificate)
        self.alerts.set_node_labels(config.alertmanager.node_labels(self._hostname))
        self.alerts.reconfigure(config.alerts)
        self.auth_interceptor.reconfigure(config.auth)
        self.killer.set_allow_job_processes(config.allow_kill_job_processes)
        self.workloads.set_settings(config.workloads)
        self.healer.reconfigure(config.healing)
        self.health.reconfigure(config.health)
        self.config = config  # teams, WhoAmI's kill policy: read through self.config

    def _build_server(self, backend: GpuBackend) -> grpc.Server:
        self.streams = StreamAdmission(self.config.max_streams, self.config.max_streams_per_client)
        workers = self.config.max_streams + UNARY_WORKERS
        self._executor = futures.ThreadPoolExecutor(workers, thread_name_prefix="gpufleet-rpc")
        self.guard = RpcGuard(self.streams)
        server = grpc.server(
            self._executor,
            options=SERVER_OPTIONS,
            maximum_concurrent_rpcs=workers + QUEUED_CALLS,
            interceptors=[  # the guard first: undecodable bytes and excess streams end there
                self.guard,
                self.auth_interceptor,
            ],
        )
        self.slurm = SlurmWatcher(self.config.hostname)
        self.sacct = SacctPoller(
            self.usage_store, self.config.usage.sacct_poll_interval_s, self.config.hostname
        )
        servicer = NodeServicer(
            self.sampler, self.history, backend.kind, int(time.time() * 1000),
            self.config.hostname, self.slurm, self._alert_thresholds, self._history_tiers,
            demo=self.config.demo,
        )  # fmt: skip
        alert_servicer = AlertServicer(self.alerts, self.journal)
        control = ControlServicer(self.killer, self.reservations, self.workloads, self._teams_of)
        usage = UsageServicer(
            self.usage_store, lambda: workload_messages(self.workloads.workloads(True)),
            self._teams_of, self._hostname, self.usage.flush,
            prices=lambda: self.config.usage.prices, node_model=self._gpu_model,
        )  # fmt: skip
        # WhoAmI reports the kill policy of the config in force (a reload replaces it).
        auth = AuthServicer(self.audit, lambda: self.config.allow_kill_job_processes)
        # GetHealth reports the self-healing policy in force (a reload replaces it).
        gpu_health = HealthServicer(
            self.health, lambda: policy_message(self.healer.policy()),
            fault_record=self.faults.of_gpu,
        )  # fmt: skip
        history = HistoryServicer(self.history_store, self._gpu_indices, journal=self.journal)
        handler = node_service_handler(
            servicer, alert_servicer, control, auth, usage, gpu_health, history
        )
        server.add_generic_rpc_handlers((handler,))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        names = (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
        reflection.enable_server_reflection(names, server)
        return server

    def _build_metrics(self, backend: GpuBackend) -> MetricsExporter | None:
        if self.config.metrics_listen is None:
            return None
        address = parse_listen_address(self.config.metrics_listen)
        return MetricsExporter(
            address, self.sampler, self.alerts, self.journal, backend.kind.value,
            self._hostname, self.config.metrics_hostname_label, self.reloads, self.history_store,
            audit=self.audit, faults=self.faults,
        )  # fmt: skip

    def _node_labels(self) -> dict[str, str]:
        """The node's Alertmanager labels: on every pushed alert, and what silences match."""
        # The same labels the Alertmanager pusher sends (AlertmanagerLink), so a silence
        # matches here what it mutes there.
        return self.config.alertmanager.node_labels(self.config.hostname or socket.gethostname())

    def start(self) -> None:
        self._set_health(self.sampler.status)
        self.sampler.add_status_listener(self._set_health)
        self.sampler.add_status_listener(self._on_backend_status)
        self.sampler.add_sweep_listener(self._on_sweep)
        started = f"daemon {__version__} started on {self.address}"
        if self.history_store is not None and self.history_store.set_aside is not None:
            started += f"; {self.history_store.set_aside}"  # the journal keeps why history is gone
        self.alerts.record_start(started)
        self.alertmanager.start()
        if self.metrics is not None:
            self.metrics.start()
        self.slurm.start()
        self.sacct.start()
        if self.history_store is not None:
            self.history_store.start()
        self.sampler.start()
        self._server.start()
        log.info("serving gpufleet.v1 on %s", self.address)
        if self.config.ready_file is not None:
            _write_atomically(self.config.ready_file, f"{self.address}\n")

    def _on_sweep(
        self, readings: Sequence[GpuReading], processes: Mapping[int, Sequence[ProcessReading]]
    ) -> None:
        """After each sweep, on the sampler thread: rules, reservations, workloads, healing.

        Each step on its own: a failure in one (a bug, a full disk) must never
        keep the others, above all the alert rules, from running.
        """
        now = time.time()
        steps = (
            ("history", lambda: self._keep_history(readings)),
            ("reservations", self.reservations.expire_due),
            ("workloads", self.workloads.tick),
            ("usage", lambda: self.usage.observe(now, readings, processes, self._reserved_for)),
            ("alerts", lambda: self.alerts.evaluate(readings, processes)),
            (
                "faults",
                lambda: self.faults.observe(int(now * 1000), readings, self.health.conditions()),
            ),
            # After the rules: it acts on the alerts firing now (and on the conditions).
            ("healing", lambda: self._heal(now, readings, processes)),
        )
        for name, step in steps:
            try:
                step()
            except JournalError as exc:
                # A full disk is expected, and already an alert: one line a minute, not a
                # traceback every tick. The step is tried again next tick.
                self._disk_warnings.warn(f"{name}: {exc}")
            except Exception:
                log.exception("after-sweep step %s failed", name)

    def _keep_history(self, readings: Sequence[GpuReading]) -> None:
        latest = self.sampler.latest  # this sweep's: set before the listeners run
        if self.history_store is not None and latest is not None:
            self.history_store.append(latest.timestamp_unix_ms, readings)

    def _gpu_static(self, index: int) -> GpuStatic | None:
        facts = self.sampler.status.facts
        return next((g for g in facts.gpus if g.index == index), None) if facts else None

    def _uuid_of(self, index: int) -> str | None:
        gpu = self._gpu_static(index)
        return gpu.uuid if gpu is not None else None

    def _temperature_lines(self, index: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """GPU `index`'s gpu_temp and memory_temp lines (adaptive sampling's), by its model."""
        gpu = self._gpu_static(index)
        model = gpu.name if gpu is not None and gpu.name else ""
        alerts = self.config.alerts  # the settings in force: a reload's from the next sweep
        return alerts.gpu_temp.lines(model), alerts.memory_temp.lines(model)

    def _alert_thresholds(self) -> list[pb.AlertThreshold]:
        facts = self.sampler.status.facts
        return alert_thresholds(self.config.alerts, [g.name for g in facts.gpus] if facts else [])

    def _history_tiers(self) -> list[pb.HistoryTier]:
        store = self.history_store
        return tier_messages(store.tiers, store.oldest_ms()) if store is not None else []

    def _gpu_indices(self) -> list[int]:
        facts = self.sampler.status.facts
        return [g.index for g in facts.gpus] if facts else []

    def _heal(
        self,
        now: float,
        readings: Sequence[GpuReading],
        processes: Mapping[int, Sequence[ProcessReading]],
    ) -> None:
        self.healer.tick(
            node_now(now, readings, processes, self.sampler, self.alerts, self.workloads)
        )

    def _teams_of(self, user: str) -> tuple[str, ...]:
        """team:NAME of a user: from [teams] and [[auth.users]], and their latest JWT's groups."""
        return tuple(
            sorted({*teams_of(self.config, user), *self.auth_interceptor.jwt_teams_of(user)})
        )

    def _gpu_count(self) -> int:
        facts = self.sampler.status.facts
        return len(facts.gpus) if facts else 0

    def _gpu_model(self) -> str:
        """The node's GPU model, that its metered usage is priced at (the most GPUs')."""
        facts = self.sampler.status.facts
        names = [g.name for g in facts.gpus] if facts else []
        return max(set(names), key=names.count) if names else ""

    def _node_view(self) -> NodeView:
        latest, facts = self.sampler.latest, self.sampler.status.facts
        gpus = {g.index: g for g in facts.gpus} if facts else {}
        if latest is None:
            return NodeView((), gpus, self.health.conditions())
        return NodeView(latest.readings, gpus, self.health.conditions(), latest.processes)

    def _reserved_for(self, gpu: int) -> str | None:
        held = self.reservations.holder_of(gpu)
        return held.holder if held else None

    def _on_backend_status(self, status: BackendStatus) -> None:
        self.alerts.set_backend_problem(None if status.ok else status.detail)
        if status.facts is not None:
            self.alerts.set_gpu_facts(status.facts.gpus)
            self.health.set_gpu_facts(status.facts.gpus)

    def _on_health_change(self, old: GpuCondition | None, new: GpuCondition, actor: str) -> None:
        """A GPU's state, reasons or drain changed: its events, in the journal (or held
        there while the disk is full: the change itself is made and kept in memory)."""
        self.journal.record_or_hold(health_events(old, new, actor, int(time.time() * 1000)), [])

    def _set_health(self, status: BackendStatus) -> None:
        serving = health_pb2.HealthCheckResponse.SERVING
        state = serving if status.ok else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE_NAME):
            self._health.set(name, state)

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop accepting calls, end streams, stop sampling. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        try:
            self._stop_all(grace_s)
        finally:
            self._stop_done.set()

    def _stop_all(self, grace_s: float) -> None:
        log.info("stopping (grace %.1f s)", grace_s)
        self._health.enter_graceful_shutdown()
        self.history.close()
        self._server.stop(grace_s).wait()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.sampler.stop()
        self.healer.stop()  # after the sampler: no tick hands it more work
        if self.config.demo:  # after the sampler: no tick starts one meanwhile
            self.workloads.end_all()
        self.usage.close()  # after the sampler: its last sweep is billed too
        self.sacct.stop()  # before its store closes
        self.usage_store.close()
        if self.history_store is not None:
            self.history_store.close()  # after the sampler: its last sweep is kept too
        self.slurm.stop()
        if self.metrics is not None:
            self.metrics.stop()
        self.alertmanager.stop()
        self.audit.close()  # first: its summary of denials at stop anchors in the journal
        self.journal.close()

    def wait_stopped(self, timeout_s: float) -> bool:
        """True once stop() has begun; waits up to timeout_s for it."""
        return self._stopped.wait(timeout_s)

    def wait(self) -> None:
        """Until stop() has ended: the server stopped and every store closed (the process
        may then end at once, with nothing left to tear down)."""
        # grpc's wait_for_termination wakes ten times a second; block on our own events.
        self._stopped.wait()
        self._stop_done.wait()


def state_files(state_dir: Path, history: bool = True) -> tuple[tuple[Path, FileSchema], ...]:
    """The daemon's versioned state files in `state_dir`, each with its layout.

    Args:
        state_dir: the daemon's state directory.
        history: whether the metric history is kept (a file not opened is not checked).
    """
    files = [(state_dir / JOURNAL_FILE, JOURNAL_SCHEMA), (state_dir / AUDIT_FILE, AUDIT_SCHEMA),
             (state_dir / USAGE_FILE, USAGE_SCHEMA)]  # fmt: skip
    if history:
        files.append((state_dir / HISTORY_FILE, HISTORY_SCHEMA))
    return tuple(files)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

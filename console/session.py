"""ConsoleSession: the console's moving parts, built and stopped together.

Fleet model, connection manager (network thread), frame pump and Qt item model.
The app and the tests both build one; widgets are composed on top by MainWindow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from console.connections.actions import AlertActions
from console.connections.control_actions import ControlActions
from console.connections.health_actions import HealthActions
from console.connections.history_query import HistoryQueries
from console.connections.manager import ConnectionManager, UpdateInbox
from console.connections.moment_query import MomentQueries
from console.connections.open_files import allow_open_files
from console.connections.prometheus_range import PrometheusSource
from console.connections.queries import FleetQueries
from console.connections.security import LinkSecurity
from console.connections.slurm_actions import SlurmActions
from console.connections.slurm_link import SlurmLink
from console.fleet.model import FleetModel
from console.qt.fleet_item_model import FleetItemModel
from console.qt.frame_pump import DEFAULT_FPS, FramePump
from console.qt.move_repairs import MoveRepairer
from console.qt.replay_source import ReplaySource
from console.settings import SlurmProfile


class ConsoleSession:
    def __init__(
        self,
        targets: Iterable[str] = (),
        fps: int = DEFAULT_FPS,
        people: Iterable[str] = (),
        security: LinkSecurity | None = None,
        profile: str = "",
        prometheus: PrometheusSource | None = None,
        slurm: SlurmProfile | None = None,
        slurm_token: Callable[[], str] | None = None,
    ) -> None:
        self.fleet = FleetModel()
        self.inbox = UpdateInbox()
        # TLS and the token of the profile, for every node of it.
        self.connections = ConnectionManager(self.inbox, security)
        # A stall of the console's own network thread is not every node going quiet.
        self.fleet.watchdog.listen_from(self.connections.heartbeat.listening_since)
        self.profile = profile
        self.pump = FramePump(self.inbox, self.fleet, fps)
        self.items = FleetItemModel(self.fleet)
        self.pump.fleetChanged.connect(self.items.on_fleet_changed)
        self.actions = AlertActions(self.connections)
        self.control = ControlActions(self.connections)
        self.health = HealthActions(self.connections)
        self.queries = FleetQueries(self.connections)
        # Workload moves cut short (two copies): the extra one is cancelled.
        self.move_repairs = MoveRepairer(self.fleet, self.control)
        self.pump.fleetChanged.connect(self.move_repairs.on_fleet_changed)
        # The plots' older ranges: the daemons' history, or the profile's Prometheus.
        self.history = HistoryQueries(self.connections, prometheus)
        # Incident replay: the fleet at a past moment, from each node's GetStateAt.
        self.replay = ReplaySource(self.fleet, self.pump, MomentQueries(self.connections))
        # The profile's Slurm (slurm_url): its queue, steering, drains and cancels.
        self.slurm_link: SlurmLink | None = None
        self.slurm_actions: SlurmActions | None = None
        if slurm is not None and slurm_token is not None:
            self.slurm_link = SlurmLink(slurm, self.inbox, slurm_token)
            self.slurm_actions = SlurmActions(self.connections, self.slurm_link)
        # Users and teams from the settings, offered for reservations and as owners.
        self.people = tuple(people)
        self._targets = list(dict.fromkeys(targets))
        self.items.add_nodes(self._targets)

    def start(self) -> None:
        allow_open_files(len(self._targets))  # a socket per node: 1,250 nodes pass 1,024
        self.connections.start()
        for target in self._targets:
            self.connections.connect(target)
        self.pump.start()

    def add_node(self, target: str) -> None:
        self.items.add_node(target)
        self.connections.connect(target)

    def stop(self) -> None:
        self.pump.stop()
        self.connections.stop()
        self.history.close()
        if self.slurm_link is not None:
            self.slurm_link.close()

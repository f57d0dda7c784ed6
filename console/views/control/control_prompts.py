"""ControlPrompts: the dialogs between a person's gesture and a control request.

A drop or a menu entry asks; this opens the dialog (reserve: until when and
why; kill: a confirmation that names what dies; submit: the command), and on
OK sends the request through ControlActions. Dialogs open window-modal with
`open()`, never `exec()`, so no nested event loop runs while the network
answers. `dialog` is the one open now (tests fill and accept it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from console.connections.control_actions import ControlActions
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.control_requests import KillTarget
from console.fleet.model import FleetModel
from console.fleet.placement import Verdict, can_kill, gpus_text
from console.fleet.updates import CommandResult, LinkState, WorkloadOutputText
from console.views.common.prompt_host import PromptHost
from console.views.control.output_dialog import OutputDialog
from console.views.control.reserve_dialog import ReserveDialog
from console.views.control.submit_dialog import SubmitDialog
from console.views.detail.kill_dialog import KillDialog
from gpufleet.policy import role_needed
from gpufleet.states import WorkloadState


class ControlPrompts(PromptHost):
    message = Signal(str)  # for the status bar: why something was not even asked

    def __init__(
        self,
        fleet: FleetModel,
        actions: ControlActions,
        window: QWidget,
        people: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        super().__init__(window)
        self.setObjectName("controlPrompts")
        self._fleet, self._actions, self._window, self._people = fleet, actions, window, people
        self._outputs: dict[tuple[str, str], OutputDialog] = {}

    # -- drops onto tiles ------------------------------------------------------

    def assign(self, workload: WorkloadRow, verdict: Verdict) -> None:
        """A queued workload dropped on tiles: no question, the drop was the gesture.

        Dropped on another node's GPUs, it moves there (fleet queue).
        """
        gpus = [gpu for _, gpu in verdict.places]
        target = verdict.places[0][0] if verdict.places else workload.target
        if target != workload.target:
            source_host, target_host = self._name(workload.target), self._name(target)
            self._actions.move(workload, source_host, target, target_host, gpus)
        else:
            self._actions.assign(workload, gpus)

    def ask_reserve(self, holder: str, verdict: Verdict) -> None:
        by_node = verdict.gpus_by_node()
        what = "; ".join(f"{gpus_text(g)} of {self._name(t)}" for t, g in by_node.items())
        dialog = ReserveDialog(holder, what, self._window)

        def reserve() -> None:
            who, why = dialog.holder.text().strip(), dialog.reason.text().strip()
            for target, gpus in by_node.items():
                self._actions.reserve(target, gpus, who, dialog.until_unix_ms, why)

        self._open(dialog, reserve)

    def release(self, reservation: ReservationRow) -> None:
        self._actions.release(reservation)

    # -- processes -------------------------------------------------------------

    def ask_kill(self, victim: KillTarget) -> None:
        verdict = can_kill(victim, self._fleet)
        if not verdict.ok:
            self.message.emit(f"Cannot kill: {verdict.reason}")
            return
        dialog = KillDialog(victim, self._window)
        self._open(dialog, lambda: self._actions.kill(victim, dialog.grace_s))

    # -- the queue -------------------------------------------------------------

    def ask_submit(self) -> None:
        connected = [n for n in self._fleet if n.state is LinkState.CONNECTED]
        needed = role_needed("SubmitWorkload")
        nodes = [(n.target, n.name) for n in connected
                 if self._fleet.role_refusal(n.target, needed) is None]  # fmt: skip
        if not nodes:
            why = self._fleet.fleet_role_refusal(needed) if connected else None
            self.message.emit(f"Cannot submit: {why or 'no node is connected'}")
            return
        dialog = SubmitDialog(nodes, self._actions.actor, self._people(), self._window)
        self._open(dialog, lambda: self._actions.submit(dialog.target, dialog.spec()))

    def ask_cancel(self, workload: WorkloadRow) -> None:
        """Cancel a queued workload at once; a running one only after a confirmation."""
        if workload.state is not WorkloadState.RUNNING:
            self._actions.cancel(workload)
            return
        box = QMessageBox(
            QMessageBox.Icon.Warning, "Cancel workload",
            f"Cancel {workload.label} of {workload.owner} on {self._name(workload.target)} "
            f"{gpus_text(workload.gpu_indices)}? Its processes are stopped (TERM, then KILL).",
            QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, self._window,
        )  # fmt: skip
        box.setObjectName("cancelWorkloadBox")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._open(box, lambda: self._actions.cancel(workload))

    def show_output(self, workload: WorkloadRow) -> None:
        dialog = self._outputs.get(workload.uid)
        if dialog is None:
            dialog = OutputDialog(workload, self._name(workload.target), self._window)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.refreshRequested.connect(self._actions.output)
            dialog.destroyed.connect(lambda: self._outputs.pop(workload.uid, None))
            self._outputs[workload.uid] = dialog
        dialog.show()
        dialog.raise_()
        self._actions.output(workload)

    def on_command_finished(self, result: CommandResult) -> None:
        output = result.payload
        if isinstance(output, WorkloadOutputText):
            dialog = self._outputs.get((output.target, output.workload_id))
            if dialog is not None:
                dialog.show_output(output)

    # -- helpers ---------------------------------------------------------------

    def _name(self, target: str) -> str:
        return self._fleet.name_of(target)

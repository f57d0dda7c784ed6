"""SlurmPrompts: the tile's Drain/Resume in Slurm and a process's "Cancel Slurm job N".

Each asks first where Slurm will act on someone's work (the drain's reason,
which Slurm shows everyone; the cancel, naming the job), then hands the action
to SlurmActions, which also writes it to the node's audit log.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

from console.connections.slurm_actions import SlurmActions
from console.fleet.control_requests import KillTarget
from console.fleet.model import FleetModel
from console.fleet.slurm_model import SlurmReservation
from console.fleet.slurm_view import SlurmReserve, expand_hostlist, job_words, slurm_name
from console.qt.slurm_drop import SlurmSteer
from console.qt.slurm_watch import SlurmWatch
from console.views.common.dialog_buttons import ok_cancel_buttons
from console.views.common.prompt_host import PromptHost
from console.views.slurm.slurm_reserve_dialog import SlurmReserveDialog
from gpufleet.policy import role_needed


class DrainDialog(QDialog):
    """The reason for draining a node in Slurm; OK only with one."""

    def __init__(self, node: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("slurmDrainDialog")
        self.setWindowTitle(f"Drain {node} in Slurm")
        self.reason = QLineEdit()
        self.reason.setObjectName("slurmDrainReason")
        self.reason.setPlaceholderText("e.g. fan swap, ticket 4711")
        self.buttons, ok = ok_cancel_buttons(self, "Drain")
        ok.setEnabled(False)
        self.reason.textChanged.connect(lambda text: ok.setEnabled(bool(text.strip())))
        layout = QVBoxLayout(self)
        text = f"Slurm stops starting jobs on {node}; running jobs finish. The reason is shown"
        layout.addWidget(QLabel(f"{text} to everyone (sinfo -R)."))
        layout.addWidget(self.reason)
        layout.addWidget(self.buttons)
        self.reason.setFocus()


class SlurmPrompts(PromptHost):
    def __init__(self, fleet: FleetModel, watch: SlurmWatch, actions: SlurmActions,
                 parent: QWidget) -> None:  # fmt: skip
        super().__init__(parent)
        self._fleet, self._watch, self._actions = fleet, watch, actions
        self._parent = parent

    # -- the tile's menu ---------------------------------------------------------

    def tile_entries(self, menu: QMenu, target: str, _gpu: int) -> None:
        node = self._fleet.node(target)
        if node.info is None:
            return
        name = slurm_name(node.name)
        known = self._watch.view.nodes.get(name)
        if known is None:
            return  # not a node of this Slurm
        refusal = self._fleet.role_refusal(target, role_needed("RecordExternalAction"))
        suffix = f" ({refusal})" if refusal else ""
        if not menu.isEmpty():
            menu.addSeparator()
        if known.drained:
            action = menu.addAction(f"Resume {name} in Slurm{suffix}")
            action.triggered.connect(lambda: self._actions.resume(target, name))
        else:
            action = menu.addAction(f"Drain {name} in Slurm…{suffix}")
            action.triggered.connect(lambda: self.ask_drain(target, name))
        action.setObjectName("slurmNodeAction")

    def ask_drain(self, target: str, node: str) -> None:
        dialog = DrainDialog(node, self._parent)
        self._open(dialog, lambda: self._actions.drain(target, node, dialog.reason.text().strip()))
        dialog.reason.setFocus()

    # -- the process's menu ------------------------------------------------------

    def process_entries(self, menu: QMenu, victim: KillTarget) -> None:
        job_text = victim.process.slurm_job_id
        if not job_text or not job_text.isdigit():
            return
        job_id = int(job_text)
        words = job_words(self._watch.view.job(job_id), job_id)
        action = menu.addAction(f"Cancel {words}…")
        action.setObjectName("slurmCancelAction")
        action.triggered.connect(lambda: self.ask_cancel(victim.target, job_id, words))

    def ask_cancel(self, target: str, job_id: int, words: str) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, f"Cancel {words}",
                          f"Cancel {words} through Slurm (scancel {job_id})? Every process of "
                          "the job ends, on every node it runs on.",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                          self._parent)  # fmt: skip
        box.setDefaultButton(QMessageBox.StandardButton.No)
        self._open(box, lambda: self._actions.cancel(target, job_id, words))

    # -- drops -------------------------------------------------------------------

    def steer(self, steer: SlurmSteer) -> None:
        """A drop is the ask: Slurm decides (and its answer shows on the message line)."""
        self._actions.steer(steer.target, steer.node, steer.job_id, steer.words)

    def ask_reserve(self, reserve: SlurmReserve) -> None:
        dialog = SlurmReserveDialog(reserve, self._parent)
        self._open(dialog, lambda: self._actions.reserve(reserve, dialog.ask()))

    def ask_release(self, reservation: SlurmReservation) -> None:
        """Confirm, then delete it in Slurm; the console's nodes it held get the record."""
        names = set(expand_hostlist(reservation.nodes))
        targets = [n.target for n in self._fleet.nodes()
                   if n.info is not None and slurm_name(n.name) in names]  # fmt: skip
        if not targets:
            targets = [n.target for n in self._fleet.nodes()][:1]  # someone keeps the record
        box = QMessageBox(QMessageBox.Icon.Question, f"Release {reservation.name}",
                          f"Release Slurm reservation {reservation.name} on {reservation.nodes}?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                          self._parent)  # fmt: skip
        self._open(box, lambda: self._actions.release(targets, reservation.name))

"""The guided tour's steps: what a newcomer is shown, in order, and where.

Each step names the part of the window it points at (`target`, a key that
MainWindow maps to the real widget) and, where that part sits in a bottom tab,
the tab to open first. The words follow docs/console.md's first ten minutes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TourStep:
    target: str  # the widget it points at (MainWindow.tour_targets)
    title: str
    text: str


STEPS = (
    TourStep("grid", "The fleet grid",
             "Each block is a GPU server, each tile one of its GPUs, coloured by "
             "temperature (Colour by changes that). Click a tile, or move with the "
             "arrow keys after Ctrl+G, to see that GPU on the right."),
    TourStep("search", "Find anything",
             "Ctrl+F finds a GPU by node, user, job, container or UUID: type alice, "
             "or gpu-node-02:3, and press Enter to go there."),
    TourStep("alerts", "Alerts and their popups",
             "Every node's alerts, the worst first. A critical one also pops up over "
             "the grid (never over the GPU it is about) and on the desktop, and goes "
             "away when its condition ends. In the demo, gpu-node-02 runs hot within "
             "minutes."),
    TourStep("acknowledge", "Acknowledge and silence",
             "Select an alert and press Acknowledge: everyone sees who took it. "
             "Silence… mutes a rule, a GPU or a node for a while, with a reason; "
             "the Silences tab lists them."),
    TourStep("time", "A time range",
             "The selected GPU's plots: the last 5 minutes up to 7 days from the "
             "node's own history, or Custom… for any range. Drag in a plot to zoom; "
             "Live follows the present again."),
    TourStep("reserve", "Drag to reserve",
             "Drag a person or a team from this list onto a GPU tile to reserve it "
             "for them. Before you let go the tile says whether the node allows it. "
             "By keyboard: the Menu key on a tile, Reserve for…"),
    TourStep("kill", "Drag to kill",
             "Drag a process row onto the kill zone to end it: you confirm first, "
             "and the node checks that you may. In the demo, try it on a demo "
             "user's workload; Ctrl+P brings the process table into view."),
    TourStep("status", "The status bar",
             "Nodes connected, GPUs, the hottest, alerts by severity: click one to "
             "open what it names. F1 lists every key; Help ▸ Guided tour shows this "
             "tour again."),
)  # fmt: skip

"""GridPart: the fleet grid in its scroll area, its toolbar choices, search and summary.

It builds the tiles over the session's item model, the drop rules the other wings
extend (Slurm's, the control prompts'), the colour/group/sort choices, the search
box and the status bar's summary, and wires them to each other and to the frame.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QComboBox, QLabel, QScrollArea, QToolBar

from console.fleet.tile_order import TileOrder
from console.qt.drop_rules import TileDropRules
from console.views.common.frame import WindowFrame
from console.views.grid.fleet_grid import FleetGrid
from console.views.grid.fleet_summary import FleetSummary
from console.views.grid.grid_layout import GROUPINGS
from console.views.grid.search_box import SearchBox
from console.views.grid.tile_colors import STOPS


def _choice(name: str, items: list[str]) -> QComboBox:
    box = QComboBox()
    box.setObjectName(name)
    box.addItems(items)
    return box


class GridPart(QObject):
    def __init__(self, frame: WindowFrame) -> None:
        super().__init__()
        session = frame.session
        self.drop_rules = TileDropRules(session.fleet)
        self.grid = FleetGrid(session.items, self.drop_rules)
        self.fleet_scroll = QScrollArea()
        self.fleet_scroll.setObjectName("fleetScroll")
        self.fleet_scroll.setWidgetResizable(True)
        self.fleet_scroll.setWidget(self.grid)
        self.summary = FleetSummary(session.fleet)
        self.color_by = _choice("colorBy", [scale.value for scale in STOPS])  # temperature first
        self.group_by = _choice("groupBy", list(GROUPINGS))
        self.sort_by = _choice("sortBy", [order.value for order in TileOrder])  # node order first
        self.search = SearchBox(session.fleet)
        session.pump.fleetChanged.connect(self.summary.on_fleet_changed)
        self.grid.dropHint.connect(frame.show_message)
        self.color_by.currentTextChanged.connect(self.grid.set_color_by)
        self.group_by.currentTextChanged.connect(self.grid.set_grouping)
        # Finding: the sort, the search box and the status bar's figures lead to a GPU.
        self.sort_by.currentTextChanged.connect(self.grid.set_order)
        self.search.found.connect(frame.open_gpu)
        self.search.left.connect(self.grid.setFocus)
        self.summary.gpuRequested.connect(frame.open_gpu)

    def reveal(self, target: str, gpu: int) -> None:
        """Select the GPU's tile and scroll it into view."""
        self.grid.select(target, gpu)
        tile = self.grid.tile_rect(target, gpu)
        if tile is not None:
            self.fleet_scroll.ensureVisible(tile.center().x(), tile.center().y(), 50, 80)

    def toolbar(self) -> QToolBar:
        """The View toolbar: colour, grouping, order and the search box."""
        toolbar = QToolBar("View")
        toolbar.setObjectName("viewToolbar")
        for label, choice in ((" Colour by ", self.color_by), (" Group by ", self.group_by),
                              (" Sort ", self.sort_by)):  # fmt: skip
            toolbar.addWidget(QLabel(label))
            toolbar.addWidget(choice)
        toolbar.addSeparator()
        toolbar.addWidget(self.search)
        toolbar.addSeparator()
        return toolbar

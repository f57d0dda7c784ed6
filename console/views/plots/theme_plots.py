"""Restyle the pyqtgraph plots under a widget for a theme: background, axes, titles.

pyqtgraph paints with its own colours, not the stylesheet's, so a theme switch
walks the plots once and gives each its background and foreground.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from console.views.common.theme import Theme

AXES = ("left", "bottom", "right", "top")


def style_plots(root: QWidget, theme: Theme) -> int:
    """Give every plot under `root` the theme's colours; how many plots were restyled."""
    count = 0
    for view in root.findChildren(pg.GraphicsView):
        view.setBackground(theme.plot_background)
        for item in view.scene().items():
            if isinstance(item, pg.PlotItem):
                _style_plot(item, theme.plot_foreground)
                count += 1
    return count


def _style_plot(plot: pg.PlotItem, foreground: str) -> None:
    for name in AXES:
        axis = plot.getAxis(name)
        axis.setPen(foreground)
        axis.setTextPen(foreground)
    title = plot.titleLabel
    # The colour stays in the label's options: a later setTitle keeps it.
    title.setText(title.text, color=foreground)

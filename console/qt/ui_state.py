"""The window's layout and choices, remembered per profile from one run to the next.

Saved on close, restored at start: the window's geometry and state (docks,
toolbars), its splitters, the selected bottom tab, the toolbar's combo boxes
(colour, grouping, sort), the plots' time range preset and the theme. One small
JSON file per profile in the console's config directory
(`~/.config/gpufleet/ui-state/<profile>.json`), beside the settings but apart
from them: the settings are the person's, this file the window's. A missing
file is a first start; a corrupt one (or a value of the wrong kind) is logged
once and the window starts with its defaults, never fails.

Widgets are found by object name, so the window needs no code for this beyond
naming what it wants remembered.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QComboBox, QMainWindow, QSplitter, QTabWidget

log = logging.getLogger(__name__)
VERSION = 1
REMEMBERED_COMBOS = ("colorBy", "groupBy", "sortBy")
TABS = "bottomTabs"
# Set on a window whose docks and toolbars were put back: it keeps them as they were.
RESTORED = "gpufleetLayoutRestored"
_warned: set[Path] = set()


@dataclass
class UiState:
    """What is remembered: Qt's own blobs as base64, the rest as plain values."""

    geometry: str = ""
    window_state: str = ""
    splitters: dict[str, str] = field(default_factory=dict)
    tab: str = ""
    combos: dict[str, str] = field(default_factory=dict)
    span_s: float | None = None
    theme: str | None = None


def state_path(profile: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", profile or "default")
    return Path(platformdirs.user_config_dir("gpufleet")) / "ui-state" / f"{name}.json"


def load(path: Path) -> UiState:
    """The state saved at `path`; defaults when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _parse(data)
    except FileNotFoundError:
        return UiState()
    except (OSError, ValueError, TypeError) as exc:  # JSONDecodeError is a ValueError
        if path not in _warned:
            _warned.add(path)
            log.warning("window layout %s unreadable (%s): starting with the defaults",
                        path, exc)  # fmt: skip
        return UiState()


def save(path: Path, state: UiState) -> None:
    """Write atomically (a crash mid-write leaves the old file, never half a new one)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps({"version": VERSION, **asdict(state)}, indent=1),
                             encoding="utf-8")  # fmt: skip
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("could not save the window layout to %s: %s", path, exc)


def tour_seen_path() -> Path:
    """Marks that this person has seen (or skipped) the guided tour: once per person, not
    per profile (a second fleet's profile needs no second tour)."""
    return Path(platformdirs.user_config_dir("gpufleet")) / "tour-seen"


def tour_seen() -> bool:
    return tour_seen_path().exists()


def remember_tour_seen() -> None:
    path = tour_seen_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError as exc:  # a read-only home: the tour shows again next time, no more
        log.warning("could not note the guided tour as seen in %s: %s", path, exc)


def _parse(data: Any) -> UiState:
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError("not a version 1 layout file")
    state = UiState()
    for name in ("geometry", "window_state", "tab"):
        setattr(state, name, _kind(data.get(name, ""), str, name))
    for name in ("splitters", "combos"):
        table = _kind(data.get(name, {}), dict, name)
        setattr(state, name, {str(k): _kind(v, str, f"{name}.{k}") for k, v in table.items()})
    span = data.get("span_s")
    state.span_s = None if span is None else float(_kind(span, (int, float), "span_s"))
    theme = data.get("theme")
    state.theme = None if theme is None else _kind(theme, str, "theme")
    return state


def _kind(value: Any, kind: type | tuple[type, ...], name: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{name} has the wrong kind of value: {value!r}")
    return value


def capture(window: QMainWindow) -> UiState:
    """The window's layout now (span and theme are the caller's to fill in)."""
    state = UiState(_b64(window.saveGeometry()), _b64(window.saveState()))
    for splitter in window.findChildren(QSplitter):
        if splitter.objectName():
            state.splitters[splitter.objectName()] = _b64(splitter.saveState())
    tabs = window.findChild(QTabWidget, TABS)
    if tabs is not None and tabs.currentIndex() >= 0:
        state.tab = tabs.tabText(tabs.currentIndex())
    for name in REMEMBERED_COMBOS:
        combo = window.findChild(QComboBox, name)
        if combo is not None:
            state.combos[name] = combo.currentText()
    return state


def restore(window: QMainWindow, state: UiState) -> None:
    """Put back what `state` remembers; what no longer fits (a tab gone, a corrupt blob)
    is skipped, the rest still restored."""
    if state.geometry and not window.restoreGeometry(_bytes(state.geometry)):
        log.info("saved window geometry not restored (corrupt)")
    if state.window_state:
        if window.restoreState(_bytes(state.window_state)):
            window.setProperty(RESTORED, True)
        else:
            log.info("saved dock and toolbar layout not restored (corrupt)")
    for splitter in window.findChildren(QSplitter):
        saved = state.splitters.get(splitter.objectName())
        if saved:
            splitter.restoreState(_bytes(saved))
    tabs = window.findChild(QTabWidget, TABS)
    if tabs is not None and state.tab:
        for index in range(tabs.count()):
            if tabs.tabText(index) == state.tab and tabs.isTabVisible(index):
                tabs.setCurrentIndex(index)
    for name, text in state.combos.items():
        combo = window.findChild(QComboBox, name)
        if combo is not None and combo.findText(text) >= 0:
            combo.setCurrentText(text)


def _b64(data: QByteArray) -> str:
    return bytes(data.toBase64().data()).decode("ascii")


def _bytes(text: str) -> QByteArray:
    return QByteArray.fromBase64(QByteArray(text.encode("ascii")))

"""The text colour pairs a Qt stylesheet sets: for the themes' contrast test.

A rule's `color` is read against the `background` of the same rule, else of
the same selector elsewhere in the sheet, else of the selector without its
states and sub-controls (`QMenu::item:disabled` -> `QMenu`), else the window's.
`selection-color` is read against `selection-background-color`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEX = re.compile(r"#[0-9a-fA-F]{6}\b")


@dataclass(frozen=True)
class Pair:
    selector: str
    foreground: str
    background: str

    @property
    def disabled(self) -> bool:
        return ":disabled" in self.selector


def rules(sheet: str) -> list[tuple[list[str], dict[str, str]]]:
    """(selectors, declarations) of each rule, comments dropped."""
    sheet = re.sub(r"/\*.*?\*/", "", sheet, flags=re.S)
    found = []
    for head, body in re.findall(r"([^{}]+)\{([^}]*)\}", sheet):
        declarations = {}
        for item in body.split(";"):
            if ":" in item:
                name, value = item.split(":", 1)
                declarations[name.strip()] = value.strip()
        found.append(([s.strip() for s in head.split(",")], declarations))
    return found


def selectors(sheet: str) -> set[str]:
    return {s for names, _ in rules(sheet) for s in names}


def _colour(value: str | None) -> str | None:
    match = HEX.search(value or "")
    return match.group(0).lower() if match else None


def pairs(sheet: str, window: str) -> list[Pair]:
    parsed = rules(sheet)
    backgrounds: dict[str, str] = {}
    for names, declarations in parsed:
        background = _colour(declarations.get("background") or declarations.get("background-color"))
        for name in names:
            if background is not None:
                backgrounds.setdefault(name, background)
    found = []
    for names, declarations in parsed:
        own = _colour(declarations.get("background") or declarations.get("background-color"))
        foreground = _colour(declarations.get("color"))
        for name in names:
            if foreground is not None:
                base = re.split(r":", name, maxsplit=1)[0].strip()
                behind = own or backgrounds.get(name) or backgrounds.get(base) or window
                found.append(Pair(name, foreground, behind))
            selected = _colour(declarations.get("selection-color"))
            selected_bg = _colour(declarations.get("selection-background-color"))
            if selected is not None and selected_bg is not None:
                found.append(Pair(name + " (selected)", selected, selected_bg))
    return found

"""The layer contracts in pyproject.toml hold (import-linter)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp  # import-linter's graph builder, part of the test extra
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is part of the test extra"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _import_circles(package: str) -> list[list[str]]:
    """The module-level import circles in `package` (TYPE_CHECKING imports counted)."""
    graph = grimp.build_graph(package, cache_dir=None)
    inside = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(inside)) for m in inside}
    # Tarjan's strongly connected components, iteratively: a circle is one of 2+ modules.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in inside:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_no_import_circle_in_the_console_the_daemon_or_the_shared_package() -> None:
    for package in ("console", "node_daemon", "gpufleet"):
        assert _import_circles(package) == [], package


def test_an_import_circle_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself, on a package made for it: a -> b -> c -> a (one only when
    # type checking), and d, which imports into the circle without being in it.
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("from circled import c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled import a\n"
    )
    (package / "d.py").write_text("from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _import_circles("circled") == [["circled.a", "circled.b", "circled.c"]]


def test_the_window_composes_the_wings_and_stays_small() -> None:
    """#29's shape: the wings build and wire themselves; the window only composes them."""
    window = (ROOT / "console" / "main_window.py").read_text()
    assert len(window.splitlines()) < 200
    assert window.count(".connect(") < 25
    views = [p.name for p in (ROOT / "console" / "views").iterdir() if p.name != "__pycache__"]
    assert len(views) <= 12, sorted(views)

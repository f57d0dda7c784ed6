"""The console's settings: a TOML file in the user's config directory.

# ~/.config/gpufleet/console.toml
nodes = ["gpu-node-01:50051", "gpu-node-02:50051"]
# Users and teams to offer for reservations (teams as "team:NAME"); the console
# adds everyone it sees in processes, reservations and workloads.
people = ["alice", "bob", "team:ml"]
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import platformdirs


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class ConsoleSettings:
    nodes: tuple[str, ...] = ()
    people: tuple[str, ...] = ()


def default_settings_path() -> Path:
    return Path(platformdirs.user_config_dir("gpufleet")) / "console.toml"


def load_settings(path: Path | None = None) -> ConsoleSettings:
    """Read settings; a missing default file is an empty fleet, a missing named file an error."""
    explicit = path is not None
    path = path or default_settings_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if explicit:
            raise SettingsError(f"console settings {path} do not exist") from None
        return ConsoleSettings()
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"console settings {path} are not valid TOML: {exc}") from exc
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) and ":" in n for n in nodes):
        raise SettingsError(f"{path}: 'nodes' must be a list of \"HOST:PORT\" strings")
    people = data.get("people", [])
    if not isinstance(people, list) or not all(isinstance(p, str) and p.strip() for p in people):
        raise SettingsError(f"{path}: 'people' must be a list of user names or \"team:NAME\"")
    return ConsoleSettings(tuple(nodes), tuple(p.strip() for p in people))

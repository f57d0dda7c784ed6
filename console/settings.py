"""The console's settings: a TOML file in the user's config directory.

# ~/.config/gpufleet/console.toml
nodes = ["gpu-node-01:50051", "gpu-node-02:50051"]
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
    return ConsoleSettings(tuple(nodes))

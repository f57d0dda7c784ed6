"""`gpufleet console login`: keep a profile's token where it belongs, never in the settings.

With --node, a profile not in the settings file yet is added to it (nodes,
CA, client certificate: everything but the token).
"""

from __future__ import annotations

import getpass
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from console.credentials import CredentialError, store_token
from console.settings import (
    DEFAULT_PROFILE,
    SettingsError,
    default_settings_path,
    load_settings,
)

PROFILE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class LoginError(Exception):
    pass


def prompt_token(profile: str) -> str:
    """The token, typed without echo at a terminal, else the first line of standard input."""
    if sys.stdin.isatty():
        return getpass.getpass(f"token for profile {profile}: ")
    return sys.stdin.readline()


def login(
    config: Path | None,
    name: str | None,
    nodes: Sequence[str] = (),
    ca: Path | None = None,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    read_token: Callable[[str], str] = prompt_token,
) -> list[str]:
    """Store the token of profile `name`; returns what was done, a line each.

    Raises:
        LoginError: no such profile, a bad new profile, no token, nowhere to keep it.
    """
    path = config or default_settings_path()
    said: list[str] = []
    try:
        settings = load_settings(path if path.exists() else None)
        name = name or settings.default_profile or DEFAULT_PROFILE
        if nodes:
            if name in settings.profiles:
                raise LoginError(f"profile {name!r} is already in {path}: edit it there, or "
                                 "log in without --node")  # fmt: skip
            add_profile(path, name, nodes, ca, client_cert, client_key)
            said.append(f"added profile {name!r} to {path} (no token in it)")
            settings = load_settings(path)
        profile = settings.profile(name)
    except SettingsError as exc:
        raise LoginError(f"{exc}; pass --node HOST:PORT to add the profile") from None
    token = read_token(name).strip()
    if not token:
        raise LoginError("no token given (type it, or pipe it into standard input)")
    try:
        where = store_token(profile, token)
    except CredentialError as exc:
        raise LoginError(str(exc)) from None
    return [*said, f"the token of profile {name!r} is now in {where}"]


def add_profile(
    path: Path,
    name: str,
    nodes: Sequence[str],
    ca: Path | None,
    client_cert: Path | None,
    client_key: Path | None,
) -> None:
    """Append a [profiles.NAME] table; a new file also makes it the default profile."""
    if not PROFILE_NAME.match(name):
        raise LoginError(f"a profile name is letters, digits, - and _, not {name!r}")
    bad = [n for n in nodes if ":" not in n]
    if bad:
        raise LoginError(f"nodes are HOST:PORT, not {', '.join(bad)}")
    lines = [f"[profiles.{name}]", f"nodes = [{', '.join(_string(n) for n in nodes)}]"]
    for key, value in (("ca", ca), ("client_cert", client_cert), ("client_key", client_key)):
        if value is not None:
            lines.append(f"{key} = {_string(str(value.expanduser().resolve()))}")
    existing = path.read_text(encoding="utf-8") if path.exists() else f"profile = {_string(name)}\n"
    separator = "" if not existing or existing.endswith("\n") else "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(existing + separator + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    except OSError as exc:
        raise LoginError(f"cannot write {path}: {exc.strerror}") from exc


def _string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)

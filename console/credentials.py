"""Where a profile's token comes from: the keyring, a private file, $GPUFLEET_TOKEN, or a command.

The token is a password: it never goes into the settings file next to the node
list. With a keyring backend (Secret Service, KWallet, macOS Keychain, Windows
Credential Locker) it is stored there, under service "gpufleet" and the
profile's name. Without one, a token file that only its owner can read (mode
0600) or the GPUFLEET_TOKEN environment variable stands in. Or the profile's
`token_command` prints it (an SSO helper: console/token_command.py), and is run
again for a fresh one; then no other source may hold a token for the profile,
so which token is used is never a guess. No Qt here.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from console.connections.security import BearerToken, LinkSecurity
from console.settings import Profile
from console.token_command import TokenCommandError, run_token_command

log = logging.getLogger(__name__)

SERVICE = "gpufleet"
TOKEN_ENV = "GPUFLEET_TOKEN"


class CredentialError(Exception):
    """A token is where it must not be (a file others can read), or cannot be stored."""


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # where it came from, in words (never the token itself)


def default_token_file(profile: str) -> Path:
    """Where `login` puts a profile's token when there is no keyring and no token_file."""
    return Path(platformdirs.user_config_dir("gpufleet")) / "tokens" / f"{profile}.token"


def token_file_of(profile: Profile) -> Path:
    return profile.token_file or default_token_file(profile.name)


def keyring_backend() -> tuple[Any | None, str]:
    """(the keyring backend, "") when one is usable, else (None, why not)."""
    try:
        import keyring
    except ImportError:
        return None, "the keyring package is not installed"
    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # a broken backend configuration: treat as none
        return None, f"the keyring cannot start: {exc}"
    if getattr(backend, "priority", 0) <= 0:
        return None, f"no keyring backend is available (keyring chose {backend_name(backend)})"
    return backend, ""


def backend_name(backend: Any) -> str:
    return f"{type(backend).__module__}.{type(backend).__name__}"


def find_token(profile: Profile, environ: Mapping[str, str] = os.environ) -> Token | None:
    """The profile's token: keyring, then token file, then $GPUFLEET_TOKEN; None if nowhere.

    A profile with token_command gets its token from the command (run now,
    with its timeout), and from nowhere else.

    Raises:
        CredentialError: the token file can be read by group or others; the
            token command failed; a token_command profile has a token elsewhere too.
    """
    if profile.token_command is not None:
        return _from_command(profile, environ)
    found = _from_keyring(profile.name)
    if found is not None:
        return found
    path = token_file_of(profile)
    if path.exists():
        return Token(read_token_file(path), f"the token file {path}")
    if environ.get(TOKEN_ENV, "").strip():
        return Token(environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}")
    return None


def _from_command(profile: Profile, environ: Mapping[str, str]) -> Token:
    assert profile.token_command is not None
    others = _other_sources(profile, environ)
    if others:
        raise CredentialError(
            f"profile {profile.name} gets its token from token_command, but {others[0]} holds "
            f"one too: remove it (the console would not know which to use)"
        )
    try:
        value = run_token_command(profile.token_command, profile.name)
    except TokenCommandError as exc:
        raise CredentialError(str(exc)) from None
    return Token(value, f"the token command {profile.token_command[0]}")


def _other_sources(profile: Profile, environ: Mapping[str, str]) -> list[str]:
    """Where, besides its command, a token of the profile is kept (in words)."""
    found = []
    if _from_keyring(profile.name) is not None:
        found.append(f"the system keyring (service {SERVICE!r}, user {profile.name!r})")
    if default_token_file(profile.name).exists():
        found.append(f"the token file {default_token_file(profile.name)}")
    if environ.get(TOKEN_ENV, "").strip():
        found.append(f"${TOKEN_ENV}")
    return found


def _from_keyring(profile: str) -> Token | None:
    backend, _why = keyring_backend()
    if backend is None:
        return None
    try:
        value = backend.get_password(SERVICE, profile)
    except Exception as exc:  # locked, D-Bus gone: fall back to the other sources
        log.warning("cannot read the token of profile %s from the keyring: %s", profile, exc)
        return None
    if not value:
        return None
    return Token(value.strip(), f"the system keyring ({backend_name(backend)})")


def read_token_file(path: Path) -> str:
    """The token in `path`, refusing a file that anyone but its owner may read or change."""
    try:
        mode = path.stat().st_mode
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialError(
                f"refusing the token file {path}: group or others may read it (mode "
                f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`"
            )
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CredentialError(f"cannot read the token file {path}: {exc.strerror}") from exc
    if not token:
        raise CredentialError(f"the token file {path} is empty")
    return token


def store_token(profile: Profile, token: str) -> str:
    """Keep `token` for `profile`; returns where it went, in words.

    Raises:
        CredentialError: neither the keyring nor the token file could take it.
    """
    token = token.strip()
    if not token:
        raise CredentialError("no token given")
    if profile.token_command is not None:
        raise CredentialError(
            f"profile {profile.name} gets its tokens from token_command "
            f"({profile.token_command[0]}): nothing to store; remove token_command to store one"
        )
    backend, why = keyring_backend()
    if backend is not None:
        try:
            backend.set_password(SERVICE, profile.name, token)
        except Exception as exc:
            why = f"the keyring refused it: {exc}"
        else:
            return (f"the system keyring ({backend_name(backend)}), service {SERVICE!r}, "
                    f"user {profile.name!r}")  # fmt: skip
    path = token_file_of(profile)
    write_token_file(path, token)
    return f"the token file {path} (mode 0600), because {why}"


def write_token_file(path: Path, token: str) -> None:
    """Write the token readable by its owner only, from the first byte on."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)  # an existing file keeps its mode otherwise
            file.write(token + "\n")
    except OSError as exc:
        raise CredentialError(f"cannot write the token file {path}: {exc.strerror}") from exc


def link_security(profile: Profile, token: Token | None) -> LinkSecurity:
    """What every node link of the profile presents: CA, client certificate, token.

    Raises:
        CredentialError: a certificate or key file cannot be read.
    """
    command = profile.token_command
    return LinkSecurity(
        token=token.value if token else None,
        # With a token command, links share one token that is swapped when refreshed.
        bearer=BearerToken(token.value) if token and command else None,
        # Called on the network thread's executor (it blocks): TokenCommandError when it fails.
        refresh=functools.partial(run_token_command, command, profile.name) if command else None,
        root_ca=_read_pem(profile.ca, "CA certificate"),
        client_key=_read_pem(profile.client_key, "client key"),
        client_chain=_read_pem(profile.client_cert, "client certificate"),
    )


def _read_pem(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CredentialError(f"cannot read the {what} {path}: {exc.strerror}") from exc

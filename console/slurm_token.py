"""The operator's Slurm token (a JWT slurmctld issued: `scontrol token`), never logged.

From the profile's `slurm_token_command` (run again for a fresh token when
Slurm refuses the one held; `scontrol token lifespan=28800` works as it is: its
"SLURM_JWT=" prefix is dropped), else from the system keyring under service
"gpufleet" and user "PROFILE/slurm" (`keyring set gpufleet prod/slurm`).
Blocking: call it off the GUI thread (the Slurm link's worker). No Qt here.
"""

from __future__ import annotations

import logging

from console.credentials import SERVICE, backend_name, keyring_backend
from console.settings import SlurmProfile
from console.token_command import TokenCommandError, run_token_command

log = logging.getLogger(__name__)

PREFIX = "SLURM_JWT="


class SlurmTokenError(Exception):
    """No Slurm token could be had; the message says where it was looked for."""


def keyring_user(profile: str) -> str:
    return f"{profile}/slurm"


def slurm_token(profile: str, slurm: SlurmProfile) -> str:
    """The token to send as X-SLURM-USER-TOKEN.

    Raises:
        SlurmTokenError: naming the command or the keyring entry, never a token.
    """
    if slurm.token_command is not None:
        try:
            return run_token_command(slurm.token_command, profile).removeprefix(PREFIX)
        except TokenCommandError as exc:
            raise SlurmTokenError(f"slurm_{exc}") from None
    backend, why = keyring_backend()
    where = f"the keyring (service {SERVICE!r}, user {keyring_user(profile)!r})"
    if backend is None:
        raise SlurmTokenError(f"no Slurm token: {why}; set slurm_token_command, e.g. "
                              "\"scontrol token lifespan=28800\"")  # fmt: skip
    try:
        value = backend.get_password(SERVICE, keyring_user(profile))
    except Exception as exc:  # locked, D-Bus gone: say so, the fleet view goes on
        raise SlurmTokenError(f"cannot read the Slurm token from {where}: {exc}") from None
    if not value or not value.strip():
        raise SlurmTokenError(f"no Slurm token in {where}; store the output of `scontrol token` "
                              "there or set slurm_token_command")  # fmt: skip
    log.info("Slurm token of profile %s: from %s", profile, backend_name(backend))
    return value.strip().removeprefix(PREFIX)

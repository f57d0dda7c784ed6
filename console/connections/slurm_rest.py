"""Slurm's queue, nodes and reservations through slurmrestd, with the operator's own token.

Every call carries the operator's Slurm user name and JWT (`scontrol token`), so
Slurm's own permissions decide what each person may do. The calls block: run
them off the GUI thread.

Slurm 22.05 (Debian bookworm) serves OpenAPI v0.0.36 to v0.0.38; this speaks
v0.0.38, the newest it has. That version has no call to drain or resume a
node or to create or delete a reservation: `ScontrolWithToken` does those
with the same token through `scontrol` (SLURM_JWT; no munge needed on the
console's host, only Slurm's client commands and the cluster's slurm.conf).
Moving a job to the top of its user's jobs (`scontrol top`) is in neither:
REST has no such call, and 22.05's slurmctld answers `scontrol top` from a
token client signed with munge, which that client cannot read (the top is
done, the command reports an error).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from console.connections.addresses import is_loopback_host
from console.connections.bounded_http import MIB, HttpFailure, HttpLimits, exchange
from console.connections.slurm_answer import (
    AnswerError,
    decoded,
    job_from,
    node_from,
    records,
    release,
    reservation_from,
)
from console.fleet.slurm_model import ReservationAsk, SlurmJob, SlurmNode, SlurmReservation
from console.settings import SLURM_MAX_ANSWER_MIB, SLURM_TIMEOUT_S

log = logging.getLogger(__name__)

# The one place the REST API version is named.
API_VERSION: Final = "v0.0.38"
SUPPORTED_SLURM: Final = "22.05 (OpenAPI v0.0.38; 23.02 still serves it)"
TIMEOUT_S: Final = SLURM_TIMEOUT_S  # scontrol's, and each slurmrestd call's by default
DEFAULT_LIMITS: Final = HttpLimits(SLURM_MAX_ANSWER_MIB * MIB, SLURM_TIMEOUT_S)
# How much of what Slurm said goes into one error message.
SAID_CHARS: Final = 300
Json = dict[str, Any]
T = TypeVar("T")


class SlurmError(Exception):
    """Slurm refused or could not answer; the message is Slurm's own where it gave one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SlurmAccess:
    """Where slurmrestd listens and whose token to send (the token never shows in a repr)."""

    url: str
    user: str
    token: str = field(repr=False)
    ca_file: Path | None = None

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"slurm url must be an http:// or https:// URL, not {self.url!r}")
        if parts.scheme == "http" and not is_loopback_host(parts.hostname):
            raise ValueError(f"slurm url {self.url} is plain http beyond this machine: the "
                             "Slurm token would cross the network in clear; use https")  # fmt: skip


class SlurmRestClient:
    """slurmrestd's calls the console makes, each answered in slurm_model's records.

    Each call is one bounded exchange (console/connections/bounded_http.py): its
    answer at most `limits.max_bytes`, all of it within `limits.deadline_s`, and no
    redirect followed (the token would go with it). Whatever goes wrong, a junk
    answer included, is a SlurmError that names it and never holds the token.
    """

    def __init__(self, access: SlurmAccess, limits: HttpLimits = DEFAULT_LIMITS) -> None:
        self.access = access
        self.limits = limits
        self._base = f"{access.url.rstrip('/')}/slurm/{API_VERSION}"

    def ping(self) -> str:
        """The Slurm release that answered ("22.05.8")."""
        return release(self._call("GET", "/ping"))

    def jobs(self) -> list[SlurmJob]:
        """Every job slurmctld still holds (pending, running, recently ended)."""
        return self._records("/jobs", "jobs", job_from, "a Slurm job list")

    def job(self, job_id: int) -> SlurmJob:
        jobs = self._records(f"/job/{job_id}", "jobs", job_from, "a Slurm job list")
        if not jobs:
            raise SlurmError(f"Slurm has no job {job_id}")
        return jobs[0]

    def steer_job(self, job_id: int, nodes: Sequence[str]) -> None:
        """Make the job run on these nodes (its required node list, `scontrol update
        jobid=N nodelist=...`); Slurm refuses for a job that is no longer pending."""
        # v0.0.38 takes sbatch's option names; "required_nodes" is a disabled key there.
        self._call("POST", f"/job/{job_id}", {"nodelist": ",".join(nodes)})

    def cancel_job(self, job_id: int) -> None:
        """`scancel N`: SIGKILL through Slurm (a pending job ends CANCELLED)."""
        self._call("DELETE", f"/job/{job_id}")

    def nodes(self) -> list[SlurmNode]:
        return self._records("/nodes", "nodes", node_from, "a Slurm node list")

    def reservations(self) -> list[SlurmReservation]:
        return self._records("/reservations", "reservations", reservation_from,
                             "a Slurm reservation list")  # fmt: skip

    def _records(self, path: str, key: str, read: Callable[[Mapping[str, Any]], T],
                 kind: str) -> list[T]:  # fmt: skip
        answer = self._call("GET", path)
        try:
            return records(answer, key, read)
        except AnswerError as exc:
            raise self._error(f"slurmrestd at {self.access.url} answered GET {path} with "
                              f"something that is not {kind}: {exc}") from None  # fmt: skip

    def _call(self, method: str, path: str, body: Json | None = None) -> object:
        """One request; Slurm's errors[] (even with HTTP 200) become a SlurmError."""
        what = f"{method} {path}"
        headers = {
            "X-SLURM-USER-NAME": self.access.user,
            "X-SLURM-USER-TOKEN": self.access.token,
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        data = None if body is None else json.dumps(body).encode()
        log.debug("slurmrestd %s", what)
        try:
            answer = exchange(self._base + path, method, headers, data, self.limits, self._tls())
        except (HttpFailure, OSError) as exc:  # OSError: slurm_ca_file unreadable
            raise self._error(f"slurmrestd at {self.access.url}: {what}: {exc}") from None
        if 300 <= answer.status < 400:
            raise self._error(
                f"slurmrestd at {self.access.url} answered {what} with a redirect "
                f"(HTTP {answer.status}) to {_printable(answer.location) or 'nowhere'}: not "
                "followed, since your Slurm token would go with it; set slurm_url to where "
                "slurmrestd itself answers", answer.status)  # fmt: skip
        try:
            return _checked(answer.status, answer.body, what, empty_ok=method != "GET")
        except SlurmError as exc:
            raise self._error(str(exc), exc.status) from None

    def _error(self, message: str, status: int | None = None) -> SlurmError:
        """The error, with the token cut out should the server have echoed it back."""
        token = self.access.token
        if len(token) >= 8:
            message = message.replace(token, "[token]")
        return SlurmError(message, status)

    def _tls(self) -> ssl.SSLContext | None:
        if not self.access.url.startswith("https:"):
            return None
        ca = str(self.access.ca_file) if self.access.ca_file is not None else None
        return ssl.create_default_context(cafile=ca)


class ScontrolWithToken:
    """What v0.0.38 lacks, through `scontrol` authenticated by the operator's token.

    SLURM_JWT makes scontrol use auth/jwt instead of munge, so Slurm sees the
    token's user, exactly as through slurmrestd.
    """

    def __init__(self, token: str, slurm_conf: Path | None = None, scontrol: str = "scontrol"):
        self._token = token
        self._conf = slurm_conf
        self._scontrol = scontrol

    def drain(self, node: str, reason: str) -> None:
        if not reason.strip():
            raise ValueError("draining a node needs a reason (Slurm shows it to everyone)")
        self._run("update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        self._run("update", f"nodename={node}", "state=resume")

    def create_reservation(self, ask: ReservationAsk) -> None:
        self._run("create", "reservation", *reservation_words(ask))

    def delete_reservation(self, name: str) -> None:
        self._run("delete", f"reservationname={name}")

    def _run(self, *args: str) -> str:
        env = {**os.environ, "SLURM_JWT": self._token}
        if self._conf is not None:
            env["SLURM_CONF"] = str(self._conf)
        log.debug("scontrol %s", args[0])
        try:
            done = subprocess.run([self._scontrol, *args], env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT_S)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"scontrol {args[0]}: {exc}") from None
        if done.returncode != 0:
            raise SlurmError(done.stderr.strip() or f"scontrol {args[0]} failed")
        return done.stdout


def reservation_words(ask: ReservationAsk) -> list[str]:
    """`scontrol create reservation` arguments for the ask (times in UTC, Slurm's format)."""
    words = [f"reservationname={ask.name}", f"nodes={','.join(ask.nodes)}"]
    words += [f"users={','.join(ask.users)}"] if ask.users else []
    words += [f"accounts={','.join(ask.accounts)}"] if ask.accounts else []
    words.append(f"starttime={_slurm_time(ask.start) if ask.start else 'now'}")
    if ask.end is not None:
        words.append(f"endtime={_slurm_time(ask.end)}")
    elif ask.duration is not None:
        words.append(f"duration={max(1, round(ask.duration.total_seconds() / 60))}")
    words += [f"flags={','.join(ask.flags)}"] if ask.flags else []
    return words


def _checked(status: int, raw: bytes, what: str, empty_ok: bool) -> object:
    """The answer's JSON; Slurm's errors[] or an HTTP error status raise, saying what it said."""
    answer = _json(status, raw, what, empty_ok)
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if errors is not None and not isinstance(errors, list):
        raise SlurmError(f'slurmrestd answered {what} with "errors" that is not a list', status)
    said = "; ".join(_error_text(e) for e in errors or ())
    if said or status >= 400:
        raise SlurmError(f"Slurm refused {what}: {said or f'HTTP {status}'}"[:1000], status)
    return answer


def _json(status: int, raw: bytes, what: str, empty_ok: bool) -> object:
    if not raw.strip():
        if empty_ok or status >= 400:  # an action's answer, or the status says it all
            return {}
        raise SlurmError(f"slurmrestd answered {what} with nothing (no JSON at all)", status)
    try:
        return decoded(raw)
    except AnswerError as exc:
        if status >= 400:  # a proxy's HTML error page, say: its status and first words
            said = _printable(raw[:SAID_CHARS].decode(errors="replace").strip())
            raise SlurmError(f"slurmrestd {what}: HTTP {status}: {said}", status) from None
        raise SlurmError(f"slurmrestd answered {what} with {exc}", status) from None


def _error_text(error: object) -> str:
    """Slurm's description, and its error's name where the description does not hold it."""
    if not isinstance(error, dict):
        return _plain(error) or "an error Slurm did not describe"
    description, name = _plain(error.get("description")), _plain(error.get("error"))
    if name and name not in description:
        return f"{description}: {name}" if description else name
    return description or "an error Slurm did not describe"


def _plain(value: object) -> str:
    """A string or number the server said; anything else (a nested object) is not shown."""
    if isinstance(value, str) or (isinstance(value, int) and abs(value) < 10**20):
        return _printable(str(value))
    return ""


def _printable(text: str) -> str:
    """At most SAID_CHARS of what the server said, without control characters."""
    return "".join(c for c in text[:SAID_CHARS] if c.isprintable())


def _slurm_time(when: datetime) -> str:
    # Slurm reads times in slurmctld's local zone; an aware time is sent as UTC epoch.
    return f"uts{int(when.timestamp())}" if when.tzinfo else when.strftime("%Y-%m-%dT%H:%M:%S")

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
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from console.connections.addresses import is_loopback_host
from console.fleet.slurm_model import (
    ReservationAsk,
    SlurmJob,
    SlurmNode,
    SlurmReservation,
    gpus_asked,
    minutes_or_unlimited,
    parse_gres,
)

log = logging.getLogger(__name__)

# The one place the REST API version is named.
API_VERSION: Final = "v0.0.38"
SUPPORTED_SLURM: Final = "22.05 (OpenAPI v0.0.38; 23.02 still serves it)"
TIMEOUT_S: Final = 10.0
Json = dict[str, Any]


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
    """slurmrestd's calls the console makes, each answered in slurm_model's records."""

    def __init__(self, access: SlurmAccess, timeout_s: float = TIMEOUT_S) -> None:
        self.access = access
        self._timeout_s = timeout_s
        self._base = f"{access.url.rstrip('/')}/slurm/{API_VERSION}"

    def ping(self) -> str:
        """The Slurm release that answered ("22.05.8")."""
        meta = self._call("GET", "/ping").get("meta", {})
        return str(meta.get("Slurm", {}).get("release", "unknown"))

    def jobs(self) -> list[SlurmJob]:
        """Every job slurmctld still holds (pending, running, recently ended)."""
        return [job_from(j) for j in self._call("GET", "/jobs").get("jobs", [])]

    def job(self, job_id: int) -> SlurmJob:
        jobs = self._call("GET", f"/job/{job_id}").get("jobs", [])
        if not jobs:
            raise SlurmError(f"Slurm has no job {job_id}")
        return job_from(jobs[0])

    def steer_job(self, job_id: int, nodes: Sequence[str]) -> None:
        """Make the job run on these nodes (its required node list, `scontrol update
        jobid=N nodelist=...`); Slurm refuses for a job that is no longer pending."""
        # v0.0.38 takes sbatch's option names; "required_nodes" is a disabled key there.
        self._call("POST", f"/job/{job_id}", {"nodelist": ",".join(nodes)})

    def cancel_job(self, job_id: int) -> None:
        """`scancel N`: SIGKILL through Slurm (a pending job ends CANCELLED)."""
        self._call("DELETE", f"/job/{job_id}")

    def nodes(self) -> list[SlurmNode]:
        return [node_from(n) for n in self._call("GET", "/nodes").get("nodes", [])]

    def reservations(self) -> list[SlurmReservation]:
        answer = self._call("GET", "/reservations").get("reservations", [])
        return [reservation_from(r) for r in answer]

    def _call(self, method: str, path: str, body: Json | None = None) -> Json:
        """One request; Slurm's errors[] (even with HTTP 200) become a SlurmError."""
        request = urllib.request.Request(
            self._base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "X-SLURM-USER-NAME": self.access.user,
                "X-SLURM-USER-TOKEN": self.access.token,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        log.debug("slurmrestd %s %s", method, path)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._tls()) as r:
                return _checked(r.status, r.read(), f"{method} {path}")
        except urllib.error.HTTPError as exc:
            return _checked(exc.code, exc.read(), f"{method} {path}")
        except OSError as exc:
            raise SlurmError(f"slurmrestd at {self.access.url}: {exc}") from None

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


def job_from(j: Mapping[str, Any]) -> SlurmJob:
    """A job of v0.0.38's /jobs answer."""
    required = str(j.get("required_nodes") or "")
    return SlurmJob(
        job_id=int(j["job_id"]),
        name=str(j.get("name", "")),
        user=str(j.get("user_name", "")),
        account=str(j.get("account", "")),
        partition=str(j.get("partition", "")),
        state=str(j.get("job_state", "")),
        reason=str(j.get("state_reason", "")),
        gpus=_gpus_of(j),
        time_limit=minutes_or_unlimited(j.get("time_limit")),
        priority=int(j.get("priority") or 0),
        submit_time=_when(j.get("submit_time")),
        required_nodes=tuple(n for n in required.split(",") if n),
        nodes=str(j.get("nodes") or ""),
    )


def _gpus_of(j: Mapping[str, Any]) -> int | None:
    tres_req, per_job, per_node = (
        str(j.get(k) or "") for k in ("tres_req_str", "tres_per_job", "tres_per_node")
    )
    return gpus_asked(tres_req, per_job, per_node, j.get("node_count"))


def node_from(n: Mapping[str, Any]) -> SlurmNode:
    """A node of v0.0.38's /nodes answer."""
    return SlurmNode(
        name=str(n["name"]),
        state=str(n.get("state", "")),
        flags=tuple(str(f) for f in n.get("state_flags") or ()),
        reason=str(n.get("reason") or ""),
        gres=parse_gres(str(n.get("gres") or "")),
        gres_used=parse_gres(str(n.get("gres_used") or "")),
        partitions=tuple(str(p) for p in n.get("partitions") or ()),
    )


def reservation_from(r: Mapping[str, Any]) -> SlurmReservation:
    """A reservation of v0.0.38's /reservations answer."""
    return SlurmReservation(
        name=str(r["name"]),
        nodes=str(r.get("node_list") or ""),
        start=_when(r.get("start_time")),
        end=_when(r.get("end_time")),
        users=_names(r.get("users")),
        accounts=_names(r.get("accounts")),
        flags=tuple(str(f) for f in r.get("flags") or ()),
    )


def _checked(status: int, raw: bytes, what: str) -> Json:
    try:
        answer = json.loads(raw) if raw.strip() else {}
    except ValueError:
        text = raw.decode(errors="replace").strip()[:200]
        raise SlurmError(f"slurmrestd {what}: HTTP {status}: {text}", status) from None
    errors = answer.get("errors") or [] if isinstance(answer, dict) else []
    if errors or status >= 400:
        said = "; ".join(_error_text(e) for e in errors) or f"HTTP {status}"
        raise SlurmError(f"Slurm refused {what}: {said}", status)
    return answer if isinstance(answer, dict) else {}


def _error_text(error: Mapping[str, Any]) -> str:
    """Slurm's description, and its error's name where the description does not hold it."""
    description, name = str(error.get("description") or ""), str(error.get("error") or "")
    if name and name not in description:
        return f"{description}: {name}" if description else name
    return description or str(error)


def _when(epoch: object) -> datetime:
    return datetime.fromtimestamp(int(epoch or 0), UTC)  # type: ignore[call-overload]


def _names(text: object) -> tuple[str, ...]:
    return tuple(n for n in str(text or "").split(",") if n and n != "(null)")


def _slurm_time(when: datetime) -> str:
    # Slurm reads times in slurmctld's local zone; an aware time is sent as UTC epoch.
    return f"uts{int(when.timestamp())}" if when.tzinfo else when.strftime("%Y-%m-%dT%H:%M:%S")

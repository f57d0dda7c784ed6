"""Who the console is on each node (WhoAmI), and what that role and the node's policy allow.

The console greys out or hides what the caller's role does not allow, and
refuses a kill the node's kill policy forbids, so a person is told before
asking; the daemon still decides every call.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.fleet.durations import duration_text
from gpufleet import policy
from gpufleet.policy import Role

_HOW = {"none": "without authentication", "client-certificate": "by client certificate"}


@dataclass(frozen=True)
class Identity:
    """The caller as a node sees it, and that node's kill policy."""

    user: str
    role: Role
    teams: tuple[str, ...] = ()
    # "token" (static), "jwt" (signed, checked against the node's JWKS),
    # "client-certificate" or "none".
    authenticated_by: str = "token"
    # When the credential stops working on this node; None: it does not expire.
    expires_unix_ms: int | None = None
    # The node's allow_kill_job_processes: may KillProcess signal a Slurm job's process?
    allow_kill_job_processes: bool = False
    token_issuer: str = ""  # a JWT's iss, "" for other credentials
    token_id: str = ""  # a JWT's jti

    @property
    def holders(self) -> tuple[str, ...]:
        """The names this caller may act for: itself and team:NAME of its teams."""
        return policy.holders(self.user, self.teams)

    def may_act_for(self, owner: str | None) -> bool:
        return policy.may_act_for(self.role, self.user, self.teams, owner)

    def describe(self, now_unix_ms: int | None = None) -> str:
        """ "alice (operator; teams ml) by jwt from https://sso.example.com, expires in 6 h".

        Without `now_unix_ms` the expiry is left out (a text that does not age).
        """
        teams = f"; teams {', '.join(self.teams)}" if self.teams else ""
        how = _HOW.get(self.authenticated_by, f"by {self.authenticated_by}")
        issuer = f" from {self.token_issuer}" if self.token_issuer else ""
        text = f"{self.user} ({self.role.label}{teams}) {how}{issuer}"
        if now_unix_ms is not None and self.expires_unix_ms is not None:
            text += f", {expiry_text(self.expires_unix_ms, now_unix_ms)}"
        return text

    def kill_policy(self) -> str:
        """ "Slurm job processes: refused (allow_kill_job_processes = false)"."""
        allowed = self.allow_kill_job_processes
        return (f"Slurm job processes: {'may be killed' if allowed else 'refused'} "
                f"(allow_kill_job_processes = {str(allowed).lower()})")  # fmt: skip

    def expired(self, now_unix_ms: int) -> bool:
        return self.expires_unix_ms is not None and now_unix_ms >= self.expires_unix_ms


def role_refusal(identity: Identity | None, needed: Role, node_name: str) -> str | None:
    """Why this caller may not do what needs `needed` on the node; None when it may.

    An unknown identity (not connected yet, or a daemon without WhoAmI) refuses
    nothing here: the node decides.
    """
    if identity is None or identity.role >= needed:
        return None
    return (f"needs the {needed.label} role ({identity.user} is {identity.role.label} "
            f"on {node_name})")  # fmt: skip


def job_kill_refusal(identity: Identity | None, node_name: str, slurm_job_id: str) -> str | None:
    """Why the node will not kill a process of Slurm job `slurm_job_id` ("" for none);
    None when its policy allows it (gpufleet.policy.job_process_protected).

    Exact, from the node's own word (WhoAmI's allow_kill_job_processes); an
    unknown identity refuses nothing here: the node decides.
    """
    if identity is None:
        return None
    if not policy.job_process_protected(slurm_job_id, identity.allow_kill_job_processes):
        return None
    return (f"{node_name} refuses to kill processes of Slurm jobs "
            "(allow_kill_job_processes = false)")  # fmt: skip


def expiry_text(expires_unix_ms: int, now_unix_ms: int) -> str:
    """ "expires in 6 h", "expires in 14 min", "expired 3 min ago"."""
    left_s = (expires_unix_ms - now_unix_ms) / 1000
    if left_s <= 0:
        return f"expired {duration_text(-left_s)} ago"
    return f"expires in {duration_text(left_s)}"

"""Expiry announcements: a credential about to expire is said before it does, once per threshold.

Per credential, not per node: nodes that took one token report the same user,
way of signing in and expiry, and are announced together ("on 12 nodes").
Thresholds: 15 and 2 minutes before expiry, and at expiry; for a credential
that had less than an hour left when the console first saw it, the same
shares of that life (a 20-minute token: 5 minutes and 40 s before); one
with less than 2 minutes left when first seen, at once. Plain Python, any
clock (unix ms).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.fleet.identity import Identity, expiry_text

HOUR_MS = 3_600_000
THRESHOLDS_MS = (15 * 60_000, 2 * 60_000, 0)  # before expiry, for a life of an hour or more

NodeIdentity = tuple[str, Identity | None]  # (node name, who we are there)
CredentialKey = tuple[str, str, str, int]  # user, authenticated_by, issuer, expiry


@dataclass(frozen=True)
class ExpiryNotice:
    title: str  # "Token expires in 15 min"
    body: str  # who, where, until when, and what to do
    urgent: bool  # the last threshold, or expired


def thresholds_ms(lifetime_ms: int) -> tuple[int, ...]:
    """When to announce, before expiry: scaled down for a credential shorter than an hour.

    One first seen with less than the last threshold left (2 min) is announced
    at once: it is an old credential near its end, not a fresh one that short.
    """
    lifetime_ms = max(0, lifetime_ms)
    if lifetime_ms <= THRESHOLDS_MS[-2]:
        return (lifetime_ms, 0)
    scale = min(1.0, lifetime_ms / HOUR_MS)
    return tuple(round(t * scale) for t in THRESHOLDS_MS)


class ExpiryAnnouncer:
    def __init__(self, profile: str, refreshes: bool) -> None:
        self._profile = profile or "default"
        self._refreshes = refreshes  # token_command: the console fetches a fresh one itself
        self._first_seen: dict[CredentialKey, int] = {}
        self._announced: dict[CredentialKey, int] = {}  # how many thresholds are behind us

    def due(self, nodes: Iterable[NodeIdentity], now_ms: int) -> list[ExpiryNotice]:
        """What to announce now (each credential at most once per threshold)."""
        groups: dict[CredentialKey, list[str]] = {}
        for name, identity in nodes:
            if identity is not None and identity.expires_unix_ms is not None:
                key = (identity.user, identity.authenticated_by, identity.token_issuer,
                       identity.expires_unix_ms)  # fmt: skip
                groups.setdefault(key, []).append(name)
        notices = [n for key, names in groups.items() if (n := self._check(key, names, now_ms))]
        for gone in set(self._first_seen) - set(groups):  # a credential no node reports
            del self._first_seen[gone]
            self._announced.pop(gone, None)
        return notices

    def _check(self, key: CredentialKey, names: list[str], now_ms: int) -> ExpiryNotice | None:
        first = self._first_seen.setdefault(key, now_ms)
        expires = key[3]
        steps = thresholds_ms(expires - first)
        passed = sum(1 for t in steps if now_ms >= expires - t)
        if passed <= self._announced.get(key, 0):
            return None
        self._announced[key] = passed
        return self._notice(key, names, now_ms, urgent=passed >= len(steps) - 1)

    def _notice(
        self, key: CredentialKey, names: list[str], now_ms: int, urgent: bool
    ) -> ExpiryNotice:
        user, how, issuer, expires = key
        what = "Token" if how in ("token", "jwt") else "Credential"
        left = expiry_text(expires, now_ms)
        where = (
            names[0] if len(names) == 1 else f"{len(names)} nodes ({', '.join(sorted(names)[:3])}"
        )
        if len(names) > 3:
            where += ", …"
        where += "" if len(names) == 1 else ")"
        source = f" from {issuer}" if issuer else ""
        if self._refreshes:
            then = "the console asks token_command for a fresh one"
        else:
            then = f"sign in again: gpufleet console login --profile {self._profile}"
        body = (f"The {what.lower()} of profile {self._profile} ({user} by {how}{source}) "
                f"{left} on {where}; {then}.")  # fmt: skip
        return ExpiryNotice(f"{what} {left}", body, urgent)

"""The [alertmanager] table of the daemon's config: where alerts go, how, with what labels.

    [alertmanager]
    urls = ["https://am-1.example:9093", "https://am-2.example:9093"]
    labels = { cluster = "a", site = "b", rack = "r1" }   # on every pushed alert
    resend_interval_s = 30         # firing alerts are re-sent this often (1 .. 3600)
    timeout_s = 5                  # per request and URL
    ca_file = "/etc/gpufleet/am-ca.crt"        # verify https:// against this CA
    cert_file = "/etc/gpufleet/am-client.crt"  # optional client certificate ...
    key_file = "/etc/gpufleet/am-client.key"   # ... and its key
    basic_auth_user = "gpufleet"               # with basic_auth_password_file, or
    basic_auth_password_file = "/etc/gpufleet/am-password"
    # bearer_token_file = "/etc/gpufleet/am-token"
    watchdog = true                # the always-firing GpufleetWatchdog heartbeat
    critical_hold_s = 86400        # endsAt of a firing critical: now + this

`alertmanager_urls` in [daemon] (and --alertmanager) still work and add to `urls`.
Secrets come only from files, read once when the config is loaded; they are never
logged, and never sent in the clear to anything but loopback.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from node_daemon.errors import ConfigError

TABLE = "[alertmanager]"
# Labels the pusher sets on each alert itself; the node's labels must not clash with them.
ALERT_LABELS = ("alertname", "severity", "gpu", "UUID", "pid")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# endsAt = now + this many resend intervals, as Prometheus does (its default is 4).
ENDS_AFTER_RESENDS = 4
_KEYS = frozenset({
    "urls", "labels", "resend_interval_s", "timeout_s", "ca_file", "cert_file", "key_file",
    "basic_auth_user", "basic_auth_password_file", "bearer_token_file", "watchdog",
    "critical_hold_s",
})  # fmt: skip


@dataclass(frozen=True)
class BasicAuth:
    user: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class BearerToken:
    token: str = field(repr=False)


@dataclass(frozen=True)
class AlertmanagerSettings:
    """Where and how the daemon pushes alerts; see the module docstring for each key.

    Constructing one checks what would be unsafe or rejected whatever the source
    (URLs, labels, credentials over plain http); the ranges of the config file
    (resend 1 .. 3600 s, hold >= 4 resends) are checked by `parse_alertmanager`.
    """

    urls: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    resend_interval_s: float = 30.0
    timeout_s: float = 5.0
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    auth: BasicAuth | BearerToken | None = None
    watchdog: bool = True
    critical_hold_s: float = 86400.0

    def __post_init__(self) -> None:
        if self.resend_interval_s <= 0 or self.timeout_s <= 0 or self.critical_hold_s <= 0:
            raise ConfigError(
                f"{TABLE}: resend_interval_s, timeout_s and critical_hold_s must be positive"
            )
        for url in self.urls:
            check_url(url, self.auth)
        try:
            validate_node_labels(self.labels, may_set_node=True)
        except ValueError as exc:
            raise ConfigError(f"{TABLE} labels: {exc}") from None

    def with_urls(self, extra: Iterable[str]) -> AlertmanagerSettings:
        """These settings with `extra` URLs added after its own, each URL once."""
        return replace(self, urls=unique_urls((*self.urls, *extra)))

    def node_labels(self, node: str) -> dict[str, str]:
        """The labels of every pushed alert: node=`node`, then the configured ones (which win)."""
        return {"node": node, **self.labels}


def validate_node_labels(
    node_labels: Mapping[str, str], may_set_node: bool = True
) -> dict[str, str]:
    """The node's labels, or ValueError naming what Alertmanager would reject or we overwrite."""
    for name, value in node_labels.items():
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"invalid Alertmanager label name {name!r}")
        if name in ALERT_LABELS:
            raise ValueError(f"node label {name!r} clashes with an alert label {ALERT_LABELS}")
        if not isinstance(value, str) or not value:
            raise ValueError(f"node label {name!r} must have a non-empty string value")
    return dict(node_labels)


def unique_urls(urls: Iterable[str]) -> tuple[str, ...]:
    """`urls` without trailing slashes, each once, in their first order."""
    return tuple(dict.fromkeys(url.rstrip("/") for url in urls))


def is_loopback_url(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def check_url(url: str, auth: BasicAuth | BearerToken | None) -> None:
    """ConfigError for a URL that is not http(s), or that would carry credentials in the clear."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(f"{TABLE} urls: a URL must start with http:// or https://: {url!r}")
    if "@" in urllib.parse.urlsplit(url).netloc:
        raise ConfigError(
            f"{TABLE}: an Alertmanager URL must not hold credentials (they would be logged): "
            "use basic_auth_user and basic_auth_password_file"
        )
    if auth is not None and url.startswith("http://") and not is_loopback_url(url):
        kind = "basic_auth_user" if isinstance(auth, BasicAuth) else "bearer_token_file"
        raise ConfigError(
            f"{TABLE}: refusing to send credentials ({kind}) over plain http:// to {url}: "
            "anyone on the path could read them. Use https:// (with ca_file if the server's "
            "certificate is not from a system CA), or a loopback address."
        )


def parse_alertmanager(raw: Any, source: str) -> AlertmanagerSettings:
    """The [alertmanager] table of `source`; ConfigError naming the key that is wrong."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: {TABLE} must be a table")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)} in {TABLE}")
    resend = _number(raw, "resend_interval_s", 30.0, source, 1, 3600)
    hold = _number(raw, "critical_hold_s", 86400.0, source, ENDS_AFTER_RESENDS * resend, None)
    cert_file, key_file = _file(raw, "cert_file", source), _file(raw, "key_file", source)
    if key_file is not None and cert_file is None:
        raise ConfigError(f"{source}: {TABLE} key_file needs cert_file (the client certificate)")
    urls, labels = _urls(raw.get("urls", []), source), _labels(raw.get("labels", {}), source)
    timeout, ca_file = (
        _number(raw, "timeout_s", 5.0, source, 0.1, 300),
        _file(raw, "ca_file", source),
    )
    auth, watchdog = _auth(raw, source), _bool(raw, "watchdog", True, source)
    try:
        return AlertmanagerSettings(
            urls=urls, labels=labels, resend_interval_s=resend, timeout_s=timeout,
            ca_file=ca_file, cert_file=cert_file, key_file=key_file, auth=auth,
            watchdog=watchdog, critical_hold_s=hold,
        )  # fmt: skip
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _number(
    raw: dict[str, Any], key: str, default: float, source: str, low: float, high: float | None
) -> float:
    value = raw.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= low
    if not ok or (high is not None and value > high):
        expected = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
        raise ConfigError(f"{source}: {TABLE} {key} must be seconds {expected}, got {value!r}")
    return float(value)


def _bool(raw: dict[str, Any], key: str, default: bool, source: str) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: {TABLE} {key} must be true or false, got {value!r}")
    return value


def _urls(value: Any, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise ConfigError(f"{source}: {TABLE} urls must be a list of http(s):// URLs")
    return unique_urls(value)


def _labels(value: Any, source: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f'{source}: {TABLE} labels must be a table, e.g. {{ cluster = "a" }}')
    return dict(value)  # checked by AlertmanagerSettings


def _file(raw: dict[str, Any], key: str, source: str) -> Path | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {TABLE} {key} must be a file path")
    path = Path(value)
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{source}: {TABLE} {key}: cannot read {path}: {exc.strerror}") from None
    return path


def _secret(raw: dict[str, Any], key: str, source: str) -> str:
    path = _file(raw, key, source)
    assert path is not None  # callers ask only for keys that are set
    try:
        # Trimmed as Prometheus trims its password_file and bearer_token_file.
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{source}: {TABLE} {key}: cannot read {path}: {why}") from None
    if not secret:
        raise ConfigError(f"{source}: {TABLE} {key}: {path} is empty")
    return secret


def _auth(raw: dict[str, Any], source: str) -> BasicAuth | BearerToken | None:
    user, password_file = raw.get("basic_auth_user"), raw.get("basic_auth_password_file")
    token_file = raw.get("bearer_token_file")
    if (user is not None or password_file is not None) and token_file is not None:
        raise ConfigError(
            f"{source}: {TABLE} sets both basic_auth_user/basic_auth_password_file and "
            "bearer_token_file: choose one way to authenticate"
        )
    if token_file is not None:
        return BearerToken(_secret(raw, "bearer_token_file", source))
    if user is None and password_file is None:
        return None
    if not isinstance(user, str) or not user or ":" in user:
        raise ConfigError(
            f"{source}: {TABLE} basic_auth_user must be a user name without ':' "
            "(set with basic_auth_password_file)"
        )
    if password_file is None:
        raise ConfigError(f"{source}: {TABLE} basic_auth_user needs basic_auth_password_file")
    return BasicAuth(user, _secret(raw, "basic_auth_password_file", source))

"""HTTP to Alertmanager's API v2: TLS, authentication, JSON in and out, errors worded once.

One `AmTransport` holds what every URL shares (the TLS context, the Authorization
header, the timeout); one `AmClient` per base URL speaks the few calls the pusher
needs. Every failure is an `AmError` whose message is safe to log: it names the
URL and what went wrong, never a header or a secret.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from node_daemon.alerts.am_settings import TABLE, AlertmanagerSettings, BasicAuth, check_url
from node_daemon.errors import ConfigError

Json = Any
# How much of an error answer's body goes into a log line.
_BODY_IN_ERROR = 300


class AmError(Exception):
    """A request to Alertmanager failed; the message says why and holds no secret."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: they would carry the Authorization header to wherever they point."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def tls_context(settings: AlertmanagerSettings) -> ssl.SSLContext:
    """The system CAs, or only `ca_file`; with the client certificate if one is set."""
    try:
        context = ssl.create_default_context(cafile=settings.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{TABLE} ca_file {settings.ca_file}: not a PEM CA file ({exc})"
        ) from None
    if settings.cert_file is not None:
        try:
            context.load_cert_chain(settings.cert_file, settings.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{TABLE} cert_file {settings.cert_file} / key_file {settings.key_file}: "
                f"not a PEM certificate and its key ({exc})"
            ) from None
    return context


def authorization(settings: AlertmanagerSettings) -> str | None:
    """The Authorization header value, or None without credentials."""
    auth = settings.auth
    if auth is None:
        return None
    if isinstance(auth, BasicAuth):
        pair = f"{auth.user}:{auth.password}".encode()
        return f"Basic {base64.b64encode(pair).decode('ascii')}"
    return f"Bearer {auth.token}"


def describe(exc: BaseException) -> str:
    """One line for the log: the HTTP status and body, or the network reason."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            body = exc.read().decode(errors="replace").strip()
        except (OSError, http.client.HTTPException):
            body = ""
        return f"HTTP {exc.code}: {body[:_BODY_IN_ERROR]}" if body else f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


class AmTransport:
    """JSON over HTTP(S) with the configured TLS, credentials and timeout."""

    def __init__(self, settings: AlertmanagerSettings) -> None:
        self._timeout_s = settings.timeout_s
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if (value := authorization(settings)) is not None:
            self._headers["Authorization"] = value
        self._with_auth = settings.auth
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=tls_context(settings)), _NoRedirect()
        )

    def check(self, url: str) -> None:
        """ConfigError for a URL these credentials must not be sent to."""
        check_url(url, self._with_auth)

    def request(self, method: str, url: str, body: Json = None) -> Json:
        """The decoded JSON answer (None for an empty one); AmError on any failure."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers=self._headers, method=method)
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                raw = response.read()
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts are OSErrors
            raise AmError(describe(exc)) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise AmError(f"answer is not JSON: {raw[:_BODY_IN_ERROR]!r}") from None


class AmClient:
    """The API v2 calls of one Alertmanager at base URL `url` (e.g. http://127.0.0.1:9093)."""

    def __init__(self, url: str, transport: AmTransport) -> None:
        self.url = url.rstrip("/")
        transport.check(self.url)
        self._api = f"{self.url}/api/v2"
        self._transport = transport

    def post_alerts(self, alerts: Sequence[Mapping[str, object]]) -> None:
        self._transport.request("POST", f"{self._api}/alerts", list(alerts))

    def alerts(self, matchers: Mapping[str, str]) -> list[Json]:
        """The alerts Alertmanager holds (active, silenced, inhibited) carrying `matchers`."""
        query = [("filter", f"{name}={json.dumps(value)}") for name, value in matchers.items()]
        return self._list("GET", f"{self._api}/alerts?{urllib.parse.urlencode(query)}")

    def silences(self) -> list[Json]:
        return self._list("GET", f"{self._api}/silences")

    def create_silence(self, silence: Mapping[str, object]) -> str:
        """POST a new silence; its id."""
        answer = self._transport.request("POST", f"{self._api}/silences", dict(silence))
        if not isinstance(answer, dict) or not isinstance(answer.get("silenceID"), str):
            raise AmError(f"POST /api/v2/silences answered without a silenceID: {answer!r}")
        return answer["silenceID"]

    def expire_silence(self, silence_id: str) -> None:
        quoted = urllib.parse.quote(silence_id, safe="")
        self._transport.request("DELETE", f"{self._api}/silence/{quoted}")

    def _list(self, method: str, url: str) -> list[Json]:
        answer = self._transport.request(method, url)
        if not isinstance(answer, list):
            raise AmError(
                f"{url.removeprefix(self.url)} answered {type(answer).__name__}, not a list"
            )
        return answer

"""The gRPC port's TLS credentials, whose certificate a reload can replace.

gRPC fixes a port's credentials when it binds, but dynamic credentials ask a
fetcher for a new certificate configuration at each new connection
(grpc.dynamic_ssl_server_credentials). A reload hands over the new certificate,
key and client CA, checked first; the next handshake uses them, while
connections already open (and their streams) keep the certificate they began
with. Whether client certificates are required is fixed at bind: changing it
needs a restart (node_daemon.reload).
"""

from __future__ import annotations

import ssl
import threading
from pathlib import Path

import grpc

from node_daemon.auth.settings import TlsSettings
from node_daemon.errors import ConfigError


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the TLS {what} {path}: {exc.strerror}") from None


def check_tls_files(tls: TlsSettings) -> None:
    """ConfigError unless the certificate and key load and belong together, and the
    client CA (if any) is a PEM certificate: the checks a handshake would fail on."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(str(tls.cert), str(tls.key))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"[tls] cert {tls.cert} and key {tls.key} do not load as a PEM certificate and "
            f"its private key: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if tls.client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(tls.client_ca))
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ConfigError(
                f"[tls] client_ca {tls.client_ca} is not a PEM certificate: {reason}"
            ) from None


def _configuration(tls: TlsSettings) -> grpc.ServerCertificateConfiguration:
    check_tls_files(tls)
    key, cert = _read(tls.key, "key"), _read(tls.cert, "certificate")
    client_ca = _read(tls.client_ca, "client CA") if tls.client_ca else None
    return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)


class ReloadableServerCredentials:
    """Server credentials for `tls`; `prepare` then `use` swaps the certificate for new
    connections."""

    def __init__(self, tls: TlsSettings) -> None:
        self._pending: grpc.ServerCertificateConfiguration | None = None
        self._lock = threading.Lock()
        self.require_client_cert = tls.require_client_cert
        self.credentials = grpc.dynamic_ssl_server_credentials(
            _configuration(tls), self._fetch, require_client_authentication=tls.require_client_cert
        )

    def prepare(self, tls: TlsSettings) -> grpc.ServerCertificateConfiguration:
        """`tls`'s files read and checked, for `use`; ConfigError (nothing changed) if they do
        not load, or if `require_client_cert` would change (it needs a restart)."""
        if tls.require_client_cert != self.require_client_cert:
            raise ConfigError("[tls] require_client_cert changes only with a restart")
        return _configuration(tls)

    def use(self, configuration: grpc.ServerCertificateConfiguration) -> None:
        """Hand `configuration` to the next handshake; connections open keep theirs."""
        with self._lock:
            self._pending = configuration

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC at each new connection: the new configuration once, else None
        (keep the one in use). Quick, no I/O: the files were read by `reload`."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

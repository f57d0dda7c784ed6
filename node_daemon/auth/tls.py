"""TLS for the daemon's gRPC port, optionally mutual."""

from __future__ import annotations

import grpc

from node_daemon.auth.settings import TlsSettings
from node_daemon.errors import ConfigError


def _read(path: object, what: str) -> bytes:
    try:
        with open(str(path), "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read the TLS {what} {path}: {exc.strerror}") from exc


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    key, cert = _read(tls.key, "key"), _read(tls.cert, "certificate")
    client_ca = _read(tls.client_ca, "client CA") if tls.client_ca else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=tls.require_client_cert
    )

"""Reading a client certificate's common name from its DER, as the daemon does."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from node_daemon.auth.certificate import (
    BadCertificateName,
    certificate_user_name,
    common_names,
    pem_to_der,
)
from tests.certs import Authority


def certificate(*attributes: x509.NameAttribute) -> bytes:
    key, now = ec.generate_private_key(ec.SECP256R1()), dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name(list(attributes)))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")]))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM)


def cn(value: str) -> x509.NameAttribute:
    return x509.NameAttribute(NameOID.COMMON_NAME, value)


@pytest.mark.parametrize("name", ["ada", "zoë", "team-ml.robot_01", "Ada Lovelace"])
def test_ordinary_names_come_through_whole(name: str) -> None:
    pem = Authority().issue(name).cert
    assert certificate_user_name(pem) == name


def test_other_attributes_are_not_the_name() -> None:
    pem = certificate(x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mallory"), cn("ada"))
    assert common_names(pem_to_der(pem)) == ["ada"]


def test_two_common_names_are_refused() -> None:
    pem = certificate(cn("ada"), cn("mallory"))
    with pytest.raises(BadCertificateName, match="2 common names"):
        certificate_user_name(pem)


def test_a_damaged_certificate_is_refused_not_crashed_on() -> None:
    der = pem_to_der(Authority().issue("ada").cert)
    with pytest.raises(BadCertificateName):
        common_names(der[:40])
    with pytest.raises(BadCertificateName, match="PEM"):
        certificate_user_name(b"not a certificate")

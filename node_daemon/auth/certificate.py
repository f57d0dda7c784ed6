"""The common name of a client certificate, read from the certificate itself.

gRPC hands the interceptor the CN as a C string (`x509_common_name`): a CN of
"ada\\0mallory" arrives as "ada", another user's name. So the CN is read from
the peer's certificate (`x509_pem_cert`) with a small DER reader, and a name
that holds control or format characters, or a certificate with more than one
CN, is refused.
"""

from __future__ import annotations

import base64
import binascii
import unicodedata

CN_OID = bytes.fromhex("550403")  # 2.5.4.3 commonName
SEQUENCE, SET, OID, CONTEXT_0 = 0x30, 0x31, 0x06, 0xA0
_CODECS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1E: "utf-16-be",
           0x1C: "utf-32-be"}  # fmt: skip


class BadCertificateName(ValueError):
    """The client certificate's name cannot identify anyone; the message says why."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the content, end of the content) of the DER element at `pos`."""
    if pos + 2 > len(data):
        raise BadCertificateName("the client certificate is truncated")
    tag, length, pos = data[pos], data[pos + 1], pos + 2
    if length & 0x80:
        size = length & 0x7F
        if not 1 <= size <= 4 or pos + size > len(data):
            raise BadCertificateName("the client certificate has a bad length")
        length, pos = int.from_bytes(data[pos : pos + size], "big"), pos + size
    if pos + length > len(data):
        raise BadCertificateName("the client certificate is truncated")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    found, pos = [], start
    while pos < end:
        element = _tlv(data, pos)
        found.append(element)
        pos = element[2]
    return found


def _subject(der: bytes) -> tuple[int, int]:
    """Start and end of the subject Name inside a DER certificate."""
    _, cert_start, cert_end = _tlv(der, 0)
    _, tbs_start, tbs_end = _tlv(der, cert_start)
    fields = _children(der, tbs_start, min(tbs_end, cert_end))
    if fields and fields[0][0] == CONTEXT_0:  # the optional version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != SEQUENCE:
        raise BadCertificateName("the client certificate has no subject")
    return fields[4][1], fields[4][2]


def common_names(der: bytes) -> list[str]:
    """Every CN in the certificate's subject, decoded (BadCertificateName if undecodable)."""
    start, end = _subject(der)
    names = []
    for _, set_start, set_end in _children(der, start, end):
        for _, pair_start, pair_end in _children(der, set_start, set_end):
            parts = _children(der, pair_start, pair_end)
            if len(parts) != 2 or parts[0][0] != OID:
                continue
            if der[parts[0][1] : parts[0][2]] == CN_OID:
                names.append(_decode(parts[1][0], der[parts[1][1] : parts[1][2]]))
    return names


def _decode(tag: int, raw: bytes) -> str:
    codec = _CODECS.get(tag)
    if codec is None:
        raise BadCertificateName(f"the client certificate's CN has an unknown string type {tag}")
    try:
        return raw.decode(codec)
    except UnicodeDecodeError as exc:
        raise BadCertificateName(f"the client certificate's CN is not valid {codec}") from exc


def pem_to_der(pem: bytes) -> bytes:
    """The first certificate of a PEM text, as DER."""
    text = pem.decode("ascii", errors="replace")
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    if begin not in text or end not in text:
        raise BadCertificateName("the client certificate is not PEM")
    body = text.split(begin, 1)[1].split(end, 1)[0]
    try:
        return base64.b64decode("".join(body.split()), validate=True)
    except binascii.Error as exc:
        raise BadCertificateName("the client certificate is not valid base64") from exc


def check_name(name: str) -> str:
    """The name, if it may name a user: no control or format characters (NUL, newline,
    escape, zero-width and bidi marks), not empty."""
    for position, char in enumerate(name):
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            raise BadCertificateName(
                f"client certificate name {name!r} has a control character "
                f"(U+{ord(char):04X} at position {position}): refused"
            )
    if not name:
        raise BadCertificateName("client certificate with an empty common name: refused")
    return name


def certificate_user_name(pem: bytes) -> str:
    """The one CN of a client certificate (PEM), checked; BadCertificateName otherwise."""
    names = common_names(pem_to_der(pem))
    if len(names) != 1:
        raise BadCertificateName(
            f"the client certificate has {len(names)} common names; exactly one must name the user"
        )
    return check_name(names[0])

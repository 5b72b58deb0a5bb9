"""A throwaway PKI for the TLS tests: a CA, a server certificate for ``localhost`` and a client
certificate, all EC P-256 and valid for a day (``make_pki``; the ``pki`` fixture in conftest)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _cert(name: str, issuer_key, issuer_name, key, *, ca: bool = False, san: bool = False):
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_pki(d: Path) -> dict[str, Path]:
    """PEM files in ``d``: ``ca``, ``server.crt``/``server.key``, ``client.crt``/``client.key``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = _cert("test-ca", ca_key, ca_name, ca_key, ca=True)
    files = {"ca": ca.public_bytes(serialization.Encoding.PEM)}
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(who, ca_key, ca_name, key, san=(who == "server"))
        files[f"{who}.crt"] = cert.public_bytes(serialization.Encoding.PEM)
        files[f"{who}.key"] = _pem_key(key)
    out = {}
    for name, data in files.items():
        (d / name).write_bytes(data)
        out[name] = d / name
    return out

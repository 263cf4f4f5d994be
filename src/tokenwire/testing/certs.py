"""Certificates for tests and benchmarks on 127.0.0.1 (the ``cryptography`` package).

``self_signed`` makes a CA and a ``localhost`` server certificate signed by it
(trust the CA: ``cafile``); ``short_lived`` makes one self-signed certificate
valid for a few days, the kind a browser's WebTransport accepts through
``serverCertificateHashes`` (ECDSA P-256, at most 14 days), with its SHA-256.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["WebTransportTLS", "self_signed", "short_lived", "webtransport_tls"]


def self_signed(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a ``localhost``/127.0.0.1 server certificate signed by it.

    Returns ``(cert, key, ca)`` paths (PEM). Uses the ``cryptography`` package.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tokenwire test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "cert.pem", directory / "key.pem", directory / "ca.pem"
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(paths[1], key)
    paths[2].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return paths


class WebTransportTLS(NamedTuple):
    """A gateway's TLS and WebTransport: ``[server]`` TOML, the UDP port, the PEM paths."""

    server_toml: str
    port: int
    cert: Path
    key: Path
    ca: Path


def webtransport_tls(directory: Path) -> WebTransportTLS:
    """``self_signed`` certificates and a free UDP port, as the ``[server]`` table of a
    gateway that serves WebTransport (``certfile``, ``keyfile``, ``webtransport_port``)."""
    from .processes import free_udp_port

    cert, key, ca = self_signed(directory)
    port = free_udp_port()
    toml = f'[server]\ncertfile = "{cert}"\nkeyfile = "{key}"\nwebtransport_port = {port}\n'
    return WebTransportTLS(toml, port, cert, key, ca)


def _write_key(path: Path, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def short_lived(directory: Path, days: int = 2) -> tuple[Path, Path, bytes]:
    """A self-signed ``localhost``/127.0.0.1 certificate valid for ``days`` days.

    Returns ``(cert, key, sha256)``: PEM paths and the SHA-256 of the
    certificate's DER encoding (what ``serverCertificateHashes`` names).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "short-cert.pem", directory / "short-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return (
        cert_path,
        key_path,
        hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest(),
    )

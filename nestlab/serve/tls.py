"""The server's certificate: the one given (--cert/--key), else a self-signed one made at the first start in the
server's folder (key 0600) and kept."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..backends.kernel import files


def self_signed(folder: str) -> tuple[str, str]:
    """The paths of the self-signed certificate and key in ``folder``, made (EC P-256, 10 years, this machine's name,
    localhost and 127.0.0.1 as its names) if absent."""
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, host), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "nestlab serve")]
    )
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName(host), x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    files.write(key_path, pem, mode=0o600)
    files.write(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return cert_path, key_path

"""A small certificate authority with OpenSSL's command (ECDSA P-256): a CA, then certificates it signs."""

from __future__ import annotations

import os
import subprocess

from ...errors import LabError
from ..kernel import files

_CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["openssl", *args], input=stdin, capture_output=True)
    except FileNotFoundError:
        raise LabError("certificates are made with OpenSSL's command: install the Debian package openssl") from None
    if done.returncode:
        raise LabError(f"openssl {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def authority(folder: str, name: str) -> None:
    """``folder/ca.crt`` and ``ca.key``, valid ten years."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        *_CURVE,
        "-keyout",
        os.path.join(folder, "ca.key"),
        "-out",
        os.path.join(folder, "ca.crt"),
        "-subj",
        f"/CN={name}",
        "-days",
        "3650",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )


def issue(
    folder: str, name: str, common: str, groups: tuple[str, ...] = (), sans: tuple[str, ...] = (), server: bool = False
) -> None:
    """``folder/NAME.crt`` and ``NAME.key`` for ``common`` (CN) in ``groups`` (O), signed by the folder's CA;
    ``sans`` like ``IP:10.0.0.1`` or ``DNS:name``."""
    subject = "".join(f"/O={g}" for g in groups) + f"/CN={common}"
    key, crt = os.path.join(folder, f"{name}.key"), os.path.join(folder, f"{name}.crt")
    request = _openssl("req", "-new", *_CURVE, "-keyout", key, "-subj", subject)
    ext = os.path.join(folder, f"{name}.ext")
    usage = "serverAuth,clientAuth" if server else "clientAuth"
    alt = f"subjectAltName={','.join(sans)}\n" if sans else ""
    files.write(ext, f"keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n{alt}", sync=False)
    try:
        _openssl(
            "x509",
            "-req",
            "-CA",
            os.path.join(folder, "ca.crt"),
            "-CAkey",
            os.path.join(folder, "ca.key"),
            "-CAcreateserial",
            "-days",
            "365",
            "-extfile",
            ext,
            "-out",
            crt,
            stdin=request,
        )
    finally:
        os.unlink(ext)


def keypair(folder: str, name: str) -> None:
    """``folder/NAME.key`` and ``NAME.pub`` (e.g. to sign service account tokens)."""
    key = os.path.join(folder, f"{name}.key")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    _openssl("ec", "-in", key, "-pubout", "-out", os.path.join(folder, f"{name}.pub"))

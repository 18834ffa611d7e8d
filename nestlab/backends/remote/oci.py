"""OCI image archives made from folders: what ``ctr images import`` (containerd) reads.

Each layer is a folder packed as an uncompressed tar (GNU tar, sorted, numeric owners), so a
cached layer is reused as it is and the archive is written without compressing anything.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import subprocess
import tarfile
from dataclasses import dataclass
from typing import Any

from ...errors import LabError

LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Layer:
    path: str  # the layer's tar
    digest: str  # sha256:... of that tar (also its diff id: it is not compressed)
    size: int


def pack(folder: str, dest: str) -> Layer:
    """Pack ``folder`` (its contents at the image's /) into the tar ``dest``."""
    tmp = dest + ".partial"
    done = subprocess.run(
        ["tar", "--sort=name", "--numeric-owner", "--xattrs", "-C", folder, "-cf", tmp, "."], capture_output=True, text=True
    )
    if done.returncode:
        raise LabError(f"cannot pack {folder}: {done.stderr.strip()}")
    os.replace(tmp, dest)
    return layer(dest)


def layer(path: str) -> Layer:
    """A packed layer already on disk."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return Layer(path, "sha256:" + digest.hexdigest(), os.path.getsize(path))


def architecture() -> str:
    """This machine's architecture, as OCI images name it (the images run here)."""
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}.get(machine, machine)


def archive(ref: str, layers: list[Layer], dest: str, entrypoint: list[str], env: list[str] | None = None) -> str:
    """Write the image ``ref`` (e.g. ``localhost/nestlab:0.1.0``) with ``layers`` (base first) as an OCI archive."""
    config = {
        "architecture": architecture(),
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [lay.digest for lay in layers]},
    }
    blobs: dict[str, bytes] = {}

    def blob(data: dict[str, Any]) -> dict[str, Any]:
        raw = json.dumps(data, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        blobs[digest] = raw
        return {"digest": digest, "size": len(raw)}

    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(config)},
        "layers": [{"mediaType": LAYER, "digest": lay.digest, "size": lay.size} for lay in layers],
    }
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **blob(manifest),
                "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref.rpartition(":")[2]},
            }
        ],
    }
    tmp = dest + ".partial"
    with tarfile.open(tmp, "w") as tar:
        _add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(tar, "index.json", json.dumps(index).encode())
        for digest, raw in blobs.items():
            _add_bytes(tar, f"blobs/sha256/{digest[7:]}", raw)
        for lay in layers:
            tar.add(lay.path, f"blobs/sha256/{lay.digest[7:]}")
    os.replace(tmp, dest)
    return dest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))

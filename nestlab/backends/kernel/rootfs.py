"""Root filesystems for ``image:`` nodes: find or unpack one, and build one with debootstrap.

An image is used read-only as the lower layer of each node's overlay, so one copy
serves every node.  Tarballs and OCI image layouts are unpacked once into
``/var/lib/nestlab/cache/`` (keyed by path, size and modification time).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import LabError
from ...names import IMAGE_ROOT, built, looks_like_path

CACHE = "/var/lib/nestlab/cache"


def resolve(image: str) -> str:
    """The rootfs directory an ``image:`` value stands for (unpacking it the first time)."""
    if not looks_like_path(image):
        path = built(image) / "rootfs"
        if not path.is_dir():
            raise LabError(f"no image named '{image}': build it with `nestlab image build {image}`")
        return str(path)
    path = Path(image)
    if path.is_dir() and (path / "oci-layout").exists():
        return _cached(path, "oci", _unpack_oci)
    if path.is_dir():
        return str(path / "rootfs") if (path / "rootfs").is_dir() and not (path / "bin").exists() else str(path)
    if path.is_file():
        return _cached(path, "tar", _unpack_tar)
    raise LabError(f"image {image} does not exist")


def _cached(path: Path, kind: str, unpack: Callable[[Path, Path], None]) -> str:
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    dest = Path(CACHE) / f"{kind}-{key}"
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        (dest / "rootfs").mkdir(parents=True)
        unpack(path, dest / "rootfs")
        (dest / ".complete").touch()
    return str(dest / "rootfs")


def _unpack_tar(path: Path, dest: Path) -> None:
    import tarfile  # here: ~10 ms that only an image file needs (the runc runtime loads this module)

    try:
        with tarfile.open(path) as tar:
            tar.extractall(dest, filter="tar" if hasattr(tarfile, "tar_filter") else None)
    except (tarfile.TarError, OSError) as exc:
        raise LabError(f"cannot unpack image {path}: {exc}") from None


def _unpack_oci(path: Path, dest: Path) -> None:
    """Apply an OCI image layout's layers in order (umoci handles whiteouts and ownership)."""
    if not shutil.which("umoci"):
        raise LabError("OCI image layouts are unpacked with umoci: install the Debian package umoci")
    index = json.loads((path / "index.json").read_text())
    refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index.get("manifests", [])]
    ref = next((r for r in refs if r), None)
    if ref is None:
        raise LabError(f"OCI layout {path} has no tagged manifest (org.opencontainers.image.ref.name)")
    shutil.rmtree(dest)
    result = subprocess.run(["umoci", "raw", "unpack", "--image", f"{path}:{ref}", str(dest)], capture_output=True, text=True)
    if result.returncode:
        raise LabError(f"umoci could not unpack {path}:{ref}: {result.stderr.strip()}")


def build(name: str, suite: str, packages: list[str], mirror: str, log: Callable[[str], None]) -> Path:
    """Make image ``name`` with debootstrap (minbase + ``packages``); returns its folder."""
    if not shutil.which("debootstrap"):
        raise LabError("nestlab image build uses debootstrap: install the Debian package debootstrap")
    target = built(name)
    if target.exists():
        raise LabError(f"image {name} exists at {target}; remove it with `nestlab image rm {name}` first")
    staging = Path(IMAGE_ROOT) / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        "debootstrap",
        "--variant=minbase",
        *([f"--include={','.join(packages)}"] if packages else []),
        suite,
        str(staging / "rootfs"),
        mirror,
    ]
    log("running: " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        log(line.rstrip())
        tail = (tail + [line.rstrip()])[-20:]
    if proc.wait():
        shutil.rmtree(staging, ignore_errors=True)
        raise LabError(f"debootstrap failed (exit {proc.returncode}); its last lines:\n" + "\n".join(tail))
    (staging / "image.json").write_text(json.dumps({"name": name, "suite": suite, "packages": packages, "mirror": mirror}))
    os.rename(staging, target)
    return target


def remove(name: str) -> None:
    target = built(name)
    if not target.is_dir():
        raise LabError(f"no image named {name}")
    shutil.rmtree(target)


def listing() -> list[dict[str, Any]]:
    root = Path(IMAGE_ROOT)
    out = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if entry.is_dir() and not entry.name.startswith("."):
            meta = json.loads((entry / "image.json").read_text()) if (entry / "image.json").exists() else {"name": entry.name}
            out.append({**meta, "path": str(entry)})
    return out

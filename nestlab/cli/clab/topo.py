"""containerlab's ``-t``: a file, a folder holding one ``*.clab.yml``, ``-`` (the file on standard input) or a
URL, made a file here (what standard input or a URL gave is kept under /run/nestlab-topologies, named by its
content, so later commands and the lab directory find it: root's alone, for it may hold passwords, and gone
when its lab is destroyed)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import urllib.request
from pathlib import Path

from ...backends.kernel import files
from ...errors import LabError
from ...model import files as model_files

KEPT = "/run/nestlab-topologies"


def fetched(value: str) -> str:
    """A local file for ``-t value``."""
    if value == "-":
        return _kept(sys.stdin.buffer.read(), "stdin")
    if value.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(value, timeout=30) as answer:
                body = answer.read(model_files.MAX_BYTES + 1)  # another's server: bounded as a file would be
        except OSError as exc:
            raise LabError(f"-t {value}: could not fetch it ({exc})") from None
        if len(body) > model_files.MAX_BYTES:
            raise LabError(f"-t {value}: larger than {model_files.MAX_BYTES} bytes, not a topology")
        return _kept(body, Path(value.split("?", 1)[0]).name or "topology")
    path = Path(value)
    if path.is_dir():
        found = sorted(path.glob("*.clab.yml")) + sorted(path.glob("*.clab.yaml"))
        if len(found) != 1:
            listed = ", ".join(f.name for f in found) or "none"
            raise LabError(f"-t {value}: a folder must hold exactly one *.clab.yml (it holds {listed}); name the file")
        return str(found[0])
    return value


def _kept(body: bytes, name: str) -> str:
    """``body`` as a file named after its content (so deploy and destroy from the same input meet)."""
    stem = name.removesuffix(".yml").removesuffix(".yaml").removesuffix(".clab")
    path = Path(KEPT) / hashlib.sha256(body).hexdigest()[:12] / f"{stem}.clab.yml"
    for folder in (path.parent.parent, path.parent):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # made by an older nestlab: 0755
    if not path.exists():
        files.write(path, body, 0o600)
    os.chmod(path, 0o600)
    return str(path)


def forget(path: str) -> None:
    """After its lab is destroyed: a kept topology goes (its folder too, unless the lab directory stays in it)."""
    kept = Path(path).resolve()
    if kept.parent.parent != Path(KEPT):
        return
    with contextlib.suppress(FileNotFoundError):
        kept.unlink()
    with contextlib.suppress(OSError):  # not empty: the lab directory, kept until destroy --cleanup
        kept.parent.rmdir()

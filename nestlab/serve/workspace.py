"""A user's workspace, ``~/.clab``: the topology files containerlab's apps list, open and edit.  Every file is
read, listed and written by a process of the user's own (so only what the account may touch), at a path checked
to stay inside the workspace."""

from __future__ import annotations

import hashlib
import os
import posixpath

from .errors import ApiError
from .runner import RunAs, run

SUFFIX = ".clab.yml"


def root(who: RunAs) -> str:
    return os.path.join(who.home, ".clab")


def inside(who: RunAs, relative: str) -> str:
    """``relative`` as an absolute path in ``who``'s workspace; 400 for an absolute path, '..', or a NUL."""
    if "\x00" in relative or relative.startswith("/") or ".." in relative.split("/"):
        raise ApiError(400, f"Invalid path {relative[:80]!r}: a path inside the workspace, without '..'")
    return posixpath.normpath(posixpath.join(root(who), relative))


def lab_file(who: RunAs, lab: str, relative: str) -> str:
    """``relative`` inside the lab's folder of the workspace (``~/.clab/LAB``)."""
    return inside(who, posixpath.join(lab, relative))


def revision(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def read(who: RunAs, path: str) -> str:
    """The (text) file, read as ``who``; 404 when it is not there (or not ``who``'s to read)."""
    done = await run(who, ["cat", "--", path], timeout=30)
    if done.code:
        raise ApiError(404, f"File '{os.path.relpath(path, root(who))}' not found in the workspace")
    return done.stdout


async def write(who: RunAs, path: str, data: bytes) -> None:
    script = 'umask 077; mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
    done = await run(who, ["sh", "-c", script, "sh", path], stdin=data, timeout=30)
    if done.code:
        raise ApiError(403, f"cannot write {path} as {who.name}: {done.reason}")


async def remove(who: RunAs, path: str, recursive: bool) -> None:
    done = await run(who, ["rm", *(["-r"] if recursive else []), "-f", "--", path], timeout=60)
    if done.code:
        raise ApiError(409, f"cannot remove {path}: {done.reason}")


async def listing(who: RunAs, folder: str) -> list[dict[str, object]]:
    """The folder's entries as the apps show them (name, path from the workspace, kind, size, modifiedAt)."""
    script = '[ -d "$1" ] || exit 0; find "$1" -mindepth 1 -maxdepth 1 -printf "%y\\t%s\\t%TY-%Tm-%TdT%TH:%TM:%TSZ\\t%f\\n"'
    done = await run(who, ["sh", "-c", script, "sh", folder], timeout=30)
    if done.code:
        raise ApiError(404, f"Folder '{os.path.relpath(folder, root(who))}' not found in the workspace")
    entries: list[dict[str, object]] = []
    for line in sorted(done.stdout.splitlines(), key=lambda text: text.rsplit("\t", 1)[-1]):
        kind, size, modified, name = line.split("\t", 3)
        entry: dict[str, object] = {
            "name": name,
            "path": os.path.relpath(os.path.join(folder, name), root(who)),
            "kind": "directory" if kind == "d" else "file",
            "modifiedAt": modified.split(".")[0] + "Z",
        }
        if kind == "d":
            entry["hasChildren"] = True
        else:
            entry["size"] = int(size)
        entries.append(entry)
    return entries


async def topologies(who: RunAs) -> list[tuple[str, str, bool]]:
    """Each topology file of the workspace (``~/.clab/LAB/FILE.clab.yml``): (lab folder, file name, whether its
    annotations file is there)."""
    script = '[ -d "$1" ] || exit 0; cd "$1" && find . -mindepth 2 -maxdepth 2 -name "*.clab.yml*" -printf "%P\\n"'
    done = await run(who, ["sh", "-c", script, "sh", root(who)], timeout=30)
    found = set(done.stdout.splitlines())
    return [
        (path.split("/")[0], path.split("/")[1], f"{path}.annotations.json" in found)
        for path in sorted(found)
        if path.endswith(SUFFIX)
    ]


async def rename(who: RunAs, old: str, new: str) -> None:
    """``old`` moved to ``new`` (replacing it), as ``who``: how the apps save a file whole."""
    done = await run(who, ["mv", "-f", "-T", "--", old, new], timeout=30)
    if done.code:
        raise ApiError(404, f"cannot rename {os.path.relpath(old, root(who))}: {done.reason}")

"""The processes of this machine, as ``/proc`` lists them: scanned here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator


def others() -> Iterator[int]:
    """Every process's pid but this one's."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me:
            yield int(entry.name)


def namespace(pid: int, kind: str) -> int | None:
    """The inode of process ``pid``'s namespace of ``kind`` (net, uts, mnt, ...); None once it is gone."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


CMDLINE_BYTES = 64 * 1024  # of a process's command line: its owner sets it (a title, an argv of gigabytes)


def cmdline(pid: int) -> bytes:
    """Process ``pid``'s command line (arguments NUL-separated), at most :data:`CMDLINE_BYTES` of it; b"" once gone.
    Its owner controls it, so root reads no more: a login's title, another user's process of huge arguments."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb", buffering=0) as fh:
            return fh.read(CMDLINE_BYTES)
    except OSError:
        return b""


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def in_namespaces(inodes: set[int], kinds: tuple[str, ...] = ("net", "uts")) -> list[int]:
    """Processes one of whose namespaces of ``kinds`` is one of ``inodes``."""
    return [pid for pid in others() if any(namespace(pid, kind) in inodes for kind in kinds)]


def children(pid: int) -> list[int]:
    """The direct children of process ``pid`` (its main thread's)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after its command (so the state is ``[0]``), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split() or None
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Process ``pid`` runs (it is not a zombie, nor gone)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in "ZX"


def start_time(pid: int) -> int | None:
    """A live (not zombie) process's start time in clock ticks since boot, or None."""
    fields = _stat(pid)
    return None if fields is None or fields[0] in "ZX" else int(fields[19])


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process ``pid`` has used so far; None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uids(pid: int) -> tuple[int, int] | None:
    """A live (not zombie) process's real and effective uid, or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = {line.split()[0]: line.split()[1:] for line in fh if line.startswith(("State:", "Uid:"))}
        if fields["State:"][0] in "ZX":
            return None
        real, effective = fields["Uid:"][:2]
        return int(real), int(effective)
    except (OSError, KeyError, IndexError, ValueError):
        return None


def of_uid(uid: int) -> list[int]:
    """Live processes whose real or effective uid is ``uid``."""
    return of_uids({uid})


def of_uids(wanted: Collection[int]) -> list[int]:
    """Live processes whose real or effective uid is one of ``wanted``: one pass over /proc, however many uids."""
    held = set(wanted)
    return [pid for pid in others() if held.intersection(uids(pid) or ())]

"""The mount table (``/proc/self/mountinfo``), read here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mount:
    id: str
    parent: str
    point: str  # where it is mounted (octal escapes as the kernel writes them)
    fstype: str
    options: tuple[str, ...]  # the filesystem's own (for cgroup v1: its controllers, with rw/ro)


def table() -> list[Mount]:
    """Every mount of the calling thread's mount namespace, in the kernel's order (a later one covers an earlier)."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            rest = fields.index("-", 6)
            found.append(Mount(fields[0], fields[1], fields[4], fields[rest + 1], tuple(fields[rest + 3].split(","))))
    return found


def points() -> list[str]:
    return [m.point for m in table()]


def holding(path: str) -> Mount | None:
    """The mount that holds ``path`` (the last, longest one whose point is ``path`` or above it)."""
    best = None
    for mount in table():
        point = mount.point
        if (path == point or path.startswith(point.rstrip("/") + "/")) and (best is None or len(point) >= len(best.point)):
            best = mount
    return best


def cgroups() -> list[Mount]:
    """The cgroup hierarchies mounted (v1 and v2)."""
    return [m for m in table() if m.fstype in ("cgroup", "cgroup2")]

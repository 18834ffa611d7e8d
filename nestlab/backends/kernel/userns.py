"""User namespaces: whether nestlab runs as a guest of the machine (rootless mode, docs/rootless.md), and the
mapping of an ordinary user to root in a namespace of its own, alone or with the user's subordinate ids
(probe.py tries whether the machine allows it)."""

from __future__ import annotations

import os
from functools import cache

from ...plan.machine import Machine
from . import files

WHOLE = ["0 0 4294967295"]  # the machine's own user namespace maps every id to itself
SUBUID, SUBGID = "/etc/subuid", "/etc/subgid"


def _mapped() -> list[str]:
    with open("/proc/self/uid_map") as fh:
        return [" ".join(line.split()) for line in fh if line.strip()]


def ids(kind: str) -> list[range]:
    """The ids (this namespace's own numbers) this user namespace maps, from ``/proc/self/uid_map`` (``kind``
    ``uid``) or ``gid_map``."""
    with open(f"/proc/self/{kind}_map") as fh:
        return [range(int(f[0]), int(f[0]) + int(f[2])) for f in (line.split() for line in fh) if len(f) == 3]


MARKER = "/run/nestlab-rootless"  # made in the holder's view (nestlab/rootless/view.py): rootless mode's own


@cache
def guest() -> bool:
    """Whether nestlab runs in an ordinary user's holder (rootless mode), where the machine's interfaces, cgroups
    and kernel programs are out of its reach: a user namespace that maps less than every id, and the holder's view.
    Root in another's user namespace (a container's, a pod's) is not a guest: its network namespace is its own."""
    return _mapped() != WHOLE and os.path.exists(MARKER)


@cache
def maps_others() -> bool:
    """Whether this user namespace maps more ids than one: the user's subordinate ids too, so daemons that switch
    to a user of their own (FRR's frr, sshd's privilege separation) run."""
    return sum(int(line.split()[2]) for line in _mapped()) > 1


@cache
def machine() -> Machine:
    """What this machine lets nestlab do, read once (the edge hands it on in the lab's blueprint)."""
    return Machine(guest(), maps_others(), os.path.expanduser("~"))


def subordinate(path: str, uid: int, name: str | None) -> tuple[int, int] | None:
    """The first range of ids ``/etc/subuid``-style ``path`` gives the user (by name or number): (start, count)."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for fields in (line.strip().split(":") for line in lines):
        if len(fields) == 3 and fields[0] in (name, str(uid)) and fields[1].isdigit() and fields[2].isdigit():
            if int(fields[2]) > 0:
                return int(fields[1]), int(fields[2])
    return None


def map_self(uid: int, gid: int) -> None:
    """Map ``uid`` and ``gid`` (this process's, outside) to 0 in the user namespace it has just made."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        files.in_place(f"/proc/self/{name}", text)

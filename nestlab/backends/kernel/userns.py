"""User namespaces: whether nestlab runs as a guest of the machine (rootless mode, docs/rootless.md), and the
mapping of an ordinary user to root in a namespace of its own (probe.py tries whether the machine allows it)."""

from __future__ import annotations

from functools import cache


@cache
def guest() -> bool:
    """Whether nestlab runs in a user namespace that maps one user (an ordinary user's own: rootless mode), where
    the machine's interfaces, cgroups and kernel programs are out of its reach."""
    with open("/proc/self/uid_map") as fh:
        lines = fh.read().split("\n")
    return len([line for line in lines if line.strip()]) == 1 and lines[0].split()[2] == "1"


def map_self(uid: int, gid: int) -> None:
    """Map ``uid`` and ``gid`` (this process's, outside) to 0 in the user namespace it has just made."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)

"""What a running lab's namespaces count, as the kernel says: each shaped interface's qdisc statistics and
each interface's counters (lab/fidelity.py samples them while a lab runs)."""

from __future__ import annotations

from ..backends.kernel import namespaces, rtdump, tcstats
from ..backends.kernel.netlink import Netlink as Netlink

Shaped = tcstats.Shaped  # one shaped interface's statistics
Netem = tcstats.Netem  # what its netem qdisc is set to
LinkInfo = rtdump.LinkInfo  # one interface and its counters


def inode(path: str) -> int | None:
    """The namespace pinned at ``path`` (its inode), None when it is gone."""
    return namespaces.inode(path)


def opened(path: str) -> tuple[int, Netlink]:
    """An fd on the namespace pinned at ``path`` and a netlink socket inside it (the caller closes both)."""
    return namespaces.open_netlink(path)


def shaped(nl: Netlink) -> dict[int, tcstats.Shaped]:
    """Every shaped interface of the namespace ``nl`` is in, by index."""
    return tcstats.read(nl)


def interfaces(nl: Netlink) -> list[rtdump.LinkInfo]:
    """Every interface of the namespace ``nl`` is in, with its counters."""
    return rtdump.interfaces(nl)

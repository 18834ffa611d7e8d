"""A running lab's kernel objects as the Python API (nestlab/lab) reaches them: a node's cgroup limits and use,
a node paused or resumed in place, a shaper ready for a schedule's links, a wireless medium asked."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from .. import names
from ..backends.kernel import cgroups, namespaces, shaping
from ..backends.services import medium
from ..errors import LabError
from . import events

Shaper = shaping.Shaper  # changes links' shaping in place (one netlink socket per namespace, kept open)


def set_limits(lab: str, node: str, limits: dict[str, str]) -> None:
    """Write ``node``'s cgroup limits (``"none"`` lifts one)."""
    cgroups.Tree(lab).set(node, limits)


def limits(lab: str, node: str) -> dict[str, str]:
    """The cgroup limits in force (cpus, memory bytes, pids), read back from the kernel."""
    return cgroups.Tree(lab).limits(node)


def usage(lab: str, node: str) -> dict[str, float]:
    """CPU seconds and memory bytes used by the node (its components included)."""
    return cgroups.Tree(lab).usage(node)


def paused(lab: str, node: str, interfaces: list[str], own_net: bool, stop: bool, scheduled: float | None) -> float:
    """Freeze (``stop``) or continue the node's processes and take its ``interfaces`` down or up, at once; the
    change is logged; returns ms spent.  ``own_net``: the node has a network namespace of its own."""
    started = time.perf_counter()
    net, uts = names.netns_path(lab, node), names.uts_path(lab, node)
    inodes = {namespaces.inode(uts)} | ({namespaces.inode(net)} if own_net else set())
    shaper = shaping.Shaper()
    try:
        for iface in interfaces:
            try:
                shaper.set_state(net, iface, not stop)
            except LabError:
                continue  # removed by a schedule for now
    finally:
        shaper.close()
    for pid in namespaces.pids_in({i for i in inodes if i}):
        try:
            os.kill(pid, signal.SIGSTOP if stop else signal.SIGCONT)
        except ProcessLookupError:
            pass
    applied, spent = time.time(), (time.perf_counter() - started) * 1000
    events.record(lab, {"node": node, "action": "pause" if stop else "resume"}, applied, spent, scheduled)
    return spent


def medium_trouble(lab: str, node: str) -> str | None:
    """Why the wireless medium of ``node`` does not answer (None: it does)."""
    return medium.trouble(lab, node)


def ask_medium(lab: str, node: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request to the running wireless medium of ``node`` and return its answer."""
    return medium.ask(lab, node, request)

"""What rootless mode makes of a lab (docs/rootless.md): nestlab runs as root in an ordinary user's namespace
(nestlab/rootless/), where the machine's network, cgroups, kernel programs and other users are out of reach.

:func:`fitted` is asked before anything is made: what needs the machine's root is refused, naming each part and
why; cgroup limits are left out, with a note.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..backends.kernel import userns, views
from ..errors import LabError
from ..kinds import of
from ..plan.objects import NodeObj, Plan
from ..registry import LINK_MODES, RUNTIMES
from . import access

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint

NO_CGROUPS = "cgroup limits not applied: rootless"


def fitted(lab: Blueprint) -> tuple[Blueprint, tuple[str, ...]]:
    """``lab`` as it is made here, and notes on what was left out of it (none but as a guest of the machine).
    A lab with parts that need the machine's root is a :class:`LabError` naming them, before anything is made."""
    if not userns.guest():
        return lab, ()
    plan = lab.plan
    refused: dict[str, list[str]] = {}
    for node in plan.nodes.values():
        if why := _node_needs_root(node):
            refused.setdefault(why, []).append(node.name)
    for obj in [*plan.links.values(), *plan.attachments.values()]:
        if why := LINK_MODES.get(obj.mode).machine_root(obj):
            refused.setdefault(why, []).append(obj.key)
    if passwords := [n.node for n in access.managed(lab) if n.login.password]:
        why = "password logins (credentials:) run as a uid of the lab's own, which your user namespace does not map: use keys"
        refused[why] = passwords
    if refused:
        said = "; ".join(f"{_some(parts)} ({why})" for why, parts in refused.items())
        raise LabError(f"rootless mode cannot make {said}: the machine's root can (run it with sudo)")
    limited = sorted(name for name, node in plan.nodes.items() if node.cgroup)
    notes = (f"{NO_CGROUPS} ({_some(limited)})",) if limited else ()
    nodes = {name: _as_guest(node) for name, node in plan.nodes.items()}
    return replace(lab, planned=Plan(nodes, plan.links, plan.attachments)), notes


def _as_guest(node: NodeObj) -> NodeObj:
    """The node as rootless mode makes it: without a cgroup of its own; its daemons (and their folders) root's
    unless the user namespace maps their users (the user's subordinate ids)."""
    if userns.maps_others():
        return replace(node, cgroup=False)
    return replace(node, cgroup=False, run_dirs=tuple((path, "root") for path, _user in node.run_dirs))


def _node_needs_root(node: NodeObj) -> str | None:
    """Why a node needs the machine's root, or None."""
    if why := RUNTIMES.get(node.runtime).machine_root:
        return f"runtime {node.runtime}: {why}"
    others = sorted({user for _path, user in node.run_dirs if user != "root"})
    if others and not userns.maps_others() and not of(node).guest_as_root:
        return (
            f"daemons that run as user {', '.join(others)}, whom your user namespace does not map: give your user "
            "subordinate ids in /etc/subuid and /etc/subgid, with uidmap installed (docs/rootless.md)"
        )
    if node.ports:
        return "ports: forwarded from the machine's own loopback, which rootless labs do not reach"
    if node.own_root or views.needs_own_root(node.binds):
        return "a root of the node's own (a server image, a bind to a path the machine lacks): overlayfs over / needs the machine's root"
    return None


def _some(parts: list[str], shown: int = 3) -> str:
    return ", ".join(parts[:shown]) + (f" and {len(parts) - shown} more" if len(parts) > shown else "")

"""What needs the machine's root (docs/rootless.md): as a guest of the machine, nestlab runs as root in an ordinary
user's namespace (nestlab/rootless/), where the machine's network, cgroups, kernel programs and other users are
out of reach.

:func:`refused` is asked before anything is made, of a plan already made for the machine (its
:class:`~nestlab.plan.machine.Machine`: no cgroups, daemons root's unless other ids are mapped): what needs
the machine's root is refused, naming each part and why; cgroup limits left out are said in a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.kernel import views
from ..errors import LabError
from ..plan.desired import wants_cgroup
from ..plan.objects import AttachObj, LinkObj, NodeObj
from ..registry import LINK_MODES, RUNTIMES
from . import access

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.machine import Machine

NO_CGROUPS = "cgroup limits not applied: rootless"


def refused(blueprint: Blueprint) -> tuple[str, ...]:
    """Notes on what the machine left out of ``lab`` (none but as a guest of the machine).  A lab with parts that
    need the machine's root is a :class:`LabError` naming them, before anything is made."""
    machine = blueprint.machine
    if not machine.guest:
        return ()
    plan = blueprint.plan
    refusals: dict[str, list[str]] = {}
    for node in plan.nodes.values():
        if why := _node_needs_root(node, machine):
            refusals.setdefault(why, []).append(node.name)
    objs: list[LinkObj | AttachObj] = [*plan.links.values(), *plan.attachments.values()]
    for obj in objs:
        if why := LINK_MODES.get(obj.mode).machine_root(obj):
            refusals.setdefault(why, []).append(obj.key)
    if passwords := [n.node for n in access.managed(blueprint) if n.login.password]:
        why = "password logins (credentials:): rootless mode offers logins by key alone (a username with an identity-file)"
        refusals[why] = passwords
    if refusals:
        said = "; ".join(f"{_some(parts)} ({why})" for why, parts in refusals.items())
        raise LabError(f"rootless mode cannot make {said}: the machine's root can (run it with sudo)")
    limited = sorted(name for name, spec in blueprint.topology.topology.nodes.items() if wants_cgroup(spec))
    return (f"{NO_CGROUPS} ({_some(limited)})",) if limited else ()


def _node_needs_root(node: NodeObj, machine: Machine) -> str | None:
    """Why a node needs the machine's root, or None."""
    if why := RUNTIMES.get(node.runtime).machine_root:
        return f"runtime {node.runtime}: {why}"
    others = sorted({user for _path, user in node.run_dirs if user != "root"})
    if others and not machine.maps_others:  # planning made the daemons of kinds that may run as root root's
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

"""What a running lab looks like, read back from the kernel (one link and one address dump per namespace)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import kinds, names
from ..backends.kernel import cgroups, mptcp, namespaces, rtdump
from ..backends.services import traceplay
from ..registry import KINDS, LINK_MODES
from . import gc_pause, stop_start

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.objects import EndObj, LinkObj, NodeObj, Plan
    from ..sites.seam import Report


@gc_pause.paused()
def report(blueprint: Blueprint, only: set[str] | None = None) -> Report:
    """Hosts, switches and nodes with their namespace, state and live interfaces (``only``: just those nodes).

    Per interface: state, MTU, MAC, addresses, bridge, and the attachment mode
    it was planned with; per OVS switch, the datapath and checksum handling in use;
    per node with a cgroup, CPU seconds and memory used (components included) and limits;
    per node with ``mptcp:``, its connections and their subflows; per tunnel end (mpt), its datapath and
    per-path counters.
    """
    plan = blueprint.plan
    chosen = sorted(
        (o for o in plan.nodes.values() if only is None or o.name in only), key=lambda o: not KINDS.get(o.kind).machine
    )
    paths = {o.name: names.netns_path(blueprint.name, o.name) for o in chosen}
    found = {name: _interfaces(path) for name, path in paths.items() if os.path.exists(path)}  # threads: no faster
    live = _Live(blueprint, _modes(plan), _tunnels(plan), trace_players(blueprint, set(found)))
    components: dict[str, list[str]] = {}
    for name, o in plan.nodes.items():
        if o.parent:
            components.setdefault(o.parent, []).append(name)
    nodes = []
    for obj in chosen:
        entry: dict[str, Any] = {
            "name": obj.name,
            "kind": obj.kind,
            "host": obj.host,
            "shares_host_stack": bool(obj.shares),
            "namespace": names.netns_name(blueprint.name, obj.name),
            "state": "missing",
            "interfaces": [],
        }
        if obj.name in found:
            entry.update(live.of(obj, paths[obj.name], found[obj.name]))
        entry["runtime"] = obj.runtime
        entry["components"] = components.get(obj.name, [])
        nodes.append(entry)
    return {"lab": blueprint.name, "source": blueprint.source, "nodes": nodes}


@dataclass
class _Live:
    """What a running node shows beyond its interfaces, read from the lab's plan once for every node."""

    lab: Blueprint
    modes: dict[tuple[str, str], str]  # (node, interface) -> the mode it was planned with
    tunnels: dict[str, list[tuple[LinkObj, EndObj]]]
    traced: dict[str, dict[str, dict[str, Any]]]

    def __post_init__(self) -> None:
        self.tree = cgroups.Tree(self.lab.name) if any(o.cgroup for o in self.lab.plan.nodes.values()) else None

    def of(self, obj: NodeObj, path: str, interfaces: list[dict[str, Any]]) -> dict[str, Any]:
        """``obj``'s state, interfaces with their modes, and what its kind, MPTCP, tunnels, trace players and
        cgroup say of it, in the report's order."""
        lab = self.lab.name
        entry: dict[str, Any] = {
            "state": "stopped" if stop_start.is_stopped(lab, obj.name) else "running",
            "interfaces": [{**i, "mode": self.modes.get((obj.name, i["name"]))} for i in interfaces],
            **kinds.of(obj).inspect(lab, obj),
        }
        if obj.mptcp:
            entry["mptcp"] = mptcp.subflows(path)
        counters = {end.iface: LINK_MODES.get(link.mode).counters(lab, link, end) for link, end in self.tunnels.get(obj.name, [])}
        if shown := {k: v for k, v in counters.items() if v is not None}:
            entry["tunnels"] = shown
        if obj.name in self.traced:
            entry["traces"] = self.traced[obj.name]
        if self.tree and obj.cgroup:
            entry["usage"] = self.tree.usage(obj.name)
            entry["limits"] = self.tree.limits(obj.name)
        return entry


def _modes(plan: Plan) -> dict[tuple[str, str], str]:
    """Each planned interface's mode: a link's (``wire`` where an emulated host ends it), an attachment's label."""
    modes = {
        (end.node, end.iface): "wire"
        if KINDS.get(plan.nodes[end.node].kind).machine or KINDS.get(plan.nodes[other.node].kind).machine
        else link.mode
        for link in plan.links.values()
        for end, other in ((link.a, link.b), (link.b, link.a))
    }
    modes.update({(a.end.node, a.end.iface): LINK_MODES.get(a.mode).label(a) for a in plan.attachments.values()})
    return modes


def _tunnels(plan: Plan) -> dict[str, list[tuple[LinkObj, EndObj]]]:
    """Per node, (link, end) of every link ending on it: its mode may show counters of its own (mpt)."""
    tunnels: dict[str, list[tuple[LinkObj, EndObj]]] = {}
    for link in plan.links.values():
        for end in link.ends:
            tunnels.setdefault(end.node, []).append((link, end))
    return tunnels


def trace_players(blueprint: Blueprint, nodes: set[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Per node (of ``nodes``, or every node), per interface whose sending follows a trace: its player's health
    (playing, lagging, dead)."""
    players: dict[str, dict[str, dict[str, Any]]] = {}
    for link in blueprint.plan.links.values():
        for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
            if dict(shape).get("trace") and (nodes is None or end.node in nodes):
                players.setdefault(end.node, {})[end.iface] = traceplay.health(blueprint.name, end.node, end.iface)
    return players


def _interfaces(path: str) -> list[dict[str, Any]]:
    fd, nl = namespaces.open_netlink(path)
    try:
        found = rtdump.interfaces(nl, counters=False)
    finally:
        nl.close()
        os.close(fd)
    names_: dict[int | None, str] = {i.index: i.name for i in found}
    return [
        {"name": i.name, "state": i.state, "mtu": i.mtu, "mac": i.mac, "addresses": i.addresses, "master": names_.get(i.master)}
        for i in found
        if i.name != "lo"
    ]

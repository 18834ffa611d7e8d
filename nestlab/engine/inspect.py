"""What a running lab looks like, read back from the kernel (one link and one address dump per namespace)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import kinds, names
from ..backends.kernel import cgroups, mptcp, namespaces, rtdump
from ..registry import KINDS, LINK_MODES
from . import collector, stop_start

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..sites.seam import Report


@collector.paused()
def here(lab: Blueprint, only: set[str] | None = None) -> Report:
    """Hosts, switches and nodes with their namespace, state and live interfaces.

    Per interface: state, MTU, MAC, addresses, bridge, and the attachment mode
    it was planned with; per OVS switch, the datapath and checksum handling in use;
    per node with a cgroup, CPU seconds and memory used (components included) and limits;
    per node with ``mptcp:``, its connections and their subflows; per tunnel end (mpt), its datapath and
    per-path counters.  ``only``: just those nodes.
    """
    plan = lab.plan
    modes = {
        (end.node, end.iface): "wire"
        if KINDS.get(plan.nodes[end.node].kind).machine or KINDS.get(plan.nodes[other.node].kind).machine
        else link.mode
        for link in plan.links.values()
        for end, other in ((link.a, link.b), (link.b, link.a))
    }
    modes.update({(a.end.node, a.end.iface): LINK_MODES.get(a.mode).label(a) for a in plan.attachments.values()})
    nodes = []
    components: dict[str, list[str]] = {}
    for name, o in plan.nodes.items():
        if o.parent:
            components.setdefault(o.parent, []).append(name)
    tree = cgroups.Tree(lab.name) if any(o.cgroup for o in plan.nodes.values()) else None
    chosen = sorted(
        (o for o in plan.nodes.values() if only is None or o.name in only), key=lambda o: not KINDS.get(o.kind).machine
    )
    tunnels: dict[str, list] = {}  # node -> (link, end) of links whose mode shows counters of its own
    for link in plan.links.values():
        for end in link.ends:
            tunnels.setdefault(end.node, []).append((link, end))
    paths = {o.name: names.netns_path(lab.name, o.name) for o in chosen}
    running = [name for name, path in paths.items() if os.path.exists(path)]
    found = {name: _interfaces(paths[name]) for name in running}  # (threads were measured: no faster)
    traced = trace_players(lab, set(found))
    for obj in chosen:
        path = paths[obj.name]
        entry = {
            "name": obj.name,
            "kind": obj.kind,
            "host": obj.host,
            "shares_host_stack": bool(obj.shares),
            "namespace": names.netns_name(lab.name, obj.name),
            "state": "missing",
            "interfaces": [],
        }
        if obj.name in found:
            entry["state"] = "stopped" if stop_start.is_stopped(lab.name, obj.name) else "running"
            entry["interfaces"] = [{**i, "mode": modes.get((obj.name, i["name"]))} for i in found[obj.name]]
            entry.update(kinds.of(obj).inspect(lab.name, obj))
            if obj.mptcp:
                entry["mptcp"] = mptcp.subflows(path)
            shown = {
                end.iface: LINK_MODES.get(link.mode).counters(lab.name, link, end) for link, end in tunnels.get(obj.name, [])
            }
            if shown := {k: v for k, v in shown.items() if v is not None}:
                entry["tunnels"] = shown
            if obj.name in traced:
                entry["traces"] = traced[obj.name]
            if tree and obj.cgroup:
                entry["usage"] = tree.usage(obj.name)
                entry["limits"] = tree.limits(obj.name)
        entry["runtime"] = obj.runtime
        entry["components"] = components.get(obj.name, [])
        nodes.append(entry)
    return {"lab": lab.name, "source": lab.source, "nodes": nodes}


def trace_players(lab: Blueprint, nodes: set[str] | None = None) -> dict[str, dict[str, dict]]:
    """Per node (of ``nodes``, or every node), per interface whose sending follows a trace: its player's health
    (playing, lagging, dead)."""
    from ..backends.services import traceplay

    players: dict[str, dict[str, dict]] = {}
    for link in lab.plan.links.values():
        for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
            if dict(shape).get("trace") and (nodes is None or end.node in nodes):
                players.setdefault(end.node, {})[end.iface] = traceplay.health(lab.name, end.node, end.iface)
    return players


def _interfaces(path: str) -> list[dict]:
    fd, nl = namespaces.open_netlink(path)
    try:
        found = rtdump.interfaces(nl, counters=False)
    finally:
        nl.close()
        os.close(fd)
    names_ = {i.index: i.name for i in found}
    return [
        {"name": i.name, "state": i.state, "mtu": i.mtu, "mac": i.mac, "addresses": i.addresses, "master": names_.get(i.master)}
        for i in found
        if i.name != "lo"
    ]

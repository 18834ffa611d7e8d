"""What a running lab looks like, read back from the kernel (through pyroute2)."""

from __future__ import annotations

import os

from .. import names
from ..backends import cgroups, mptcp, namespaces, ovs
from .lab import Lab


def inspect(lab: Lab) -> dict:
    """Hosts, switches and nodes with their namespace, state and live interfaces.

    Per interface: state, MTU, MAC, addresses, bridge, and the attachment mode
    it was planned with; per OVS switch, the datapath and checksum handling in use;
    per node with a cgroup, CPU seconds and memory used (components included) and limits;
    per node with ``mptcp:``, its connections and their subflows.
    """
    plan = lab.plan
    modes = {(end.node, end.iface): "wire" if plan.nodes[end.node].kind == "machine" or plan.nodes[other.node].kind == "machine" else link.mode for link in plan.links.values() for end, other in ((link.a, link.b), (link.b, link.a))}
    modes.update({(a.end.node, a.end.iface): ":".join([a.mode, *(v for k, v in a.options if k != "bridge")]) for a in plan.attachments.values()})
    nodes = []
    tree = cgroups.Tree(lab.name) if any(o.cgroup for o in plan.nodes.values()) else None
    for obj in sorted(plan.nodes.values(), key=lambda o: o.kind != "machine"):
        path = names.netns_path(lab.name, obj.name)
        entry = {"name": obj.name, "kind": obj.kind, "host": obj.host, "shares_host_stack": bool(obj.shares), "namespace": names.netns_name(lab.name, obj.name), "state": "missing", "interfaces": []}
        if os.path.exists(path):
            entry["state"] = "running"
            entry["interfaces"] = [{**i, "mode": modes.get((obj.name, i["name"]))} for i in _interfaces(path)]
            if obj.kind == "ovs":
                entry["ovs"] = ovs.Switch(lab.name, obj.name).info()
            if obj.mptcp:
                entry["mptcp"] = mptcp.subflows(path)
            if tree and obj.cgroup:
                entry["usage"] = tree.usage(obj.name)
                entry["limits"] = tree.limits(obj.name)
        entry["runtime"] = obj.runtime
        entry["components"] = [n for n, o in plan.nodes.items() if o.parent == obj.name]
        nodes.append(entry)
    return {"lab": lab.name, "source": lab.source, "nodes": nodes}


def _interfaces(path: str) -> list[dict]:
    from pyroute2 import IPRoute  # heavy import (~0.2 s): only inspect pays for it

    with namespaces.entered(path):
        ipr = IPRoute()
    with ipr:
        links = {msg["index"]: msg for msg in ipr.get_links()}
        addrs: dict[int, list[str]] = {}
        for msg in ipr.get_addr():
            addrs.setdefault(msg["index"], []).append(f"{msg.get_attr('IFA_ADDRESS')}/{msg['prefixlen']}")
    out = []
    for index, msg in sorted(links.items()):
        name = msg.get_attr("IFLA_IFNAME")
        if name == "lo":
            continue
        master = msg.get_attr("IFLA_MASTER")
        out.append(
            {
                "name": name,
                "state": msg.get_attr("IFLA_OPERSTATE"),
                "mtu": msg.get_attr("IFLA_MTU"),
                "mac": msg.get_attr("IFLA_ADDRESS"),
                "addresses": [a for a in addrs.get(index, []) if not a.startswith("fe80:")],
                "master": links[master].get_attr("IFLA_IFNAME") if master in links else None,
            }
        )
    return out

"""What a running lab looks like, read back from the kernel (through pyroute2)."""

from __future__ import annotations

import os

from .. import names
from ..backends import namespaces
from .lab import Lab


def inspect(lab: Lab) -> dict:
    """Nodes with their namespace, state and live interfaces (state, MTU, MAC, addresses, bridge)."""
    nodes = []
    for node in lab.nodes.values():
        path = names.netns_path(lab.name, node.name)
        entry = {"name": node.name, "kind": node.kind, "namespace": node.netns, "state": "missing", "interfaces": []}
        if os.path.exists(path):
            entry["state"] = "running"
            entry["interfaces"] = _interfaces(path)
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

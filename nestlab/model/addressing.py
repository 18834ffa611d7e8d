"""Automatic IPv4 addresses: one subnet per layer-2 segment, from the lab's pool.

A segment is what one broadcast reaches: both ends of a point-to-point link, or
every host port of a bridge (bridges joined by links form one segment).  A
segment that already has an explicit address is completed inside that
address's subnet; otherwise it gets the next free subnet of the pool, sized to
fit (a /30 for a point-to-point link, at least a /24 behind a bridge).
"""

from __future__ import annotations

import ipaddress
import math

from .errors import Problem, TopologyError
from .load import node_kind
from .schema import Topology

Endpoint = tuple[str, str]


class _Segments:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, item: object) -> object:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, a: object, b: object) -> None:
        self.parent[self.find(a)] = self.find(b)


def assign(topology: Topology, source: str = "<topology>") -> dict[Endpoint, dict[str, list[str]]]:
    """Addresses of every host endpoint: ``{(node, iface): {"ipv4": [...], "ipv6": [...]}}``."""
    body = topology.topology
    segments = _Segments()
    result: dict[Endpoint, dict[str, list[str]]] = {}
    wants_auto: list[Endpoint] = []
    for link in body.links:
        ends = [tuple(ep.split(":", 1)) for ep in link.endpoints]
        keys = [("bridge", n) if node_kind(topology, n) == "bridge" else (n, i) for n, i in ends]
        segments.join(keys[0], keys[1])
        for j, (node, iface) in enumerate(ends):
            if node_kind(topology, node) == "bridge":
                continue
            addrs = result.setdefault((node, iface), {"ipv4": [], "ipv6": []})
            for family in ("ipv4", "ipv6"):
                given = getattr(link, family)
                if given and given[j]:
                    addrs[family].append(given[j])
            if not addrs["ipv4"]:
                wants_auto.append((node, iface))
    if topology.ipv4_pool is None:
        return result
    members: dict[object, list[Endpoint]] = {}
    known_net: dict[object, ipaddress.IPv4Network] = {}
    taken: set[ipaddress.IPv4Address] = set()
    for endpoint, addrs in result.items():
        root = segments.find(endpoint)
        members.setdefault(root, []).append(endpoint)
        for cidr in addrs["ipv4"]:
            iface = ipaddress.IPv4Interface(cidr)
            known_net.setdefault(root, iface.network)
            taken.add(iface.ip)
    used_nets = set(known_net.values())
    pool = _Pool(ipaddress.IPv4Network(topology.ipv4_pool), used_nets)
    for endpoint in wants_auto:
        root = segments.find(endpoint)
        if root not in known_net:
            known_net[root] = pool.take(len(members[root]), source)
        net = known_net[root]
        ip = next((h for h in net.hosts() if h not in taken), None)
        if ip is None:
            raise TopologyError(source, [Problem(("topology", "links"), f"subnet {net} has no free address left for {endpoint[0]}:{endpoint[1]}; give it an explicit ipv4")])
        taken.add(ip)
        result[endpoint]["ipv4"].append(f"{ip}/{net.prefixlen}")
    return result


class _Pool:
    """Hands out aligned subnets of a pool, skipping any that overlap ``avoid``."""

    def __init__(self, pool: ipaddress.IPv4Network, avoid: set[ipaddress.IPv4Network]):
        self.pool = pool
        self.avoid = set(avoid)
        self.next = int(pool.network_address)

    def take(self, hosts: int, source: str) -> ipaddress.IPv4Network:
        prefix = 30 if hosts <= 2 else min(24, 32 - math.ceil(math.log2(hosts + 2)))
        size = 1 << (32 - prefix)
        start = -(-self.next // size) * size
        end = int(self.pool.broadcast_address)
        while start + size - 1 <= end:
            net = ipaddress.IPv4Network((start, prefix))
            if not any(net.overlaps(other) for other in self.avoid):
                self.avoid.add(net)
                self.next = start + size
                return net
            start += size
        raise TopologyError(source, [Problem(("ipv4_pool",), f"pool {self.pool} has no free /{prefix} left; use a larger ipv4_pool")])

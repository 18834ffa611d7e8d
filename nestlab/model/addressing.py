"""Automatic IPv4 addresses: one subnet per layer-2 segment, from the lab's pool.

A segment is what one broadcast reaches: the ends of a link or wire, every
port of a switch, every sub-interface on a host NIC.  The plan builder joins
members into segments; a segment that already has an explicit address is
completed inside that address's subnet, otherwise it gets the next free subnet
of the pool, sized to fit (a /30 for two members, at least a /24 for more).  An interface
a node's ``exec:`` addresses gets none (its user addresses it); the others of its segment still do.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .errors import Problem, TopologyError

Key = tuple[object, ...]  # (node, interface), or a mode's own key for a segment (a switch's, a VLAN's)
_IP_ADDR_ADD = re.compile(
    r"\bip\s+(?:-(?:4|d|br|brief|family\s+inet)\s+)*a(?:d(?:d(?:r(?:e(?:s(?:s)?)?)?)?)?)?\s+(?:add|a|replace|change)\s+(?:local\s+)?"
    r"(?:\d{1,3}(?:\.\d{1,3}){3}(?:/\d+)?\s+(?:[^;&|\n]*?\s)?dev\s+([^\s;&|'\"()]+)|dev\s+([^\s;&|'\"()]+)\s+(?:local\s+)?\d{1,3}(?:\.\d{1,3}){3})"
)
_IFCONFIG = re.compile(r"\bifconfig\s+([^\s;&|'\"()]+)\s+(?:inet\s+|add\s+|up\s+)?\d{1,3}(?:\.\d{1,3}){3}")


def exec_addressed(commands: tuple[str, ...] | list[str]) -> set[str]:
    """The interfaces that ``commands`` (a node's ``exec:``) give an IPv4 address: ``ip addr add A dev IF``
    (``ip a``, ``ip address``, ``replace``, ``dev IF`` first) or ``ifconfig IF A``."""
    found = set()
    for command in commands:
        found |= {a or b for a, b in _IP_ADDR_ADD.findall(command)} | set(_IFCONFIG.findall(command))
    return found


@dataclass
class Member:
    """One interface that may hold addresses (``auto``: wants one from the pool if none is given)."""

    ipv4: list[str] = field(default_factory=list)
    ipv6: list[str] = field(default_factory=list)
    auto: bool = True
    by_exec: bool = False  # a node's exec: addresses it: it gets no automatic address


class Segments:
    """Union-find over member keys (and non-member keys such as switches)."""

    def __init__(self) -> None:
        self.parent: dict[Key, Key] = {}
        self.members: dict[Key, Member] = {}

    def find(self, item: Key) -> Key:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, a: Key, b: Key) -> None:
        self.parent[self.find(a)] = self.find(b)

    def member(
        self,
        key: Key,
        ipv4: Sequence[str | None] | None = None,
        ipv6: Sequence[str | None] | None = None,
        auto: bool = True,
        by_exec: bool = False,
    ) -> Member:
        self.find(key)
        m = self.members.setdefault(key, Member(auto=auto))
        m.by_exec = m.by_exec or by_exec
        m.ipv4 += [a for a in ipv4 or [] if a]
        m.ipv6 += [a for a in ipv6 or [] if a]
        return m

    def assign(self, pool: str | None, source: str) -> dict[Key, Member]:
        """Fill in automatic IPv4 addresses; returns every member."""
        if pool is None:
            return self.members
        groups: dict[Key, list[Key]] = {}
        known_net: dict[Key, ipaddress.IPv4Network] = {}
        taken: set[ipaddress.IPv4Address] = set()
        for key, m in self.members.items():
            root = self.find(key)
            groups.setdefault(root, []).append(key)
            for cidr in m.ipv4:
                iface = ipaddress.IPv4Interface(cidr)
                known_net.setdefault(root, iface.network)
                taken.add(iface.ip)
        free = _Pool(ipaddress.IPv4Network(pool), set(known_net.values()))
        cursors: dict[ipaddress.IPv4Network, Iterator[ipaddress.IPv4Address]] = {}  # addresses below a cursor are taken
        for key, m in self.members.items():
            root = self.find(key)
            if m.ipv4 or not m.auto or m.by_exec:
                continue
            if root not in known_net:
                known_net[root] = free.take(sum(self.members[k].auto or bool(self.members[k].ipv4) for k in groups[root]), source)
            net = known_net[root]
            cursor = cursors.setdefault(net, net.hosts())
            ip = next((h for h in cursor if h not in taken), None)
            if ip is None:
                raise TopologyError(
                    source,
                    [
                        Problem(
                            ("topology", "links"),
                            f"subnet {net} has no free address left for {':'.join(map(str, key))}; give it an explicit ipv4",
                        )
                    ],
                )
            taken.add(ip)
            m.ipv4.append(f"{ip}/{net.prefixlen}")
        return self.members


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
        raise TopologyError(
            source, [Problem(("ipv4_pool",), f"pool {self.pool} has no free /{prefix} left; use a larger ipv4_pool")]
        )

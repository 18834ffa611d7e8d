"""Which address a check's ``to:`` means: an address as itself; a node's name (or ``NODE:IF``) as the address of
it a packet from the check's source reaches, found by walking the lab's routing tables hop by hop, as the
kernels have them now: the source's route, then the route of the node holding its next hop, until the target
or a dead end (no route, a blackhole, a link that is down, a next hop that is no node's of the lab).

Of the addresses reached, those the user gave (in the file or by ``exec:``) beat nestlab's automatic ones, then
the shortest path, then the address on the interface the packet enters the target by; addresses as good as each
other on different paths make the name ambiguous (:class:`Ambiguous`, naming them and how to choose one).
Each namespace is read once per resolution (one netlink dump each of interfaces, addresses and routes; a node on
a server or pod: ``ip -j`` there, once).
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import names
from ..backends.kernel import rtdump
from ..model.checks import To
from ..plan.mgmt import interfaces as management
from ..registry import KINDS

if TYPE_CHECKING:
    from ..lab.lab import Lab
    from ..plan.objects import Plan

MAX_HOPS = 32  # nodes a walk crosses before it calls the way a loop
AGAIN = 0.25  # seconds: a target whose check failed is resolved again at most this often
Run = Callable[[str, list[str]], tuple[int, str]]  # runs a command in a node: (exit code, output)
IP = ipaddress.IPv4Address


class Unreadable(RuntimeError):
    """A node's routes could not be read (a busybox ``ip`` without ``-j``, a pod that did not answer): no verdict."""


class Ambiguous(ValueError):
    """A node name meaning several addresses that a packet reaches equally well, by different paths."""


@dataclass(frozen=True)
class Hop:
    gateway: str | None
    dev: str
    alive: bool  # False: its link is down


@dataclass(frozen=True)
class Route:
    net: ipaddress.IPv4Network
    type: str  # unicast, blackhole, unreachable, prohibit...
    metric: int
    hops: tuple[Hop, ...]


@dataclass(frozen=True)
class Table:
    """A node's IPv4 addresses (interface, address, in the kernel's order) and its main routing table."""

    addresses: tuple[tuple[str, ipaddress.IPv4Interface], ...]
    routes: tuple[Route, ...]

    def iface_of(self, ip: IP) -> str | None:
        return next((i for i, a in self.addresses if a.ip == ip), None)

    def lookup(self, ip: IP) -> Route | None:
        """The route the kernel takes to ``ip``: the most specific, then the lowest metric."""
        return max((r for r in self.routes if ip in r.net), key=lambda r: (r.net.prefixlen, -r.metric), default=None)


def _local(path: str) -> Table:
    try:
        links, found = rtdump.routed(path)
    except FileNotFoundError:  # a node stopped, or sharing another's namespace: nothing of its own to route
        return Table((), ())
    name = {link.index: link.name for link in links}
    return Table(
        tuple((link.name, ipaddress.IPv4Interface(a)) for link in links for a in link.addresses if ":" not in a),
        tuple(
            Route(
                ipaddress.IPv4Network(r.dst, strict=False),
                r.type,
                r.metric,
                tuple(Hop(h.gateway, name.get(h.index, "?"), h.alive) for h in r.nexthops),
            )
            for r in found
            if r.table == rtdump.RT_TABLE_MAIN
        ),
    )


def _remote(run: Run, node: str) -> Table:
    """A node on a server or in a pod: its addresses and main table as ``ip -j`` there says, in one command."""
    rc, out = run(node, ["sh", "-c", "ip -j -4 address show && ip -j -4 route show table main"])
    try:
        answers = [json.loads(line) for line in out.splitlines() if line.startswith("[")]
        if rc != 0 or len(answers) != 2:
            raise ValueError(f"exit {rc}")
        return _parsed(*answers)
    except (ValueError, KeyError, TypeError) as exc:  # not "no route": the check cannot tell, and says so
        raise Unreadable(f"cannot read {node}'s routes ({exc}): {out.strip()[-200:]}") from exc


def _parsed(links: list[dict[str, Any]], found: list[dict[str, Any]]) -> Table:
    """``ip -j`` addresses and routes as a Table."""
    routes = []
    for r in found:
        dst = "0.0.0.0/0" if r["dst"] == "default" else r["dst"]
        hops = tuple(
            Hop(h.get("gateway"), h.get("dev", "?"), not {"linkdown", "dead"} & set(h.get("flags", [])))
            for h in r.get("nexthops") or [r]
        )
        routes.append(Route(ipaddress.IPv4Network(dst, strict=False), r.get("type", "unicast"), r.get("metric", 0), hops))
    addresses = tuple(
        (link["ifname"], ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}"))
        for link in links
        for a in link.get("addr_info", [])
        if a.get("family") == "inet"
    )
    return Table(addresses, tuple(routes))


class Tables:
    """The lab's nodes' tables, each read on first use, and which nodes share a segment with an interface."""

    def __init__(self, running: Lab, run: Run):
        self.running, self.run, self.site = running, run, running.site()
        self.read: dict[str, Table] = {}
        self.segments = _segments(running.plan)

    def __getitem__(self, node: str) -> Table:
        if node not in self.read:
            remote = self.site.remote(node) is not None
            self.read[node] = _remote(self.run, node) if remote else _local(names.netns_path(self.running.name, node))
        return self.read[node]

    def owner(self, ip: IP, node: str, dev: str) -> tuple[str, str] | None:
        """The node, and its interface, holding ``ip`` on the segment of ``node``'s ``dev``; for an interface the
        file does not link (made by ``exec:``, or a host's), any node of the lab."""
        mgmt = management(self.running.plan).get(node)
        if mgmt is not None and dev == mgmt.end.iface:  # the way leaves the lab: no node of it owns the hop
            return None
        near = self.segments.get(f"{node}:{dev}")
        others = near if near is not None else [n for n in self.running.plan.nodes if not _switch(self.running.plan, n)]
        for other in others:
            iface = self[other].iface_of(ip) if other != node else None
            if iface:
                return other, iface
        return None


def _switch(plan: Plan, node: str) -> bool:
    return node in plan.nodes and bool(KINDS.get(plan.nodes[node].kind).switch)


def _segments(plan: Plan) -> dict[str, list[str]]:
    """Per linked interface (NODE:IF), the other nodes on its layer-2 segment: the link's other end, or every
    node behind the switch (and the switches linked to it) it ends on."""
    ends: dict[str, list[str]] = {}
    for link in plan.links.values():
        for one, other in ((link.a, link.b), (link.b, link.a)):
            ends.setdefault(one.node, []).append(other.node)
    out: dict[str, list[str]] = {}
    for link in plan.links.values():
        for one, other in ((link.a, link.b), (link.b, link.a)):
            seen, todo, found = {other.node}, [other.node], []
            while todo:
                node = todo.pop()
                if not _switch(plan, node):
                    found.append(node)
                    continue
                for nxt in ends.get(node, []):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            out[one.ref] = [n for n in found if n != one.node]
    return out


@dataclass(frozen=True)
class Way:
    """Where a packet from the source to one address of the target goes."""

    address: str
    iface: str  # the target's interface holding it
    given: bool  # in the file or set by exec:, not one of nestlab's automatic addresses
    first: Route | None  # the source's route to it
    path: tuple[tuple[str, str], ...]  # (node, interface) each hop leaves by
    stop: str = ""  # why it ends before the target ("" when it reaches it)
    facing: bool = False  # it enters the target by the interface holding the address

    def rank(self) -> tuple[bool, bool, bool, int, bool, tuple[bool, int]]:
        first = (False, -1) if self.first is None else (self.gateway is None, self.first.net.prefixlen)
        return not self.stop, self.first is not None, self.given, -len(self.path), self.facing, first

    @property
    def gateway(self) -> str | None:
        return self.first.hops[0].gateway if self.first is not None and self.first.hops else None

    def __str__(self) -> str:
        if self.first is None:
            return f"{self.address} (no route)"
        how = "directly connected" if self.gateway is None else f"via {self.gateway}"
        return f"{self.address} ({how}, /{self.first.net.prefixlen})"

    def nodes(self, target: str) -> str:
        """The nodes the packet crosses, e.g. ``pc1 -> r1 -> pc2``."""
        return " -> ".join([node for node, _ in self.path] + [target])


def walk(tables: Tables, source: str, target: str, ip: IP, iface: str, given: bool) -> Way:
    """The way from ``source`` to ``ip`` (``target``'s, on ``iface``), hop by hop."""
    node, entered, first = source, "", None
    path: list[tuple[str, str]] = []
    for _ in range(MAX_HOPS):
        table = tables[node]
        if table.iface_of(ip):
            if node == target:
                return Way(str(ip), iface, given, first, tuple(path), facing=entered in ("", iface))
            return Way(str(ip), iface, given, first, tuple(path), f"{ip} is {node}'s too")
        route = table.lookup(ip)
        first = route if node == source else first
        if route is None or route.type != "unicast":
            why = f"{node} has no route to {ip}" if route is None else f"{node} routes {route.net} to {route.type}"
            return Way(str(ip), iface, given, first, tuple(path), why)
        hop = next((h for h in route.hops if h.alive), None)
        if hop is None:
            return Way(str(ip), iface, given, first, tuple(path), f"{node}'s route to {route.net} leaves by a link that is down")
        if (node, hop.dev) in path:
            break
        path.append((node, hop.dev))
        found = tables.owner(ip if hop.gateway is None else ipaddress.IPv4Address(hop.gateway), node, hop.dev)
        if found is None:
            why = f"{hop.gateway or ip}, out of {node}:{hop.dev}, is no node's of the lab"
            return Way(str(ip), iface, given, first, tuple(path), why)
        node, entered = found
    return Way(str(ip), iface, given, first, tuple(path), f"a routing loop ({' -> '.join(f'{n}:{d}' for n, d in path)})")


def automatic(running: Lab) -> set[str]:
    """The addresses nestlab gave the lab's links (``ipv4_pool``), not the file."""
    given: set[str] = set()
    todo: list[Any] = [running.document()]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo += item.values()
        elif isinstance(item, list):
            todo += item
        elif isinstance(item, str) and "/" in item and item[:1].isdigit():
            try:
                given.add(str(ipaddress.ip_interface(item).ip))
            except ValueError:
                pass
    plan = running.plan
    ends = [end for link in plan.links.values() for end in link.ends] + [a.end for a in plan.attachments.values()]
    return {ip for end in ends for a in end.ipv4 if (ip := str(ipaddress.ip_interface(a).ip)) not in given}


def resolve(running: Lab, source: str, to: To, run: Run) -> tuple[str, str, bool]:
    """``to`` as an address, how it was chosen (empty for an address given as such), and whether the routes read
    lead a packet there."""
    if to.address is not None:
        return to.address, "", True
    node = to.node
    if node is None or node not in running.plan.nodes:
        raise ValueError(f"'{to.text}' is neither an address nor a node of lab {running.name}")
    tables = Tables(running, run)
    owned = [(i, a) for i, a in tables[node].addresses if not a.ip.is_loopback and to.iface in ("", i)]
    # the management network (containerlab's eth0 on one bridge for every node) is directly connected to
    # every node: left out unless the node has no other address, or a check would measure it, not the lab
    mgmt = management(running.plan).get(node)
    owned = [(i, a) for i, a in owned if mgmt is None or i != mgmt.end.iface] or owned
    if not owned:
        raise ValueError(f"{to.text} has no IPv4 address in its kernel")
    auto = automatic(running)
    ways = [walk(tables, source, node, a.ip, i, str(a.ip) not in auto) for i, a in owned]
    if not any(w.first for w in ways):
        raise ValueError(f"{source} has no route to any address of {to.text} ({', '.join(w.address for w in ways)})")
    best = max(ways, key=Way.rank)  # max keeps the first of equals: the kernel's order of interfaces
    if best.stop:
        return best.address, f"{to.text} is {best}, but {best.stop}", False
    rivals = [w for w in ways if w.rank() == best.rank() and w.path != best.path]
    if rivals and all(len(w.path) == 1 for w in (best, *rivals)):  # twins: links straight to it, none better
        said = "; ".join(f"{w.address} ({node}:{w.iface}, {w.nodes(node)})" for w in (best, *rivals))
        raise Ambiguous(
            f"{to.text} is ambiguous from {source}: a packet reaches {said}, on different paths; "
            f"name one, e.g. to: {best.address} or to: {node}:{best.iface}"
        )
    also = f"; also {', '.join(f'{w.address} ({node}:{w.iface})' for w in rivals)} (to: {node}:IF chooses)" if rivals else ""
    return best.address, f"{to.text} is {best}{also}", True


class Target:
    """A check's ``to``, resolved on its first use and kept while the check holds; after an attempt that
    failed (a change, a route that moved) it is resolved again, at most every :data:`AGAIN` seconds."""

    def __init__(self, running: Lab, source: str, to: To, run: Run):
        self.running, self.source, self.to, self.run = running, source, to, run
        self.found: tuple[str, str] | None = None
        self.stale = False
        self.last = 0.0
        self.lock = threading.Lock()  # attempts under way at once resolve it once

    def __call__(self, fresh: bool = False) -> tuple[str, str]:
        """The address, and a note on why it was chosen (empty for an address given as such); ``fresh``: read
        the routes again now (a packet got through where the routes read before led nowhere)."""
        with self.lock:
            if self.found is None or fresh or (self.stale and time.monotonic() >= self.last + AGAIN):
                self.last, self.found = time.monotonic(), None
                address, why, reached = resolve(self.running, self.source, self.to, self.run)
                self.found, self.stale = (address, f" ({why})" if why else ""), not reached
            return self.found

    def failed(self) -> None:
        """An attempt through it failed: the next one resolves it again."""
        with self.lock:
            self.stale = True

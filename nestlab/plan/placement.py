"""Which server each node of a lab runs on.

A node and its components are one unit (they share a kernel switch), weighted by how many they
are.  Pinned units (``server:``) stay; the rest are split by recursive bisection: the servers are
halved by weight, the units grown breadth-first from a pinned or peripheral one until the first
half's share is reached, then refined with Kernighan-Lin (networkx: maintained, pure Python,
and exact enough for labs of thousands of nodes; METIS would need a C library on every machine)
to cut fewer links.  Bridges count as units like nodes: a switch goes where most of its ports are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import LabError
from ..model.endpoint import Endpoint
from ..registry import KINDS
from .objects import Plan

if TYPE_CHECKING:
    from networkx import Graph


@dataclass
class Placement:
    server_of: dict[str, str]  # top-level node -> server
    cut: list[tuple[Endpoint, Endpoint]] = field(default_factory=list)  # links (a ref, b ref) whose ends are on two servers
    spans: dict[str, list[str]] = field(default_factory=dict)  # switch -> other servers holding its ports

    def server(self, node: str) -> str:
        return self.server_of[unit(node)]


def unit(node: str) -> str:
    """The placement unit of a node or component (``drone1/gnab`` -> ``drone1``)."""
    return node.split("/", 1)[0]


def place(plan: Plan, weights: dict[str, float], pins: dict[str, str]) -> Placement:
    """Place every unit of ``plan`` on one of ``weights``' servers, keeping ``pins``."""
    import networkx as nx

    graph = nx.Graph()
    for name, obj in plan.nodes.items():
        if KINDS.get(obj.kind).machine:
            raise LabError("a lab on servers: cannot also have emulated hosts:")
        graph.add_node(unit(name))
        graph.nodes[unit(name)]["size"] = graph.nodes[unit(name)].get("size", 0) + 1
    for link in plan.links.values():
        a, b = unit(link.a.node), unit(link.b.node)
        if a != b:
            weight = graph.edges[a, b]["weight"] + 1 if graph.has_edge(a, b) else 1
            graph.add_edge(a, b, weight=weight)
    total = sum(size for _, size in graph.nodes(data="size"))
    biggest = max(weights.values()) / sum(weights.values()) * total
    for name, size in graph.nodes(data="size"):
        if size > max(biggest, 1) and name not in pins:
            raise LabError(
                f"node {name} has {size} nodes with its components, more than any server's share of the lab "
                f"({biggest:.0f} of {total} by weight): add servers, raise a weight, or pin it with server:"
            )
    server_of: dict[str, str] = {}
    _split(graph, set(graph.nodes), sorted(weights), weights, pins, server_of)
    return _result(plan, server_of)


def _split(
    graph: Graph, units: set[str], servers: list[str], weights: dict[str, float], pins: dict[str, str], out: dict[str, str]
) -> None:
    if len(servers) == 1:
        out.update(dict.fromkeys(units, servers[0]))
        return
    if not units:
        return
    left, right = _halve(servers, weights)
    share = sum(weights[s] for s in left) / sum(weights[s] for s in servers)
    target = share * sum(graph.nodes[u]["size"] for u in units)
    to_left = {u for u in units if pins.get(u) in left}
    to_right = {u for u in units if pins.get(u) in right}
    first = _grow(graph, units, target, to_left, to_right)
    side = _refine(graph, units, first, to_left, to_right)
    _split(graph, side, left, weights, pins, out)
    _split(graph, units - side, right, weights, pins, out)


def _halve(servers: list[str], weights: dict[str, float]) -> tuple[list[str], list[str]]:
    """Two groups of servers whose weights are as close to half and half as consecutive runs allow."""
    total, run, best = sum(weights[s] for s in servers), 0.0, 1
    for i, server in enumerate(servers[:-1], 1):
        run += weights[server]
        if abs(run - total / 2) < abs(sum(weights[s] for s in servers[:best]) - total / 2):
            best = i
    return servers[:best], servers[best:]


def _grow(graph: Graph, units: set[str], target: float, fixed: set[str], away: set[str]) -> set[str]:
    """About ``target`` size of units, taken breadth-first from ``fixed`` (or a peripheral unit), none of ``away``."""
    side = set(fixed)
    size = sum(graph.nodes[u]["size"] for u in side)
    for current in _breadth_first(graph, units - away, sorted(fixed)):
        if size >= target - 0.5:
            break
        if current not in side and size + graph.nodes[current]["size"] <= target + 0.5:
            side.add(current)
            size += graph.nodes[current]["size"]
    return side


def _breadth_first(graph: Graph, allowed: set[str], start: list[str]) -> Iterator[str]:
    """Every unit of ``allowed`` once, neighbours first; a new start (least connected) when a region is done."""
    seen = set(start)
    queue = deque(start)
    rest = sorted(allowed, key=lambda u: (graph.degree(u), u))
    while queue or rest:
        if not queue:
            first = rest.pop(0)
            if first in seen:
                continue
            seen.add(first)
            queue.append(first)
        current = queue.popleft()
        yield current
        for near in sorted(graph.neighbors(current)):
            if near in allowed and near not in seen:
                seen.add(near)
                queue.append(near)


def _refine(graph: Graph, units: set[str], side: set[str], fixed: set[str], away: set[str]) -> set[str]:
    """Kernighan-Lin swaps between the halves, kept only if they cut less and moved no pinned unit."""
    from networkx.algorithms.community import kernighan_lin_bisection

    rest = units - side
    if not side or not rest:
        return side
    sub = graph.subgraph(units)
    better, _ = kernighan_lin_bisection(sub, partition=(side, rest), weight="weight", seed=1)
    better = set(better)
    if (
        fixed <= better
        and not (away & better)
        and _size(graph, better) == _size(graph, side)
        and _cut(sub, better) < _cut(sub, side)
    ):
        return better
    return side


def _size(graph: Graph, part: set[str]) -> int:
    size: int = sum(graph.nodes[u]["size"] for u in part)
    return size


def _cut(graph: Graph, side: set[str]) -> int:
    return sum(w for a, b, w in graph.edges(data="weight") if (a in side) != (b in side))


def _result(plan: Plan, server_of: dict[str, str]) -> Placement:
    placed = Placement(server_of)
    for link in plan.links.values():
        a, b = server_of[unit(link.a.node)], server_of[unit(link.b.node)]
        if a == b:
            continue
        switch = next((end.node for end in link.ends if KINDS.get(plan.nodes[end.node].kind).switch), None)
        if switch is None:
            placed.cut.append((Endpoint(link.a.ref), Endpoint(link.b.ref)))
        else:
            other = b if server_of[unit(switch)] == a else a
            if other not in placed.spans.setdefault(switch, []):
                placed.spans[switch].append(other)
    return placed

"""Node kinds, one module each, found by name: ``nestlab.registry.KINDS.get("ovs")``.

A kind module defines a :class:`~nestlab.kinds.base.NodeKind` and registers it; every module in
this package is imported here, so a new kind is a new file (docs/architecture.md).
"""

from __future__ import annotations

from ..plan.objects import NodeObj
from ..registry import KINDS, Registry
from .base import NodeKind

Registry.load(__name__, __path__)


def of(node: NodeObj) -> NodeKind:
    """The kind of a plan object (a router's plan object is a linux node that runs it: its kind is the router's)."""
    kind: NodeKind = KINDS.get(node.router or node.kind)
    return kind


def grouped(nodes: list[NodeObj]) -> list[tuple[NodeKind, list[NodeObj]]]:
    """``nodes`` by kind, in the order each kind first appears (a kind's hooks take all of its nodes at once)."""
    groups: dict[str, list[NodeObj]] = {}
    for node in nodes:
        groups.setdefault(of(node).name, []).append(node)
    return [(of(members[0]), members) for members in groups.values()]


__all__ = ["NodeKind", "grouped", "of"]

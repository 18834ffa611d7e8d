"""What to create and delete to turn the running lab into the desired one."""

from __future__ import annotations

from dataclasses import dataclass, field

from .desired import LinkObj, NodeObj, Plan


@dataclass
class Changes:
    add_nodes: list[NodeObj] = field(default_factory=list)
    del_nodes: list[NodeObj] = field(default_factory=list)
    add_links: list[LinkObj] = field(default_factory=list)
    del_links: list[LinkObj] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.add_nodes or self.del_nodes or self.add_links or self.del_links)

    def summary(self) -> str:
        parts = [
            f"{len(items)} {what}"
            for items, what in (
                (self.add_nodes, "nodes to create"),
                (self.add_links, "links to create"),
                (self.del_nodes, "nodes to delete"),
                (self.del_links, "links to delete"),
            )
            if items
        ]
        return ", ".join(parts) or "nothing to change"


def diff(want: Plan, have: Plan) -> Changes:
    """Changed nodes and links are deleted and created again; a node's links go with it."""
    changes = Changes()
    gone_nodes = set()
    for name, node in have.nodes.items():
        if want.nodes.get(name) != node:
            changes.del_nodes.append(node)
            gone_nodes.add(name)
    for name, node in want.nodes.items():
        if have.nodes.get(name) != node:
            changes.add_nodes.append(node)
    for key, link in have.links.items():
        touches_gone = link.a.node in gone_nodes or link.b.node in gone_nodes
        if want.links.get(key) != link and not touches_gone:
            changes.del_links.append(link)
    for key, link in want.links.items():
        dropped = link.a.node in gone_nodes or link.b.node in gone_nodes
        if have.links.get(key) != link or dropped:
            changes.add_links.append(link)
    return changes

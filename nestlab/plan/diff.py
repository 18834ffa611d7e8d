"""What to create and delete to turn the running lab into the desired one."""

from __future__ import annotations

from dataclasses import dataclass, field

from .objects import AttachObj, LinkObj, NodeObj, Plan


@dataclass
class Changes:
    add_nodes: list[NodeObj] = field(default_factory=list)
    del_nodes: list[NodeObj] = field(default_factory=list)
    add_links: list[LinkObj] = field(default_factory=list)
    del_links: list[LinkObj] = field(default_factory=list)
    add_attachments: list[AttachObj] = field(default_factory=list)
    del_attachments: list[AttachObj] = field(default_factory=list)
    reshape: list[LinkObj] = field(default_factory=list)  # kept links whose shaping or state changed

    def __bool__(self) -> bool:
        return any(getattr(self, f) for f in self.__dataclass_fields__)

    def summary(self) -> str:
        parts = [
            f"{len(items)} {what}"
            for items, what in (
                (self.add_nodes, "nodes to create"),
                (self.add_links, "links to create"),
                (self.add_attachments, "attachments to create"),
                (self.del_nodes, "nodes to delete"),
                (self.del_links, "links to delete"),
                (self.del_attachments, "attachments to delete"),
                (self.reshape, "links to reshape"),
            )
            if items
        ]
        return ", ".join(parts) or "nothing to change"


def diff(want: Plan, have: Plan) -> Changes:
    """Changed objects are deleted and created again; so is everything that depends on a recreated node."""
    changes = Changes()
    gone = {name for name, node in have.nodes.items() if want.nodes.get(name) != node}
    grew = True
    while grew:  # a node sharing a recreated host's stack is recreated too
        more = {name for name, node in have.nodes.items() if node.deps & gone} - gone
        gone |= more
        grew = bool(more)
    changes.del_nodes = [have.nodes[n] for n in have.nodes if n in gone]
    changes.add_nodes = [node for name, node in want.nodes.items() if have.nodes.get(name) != node or name in gone]
    for kind in ("links", "attachments"):
        old, new = getattr(have, kind), getattr(want, kind)
        getattr(changes, "del_" + kind).extend(obj for key, obj in old.items() if new.get(key) != obj or obj.deps & gone)
        getattr(changes, "add_" + kind).extend(obj for key, obj in new.items() if old.get(key) != obj or obj.deps & gone)
    added = {x.key for x in changes.add_links}
    changes.reshape = [
        x
        for key, x in want.links.items()
        if key not in added
        and (have.links[key].shape_a, have.links[key].shape_b, have.links[key].state) != (x.shape_a, x.shape_b, x.state)
    ]
    return changes

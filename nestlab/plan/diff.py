"""What to create and delete to turn the running lab into the desired one."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

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
    retune: list[NodeObj] = field(default_factory=list)  # kept nodes whose live values changed (a medium's stations)

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
                (self.retune, "nodes to retune"),
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
    changes.retune = [
        x for name, x in want.nodes.items() if name in have.nodes and name not in gone and have.nodes[name].live != x.live
    ]
    return changes


@dataclass(frozen=True)
class Step:
    """One object a change makes, removes, recreates or reshapes, and why (``deploy --dry-run``)."""

    what: str  # node, link, attachment
    name: str
    action: str  # create, remove, recreate, reshape
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "name": self.name, "action": self.action, "why": self.why}


def steps(changes: Changes, have: Plan) -> list[Step]:
    """What ``changes`` does to the running lab ``have``, object by object, with each difference that causes it."""
    gone = {n.name for n in changes.del_nodes}
    found: list[Step] = []
    for what, added, deleted, old in (
        ("node", changes.add_nodes, changes.del_nodes, have.nodes),
        ("link", changes.add_links, changes.del_links, have.links),
        ("attachment", changes.add_attachments, changes.del_attachments, have.attachments),
    ):
        made = {_key(obj) for obj in added}
        for obj in added:
            before = old.get(_key(obj))
            if before is None:
                found.append(Step(what, _key(obj), "create"))
            else:
                why = _differences(before, obj) or f"{', '.join(sorted(obj.deps & gone))} is recreated"
                found.append(Step(what, _key(obj), "recreate", why))
        found.extend(Step(what, _key(obj), "remove") for obj in deleted if _key(obj) not in made)
    for link in changes.reshape:
        found.append(Step("link", link.key, "reshape", _differences(have.links[link.key], link, live=True)))
    found.extend(Step("node", node.name, "retune", "its live values (a wireless medium's stations)") for node in changes.retune)
    return found


def _key(obj: NodeObj | LinkObj | AttachObj) -> str:
    return obj.name if isinstance(obj, NodeObj) else obj.key


def _differences(old: object, new: object, prefix: str = "", live: bool = False) -> str:
    """``field old -> new`` for every field that differs and recreates the object (an endpoint's fields by
    name); ``live``: for the fields changed in place instead (a link's shapes and state)."""
    said = []
    for f in fields(old):  # type: ignore[arg-type]
        if f.compare == live:
            continue
        before, after = getattr(old, f.name), getattr(new, f.name)
        if before == after:
            continue
        if is_dataclass(before) and is_dataclass(after):
            said.append(_differences(before, after, f"{prefix}{f.name}."))
        else:
            said.append(f"{prefix}{f.name} {_shown(before)} -> {_shown(after)}")
    return "; ".join(said)


def _shown(value: object) -> str:
    if value in (None, (), ""):
        return "none"
    if isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        value = ", ".join(f"{k}={v}" for k, v in value)
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."

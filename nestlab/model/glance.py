"""A glance at a topology as written, before it is planned: the namespaces and plain cables it asks for.

A deploy on this machine (engine/deploy.py) hands this to a helper that makes them while the lab is planned
(backends/kernel/spares.py), from the data its file was read into (:func:`looked`).  It is a guess, never
an error: whatever the checked plan wants differently is made the usual way, and what the helper made that
the plan does not want is removed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import yaml

from ..registry import KINDS

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_KEYS = {"kind"}  # a node spec with nothing else is a plain host or bridge


@dataclass
class Glance:
    name: str | None = None
    nodes: list[str] = field(default_factory=list)  # nodes nestlab makes namespaces for itself, in file order
    extra: int = 0  # more namespaces, for nested components
    bridges: list[str] = field(default_factory=list)  # of those, plain nodes holding a bridge (kind: bridge)
    cables: list[tuple[str, str, str, str]] = field(
        default_factory=list
    )  # links given by their endpoints alone, between plain nodes
    bridge_sysctls: dict[str, str] = field(default_factory=dict)  # what their kind sets


def glance(path) -> Glance:
    """What the file at ``path`` asks for; an empty :class:`Glance` for anything but a plain YAML topology
    on this machine alone (a Kathará folder, a Go template, a lab on servers, images from defaults)."""
    try:
        if not os.path.isfile(path):  # a pipe (/dev/stdin) is the deploy's to read, once; a folder is a Kathará lab
            return Glance()
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_Loader)
    except Exception:  # unreadable, not YAML
        return Glance()
    return looked(data)


def looked(data: object) -> Glance:
    """What a topology's data as written (the file's, already read) asks for: as :func:`glance`."""
    if not isinstance(data, dict):
        return Glance()
    try:
        topology = data["topology"]
        nodes, links = topology["nodes"], topology.get("links") or []
        if not isinstance(data["name"], str) or not isinstance(nodes, dict) or not isinstance(links, list):
            return Glance()
    except Exception:  # another layout
        return Glance()
    if "servers" in data or any("image" in str(topology.get(key)) for key in ("defaults", "kinds", "groups")):
        return Glance(data["name"])
    found = Glance(data["name"])
    plain = _nodes(found, nodes)
    for link in links:
        ends = link.get("endpoints") if isinstance(link, dict) and set(link) == {"endpoints"} else None
        if isinstance(ends, list) and len(ends) == 2 and all(isinstance(e, str) and e.count(":") == 1 for e in ends):
            (a, ia), (b, ib) = (e.split(":") for e in ends)
            if a in plain and b in plain and a != b and ia and ib:
                found.cables.append((a, ia, b, ib))
    return found


def _nodes(found: Glance, nodes: dict) -> set[str]:
    """The namespaces ``nodes`` (as written) ask nestlab for, added to ``found``; returns the plain ones."""
    plain = set()
    for name, spec in nodes.items():
        name, spec = str(name), spec or {}
        if not isinstance(spec, dict) or "image" in spec or spec.get("runtime", "namespace") != "namespace":
            continue
        found.nodes.append(name)
        components = spec.get("components")
        if isinstance(components, dict) and spec.get("nesting") != "flat":
            found.extra += len(components)
        kind = spec.get("kind", "linux")
        if set(spec) <= _PLAIN_KEYS and kind in KINDS and KINDS.get(kind).ahead:
            plain.add(name)
            if KINDS.get(kind).own_bridge:
                found.bridges.append(name)
                found.bridge_sysctls = KINDS.get(kind).sysctls()
    return plain

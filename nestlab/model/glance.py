"""A glance at a topology as written, before it is planned: the namespaces it asks for.

A deploy on this machine (engine/deploy.py) hands this to a helper that makes them while the lab is planned
(backends/kernel/spares.py), from the data its file was read into (:func:`looked`).  It is a guess, never
an error: whatever the checked plan wants differently is made the usual way, and what the helper made that
the plan does not want is freed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..registry import KINDS

_PLAIN_KEYS = {"kind"}  # a node spec with nothing else is a plain host or bridge


@dataclass
class Glance:
    name: str | None = None
    nodes: list[str] = field(default_factory=list)  # nodes nestlab makes namespaces for itself, in file order
    extra: int = 0  # more namespaces, for nested components
    bridges: list[str] = field(default_factory=list)  # of those, plain nodes holding a bridge (kind: bridge)
    bridge_sysctls: dict[str, str] = field(default_factory=dict)  # what their kind sets


def looked(data: object) -> Glance:
    """What a topology's data as written (the file's, already read) asks for; an empty :class:`Glance` for anything
    but a plain topology on this machine alone (a lab on servers, images from defaults)."""
    if not isinstance(data, dict):
        return Glance()
    try:
        topology = data["topology"]
        nodes = topology["nodes"]
        if not isinstance(data["name"], str) or not isinstance(nodes, dict):
            return Glance()
    except Exception:  # another layout
        return Glance()
    if "servers" in data or any("image" in str(topology.get(key)) for key in ("defaults", "kinds", "groups")):
        return Glance(data["name"])
    found = Glance(data["name"])
    for name, spec in nodes.items():
        name, spec = str(name), spec or {}
        if not isinstance(spec, dict) or "image" in spec or spec.get("runtime", "namespace") != "namespace":
            continue
        found.nodes.append(name)
        components = spec.get("components")
        if isinstance(components, dict) and spec.get("nesting") != "flat":
            found.extra += len(components)
        kind = spec.get("kind", "linux")
        if set(spec) <= _PLAIN_KEYS and kind in KINDS and KINDS.get(kind).own_bridge:
            found.bridges.append(name)
            found.bridge_sysctls = KINDS.get(kind).sysctls()
    return found

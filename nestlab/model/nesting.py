"""Nested nodes: a node's ``components:`` become nodes named ``NODE/COMPONENT``.

Nested (the default), each component is a container of its own (network, UTS,
PID and mount namespaces, a cgroup under its node's) whose ``eth0`` is a port
of the node's internal switch, on ``internal_subnet`` (the same addresses in
every node).  Flat, components are processes sharing the node's network stack,
as in Containernet.  Expansion is idempotent: a topology read back from a
running lab's state already holds its components.
"""

from __future__ import annotations

import ipaddress

from ..registry import KINDS
from .errors import Problem
from .schema import LinkSpec, NodeSpec, Topology
from .yamlsource import Located


def component_name(node: str, component: str) -> str:
    return f"{node}/{component}"


def expand(topology: Topology, located: Located) -> list[Problem]:
    """Add every component as a node and, nested, its link to the node's internal switch."""
    body = topology.topology
    problems: list[Problem] = []
    have_links = {ep for link in body.links for ep in link.endpoints}
    for name, spec in list(body.nodes.items()):
        if not spec.components or spec.component_of:
            continue
        path = ("topology", "nodes", name)
        if spec.kind and KINDS.get(spec.kind).switch:
            problems.append(
                located.problem(
                    path + ("components",),
                    f"a {spec.kind} node cannot hold components; use kind: linux with internal_switch: {spec.kind}",
                )
            )
            continue
        if spec.runtime == "docker" or spec.image:
            problems.append(
                located.problem(
                    path + ("components",),
                    "a node with components is their switch and holds no image; give image: to the components",
                )
            )
            continue
        flat = spec.nesting == "flat"
        addresses = ipaddress.IPv4Network(spec.internal_subnet).hosts()
        for cname, comp in spec.components.items():
            full = component_name(name, cname)
            if flat and comp.resources:
                problems.append(
                    located.problem(
                        path + ("components", cname, "resources"),
                        "with nesting: flat, components are processes of their node; give resources: to the node",
                    )
                )
            if flat and comp.image:
                problems.append(
                    located.problem(
                        path + ("components", cname, "image"),
                        "with nesting: flat, components share their node's filesystem; use nesting: nested for an image",
                    )
                )
            address = next(addresses)
            if full in body.nodes:
                continue
            body.nodes[full] = NodeSpec(
                kind="linux",
                host=spec.host,
                mode=spec.mode,
                resources=None if flat else comp.resources,
                image=None if flat else comp.image,
                exec=comp.exec,
                env={**spec.env, **comp.env},
                sysctls={} if flat else comp.sysctls,
                component_of=name,
            )
            if not flat and f"{full}:eth0" not in have_links:
                body.links.append(
                    LinkSpec(endpoints=[f"{full}:eth0", f"{name}:{cname}"], ipv4=[f"{address}/{addresses_prefix(spec)}", None])
                )
    return problems


def addresses_prefix(spec: NodeSpec) -> int:
    return ipaddress.IPv4Network(spec.internal_subnet).prefixlen


def parent_node(topology: Topology, name: str) -> str | None:
    spec = topology.topology.nodes.get(name)
    return spec.component_of if spec else None


def is_flat(topology: Topology, name: str) -> bool:
    """Whether ``name`` is a component that shares its node's network stack."""
    parent = parent_node(topology, name)
    return parent is not None and topology.topology.nodes[parent].nesting == "flat"

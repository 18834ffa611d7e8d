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
from .endpoint import Endpoint
from .errors import Path, Problem
from .schema import Topology, TopologyBody
from .schema.links import LinkSpec
from .schema.nodes import ComponentSpec, NodeSpec
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
        problem = _holder_problem(spec, path, located)
        if problem:
            problems.append(problem)
            continue
        addresses = ipaddress.IPv4Network(spec.internal_subnet).hosts()
        for cname, comp in spec.components.items():
            if spec.nesting == "flat":
                problems += _flat_problems(comp, path + ("components", cname), located)
            address = next(addresses)
            if component_name(name, cname) not in body.nodes:
                _add_component(body, name, cname, address, have_links)
    return problems


def _holder_problem(spec: NodeSpec, path: Path, located: Located) -> Problem | None:
    """Why a node cannot hold components: it is a switch, or runs an image."""
    if spec.kind and KINDS.get(spec.kind).switch:
        return located.problem(
            path + ("components",),
            f"a {spec.kind} node cannot hold components; use kind: linux with internal_switch: {spec.kind}",
        )
    if spec.runtime == "docker" or spec.image:
        return located.problem(
            path + ("components",),
            "a node with components is their switch and holds no image; give image: to the components",
        )
    return None


def _flat_problems(comp: ComponentSpec, path: Path, located: Located) -> list[Problem]:
    """A flat node's component (a process of its node) takes no resources and no image."""
    problems = []
    if comp.resources:
        problems.append(
            located.problem(
                path + ("resources",),
                "with nesting: flat, components are processes of their node; give resources: to the node",
            )
        )
    if comp.image:
        problems.append(
            located.problem(
                path + ("image",),
                "with nesting: flat, components share their node's filesystem; use nesting: nested for an image",
            )
        )
    return problems


def _add_component(body: TopologyBody, name: str, cname: str, address: ipaddress.IPv4Address, have_links: set[Endpoint]) -> None:
    """Node ``name``'s component ``cname`` as a node and, nested, the link from its eth0 to the node's switch
    (unless the file has one)."""
    spec = body.nodes[name]
    comp = spec.components[cname]
    full = component_name(name, cname)
    flat = spec.nesting == "flat"
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


def addresses_prefix(spec: NodeSpec) -> int:
    return ipaddress.IPv4Network(spec.internal_subnet).prefixlen


def parent_node(topology: Topology, name: str) -> str | None:
    spec = topology.topology.nodes.get(name)
    return spec.component_of if spec else None


def is_flat(topology: Topology, name: str) -> bool:
    """Whether ``name`` is a component that shares its node's network stack."""
    parent = parent_node(topology, name)
    return parent is not None and topology.topology.nodes[parent].nesting == "flat"

"""Parallel paths between two nodes (seed 001's testbed): a bundle link becomes N links, plus its tunnel.

``endpoints: [a, b], paths: N`` is N veth links ``a:pK``-``b:pK`` (K = 1..N), each with the
bundle's mode, MTU and shaping and a subnet of its own.  With ``multipath: {type: mpt}`` a
further link ``a:mpt0``-``b:mpt0`` of mode ``mpt`` is the tunnel over them.  An ``mpt`` link can
also be written by hand over interfaces both nodes have (``multipath.paths``).
"""

from __future__ import annotations

from .errors import Problem
from .schema import Topology
from .schema.links import LinkSpec
from .yamlsource import Located

TUNNEL = "mpt0"


def expand_paths(topology: Topology, located: Located) -> list[Problem]:
    """Replace every bundle by its paths (and tunnel); check every mpt link's paths and weights."""
    body = topology.topology
    problems: list[Problem] = []
    links: list[LinkSpec] = []
    for i, link in enumerate(body.links):
        path = ("topology", "links", i)
        if link.paths is None:
            links.append(link.model_copy(update={"mode": "mpt"}) if link.multipath and not link.mode else link)
            continue
        if len(link.endpoints) != 2 or any(":" in ep for ep in link.endpoints):
            problems.append(
                located.problem(
                    path + ("endpoints",), "with paths:, give the two node names (e.g. [a, b]); their interfaces are named p1..pN"
                )
            )
            continue
        if link.ipv4 or link.ipv6 or link.mode not in (None, "veth"):
            problems.append(
                located.problem(
                    path,
                    "a bundle of paths is veth links with automatic addresses; write the links out to choose their mode or addresses",
                )
            )
            continue
        a, b = link.endpoints
        names = [f"p{k}" for k in range(1, link.paths + 1)]
        common = link.model_dump(exclude={"endpoints", "paths", "multipath"}, exclude_none=True)
        links += [LinkSpec(endpoints=[f"{a}:{n}", f"{b}:{n}"], **common) for n in names]
        if link.multipath:
            spec = link.multipath.model_copy(update={"paths": link.multipath.paths or names})
            links.append(LinkSpec(endpoints=[f"{a}:{TUNNEL}", f"{b}:{TUNNEL}"], mode="mpt", multipath=spec))
    body.links = links
    have = {tuple(sorted(ln.endpoints)) for ln in links if ln.mode != "mpt"}
    for i, link in enumerate(links):
        if link.mode != "mpt":
            continue
        path = ("topology", "links", i)
        mp = link.multipath
        if mp is None or not mp.paths or len(link.endpoints) != 2:
            problems.append(
                located.problem(path, "an mpt link joins two endpoints and names its paths: multipath: {paths: [p1, p2]}")
            )
            continue
        node_a, node_b = (ep.node for ep in link.endpoints)
        for name in mp.paths:
            if tuple(sorted((f"{node_a}:{name}", f"{node_b}:{name}"))) not in have:
                problems.append(
                    located.problem(path + ("multipath", "paths"), f"path {name}: no link {node_a}:{name} - {node_b}:{name}")
                )
        if mp.weights is not None and len(mp.weights) != len(mp.paths):
            problems.append(
                located.problem(
                    path + ("multipath", "weights"), f"{len(mp.weights)} weights for {len(mp.paths)} paths; give one per path"
                )
            )
    return problems

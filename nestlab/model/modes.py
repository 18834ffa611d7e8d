"""Hosts, wires and link modes: resolving a node's kind and host, and checking a topology's use of them.

A node runs on a host (``host:``; the implicit host ``local`` when the file declares no
``hosts:``).  A link's mode (a word of the registry in nestlab/links) says how its endpoints
are attached; the rules every mode shares are here, each mode's own rules in its module.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ..names import IFNAMSIZ, is_ifname
from ..registry import KINDS, LINK_MODES
from .errors import Path, Problem
from .schema import IMPLICIT_HOST, Topology, TopologyBody
from .schema.base import NAME_PATTERN
from .schema.links import LinkSpec
from .schema.nodes import NodeSpec
from .yamlsource import Located

WIRE_SWITCH = re.compile(r"^wire\d+$")


def node_kind(topology: Topology, name: str) -> str:
    """A node's effective kind: its own, else its kind defaults, else ``defaults``, else linux."""
    body = topology.topology
    spec = body.nodes[name]
    if spec.components and spec.nesting == "nested":
        return spec.internal_switch  # the node holds its components' switch
    return KINDS.canonical(spec.kind or body.defaults.kind or "linux")


def kind_defaults(body: TopologyBody, kind: str) -> NodeSpec | None:
    """The ``kinds:`` entry for ``kind``, under its name or one of its aliases."""
    return next((spec for word, spec in body.kinds.items() if KINDS.canonical(word) == kind), None)


def _layered(topology: Topology, name: str, field: str) -> Any:
    """A node field with kind defaults and ``defaults`` applied (last set wins)."""
    body = topology.topology
    layers = [body.defaults, kind_defaults(body, node_kind(topology, name)), body.nodes[name]]
    value = None
    for layer in layers:
        if layer is not None and getattr(layer, field) is not None:
            value = getattr(layer, field)
    return value


def node_host(topology: Topology, name: str) -> str:
    return _layered(topology, name, "host") or (IMPLICIT_HOST if not topology.hosts else next(iter(topology.hosts)))


def shares_host_stack(topology: Topology, name: str) -> bool:
    return bool(_layered(topology, name, "mode") == "none")  # the schema reads host as none


def host_names(topology: Topology) -> list[str]:
    return list(topology.hosts) or [IMPLICIT_HOST]


def link_mode(topology: Topology, link: LinkSpec) -> str:
    if link.mode:
        return link.mode
    nodes = [ep.node for ep in link.endpoints]
    kinds = [KINDS.get(node_kind(topology, n)) for n in nodes if n in topology.topology.nodes]
    return next((kind.link_mode for kind in kinds if kind.link_mode), "veth")


def parent_of(topology: Topology, link: LinkSpec) -> tuple[str | None, str]:
    """``(host, nic)`` of an attachment's parent; host None for a real interface of this machine."""
    parent = link.parent or ""
    host, sep, nic = parent.rpartition(":")
    if sep:
        return host, nic
    if topology.allow_host_interfaces:
        return None, parent
    return node_host(topology, link.endpoints[0].node), parent


class Context:
    """What a link mode's checks may ask of the topology (see ``LinkMode.check``)."""

    def __init__(self, topology: Topology, located: Located):
        self.topology = topology
        self.problem = located.problem

    def kind(self, node: str) -> str:
        return node_kind(self.topology, node)

    def host(self, node: str) -> str:
        return node_host(self.topology, node)

    def shares_stack(self, node: str) -> bool:
        return shares_host_stack(self.topology, node)

    def parent_of(self, link: LinkSpec) -> tuple[str | None, str]:
        return parent_of(self.topology, link)


def check_modes(topology: Topology, located: Located) -> list[Problem]:
    """Rules for hosts, wires, node placement and link modes."""
    return (
        _check_hosts(topology, located)
        + _check_nodes(topology, located)
        + _check_dynamics(topology, located)
        + _check_wires(topology, located)
        + _check_links(topology, located)
    )


def _check_hosts(topology: Topology, located: Located) -> list[Problem]:
    """Host names: letters, digits, '-', '_', not a wire switch's name nor a node's."""
    return [
        located.problem(
            ("hosts", name), f"host name '{name}' must be letters, digits, '-', '_', not wireN, and differ from every node name"
        )
        for name in topology.hosts
        if not re.match(NAME_PATTERN, name) or WIRE_SWITCH.match(name) or name in topology.topology.nodes
    ]


def _check_nodes(topology: Topology, located: Located) -> list[Problem]:
    """Each node: not named as a wire switch, on a declared host, sharing its host's stack only if its kind can,
    with only its kind's options, and its kind's own rules."""
    problems: list[Problem] = []
    body = topology.topology
    for name, spec in body.nodes.items():
        path = ("topology", "nodes", name)
        if WIRE_SWITCH.match(name):
            problems.append(located.problem(path, f"node name '{name}' is reserved for wire switches; pick another"))
        host = _layered(topology, name, "host")
        if host is not None and host not in topology.hosts:
            where = ", ".join(topology.hosts) or "none; declare them under hosts:"
            problems.append(located.problem(path + ("host",), f"host '{host}' is not declared under hosts: (declared: {where})"))
        kind = node_kind(topology, name)
        if shares_host_stack(topology, name) and not KINDS.get(kind).shares_stack:
            sharing = ", ".join(k.name for k in KINDS.values() if k.shares_stack)
            problems.append(
                located.problem(path + ("mode",), f"only {sharing} nodes can share their host's stack; '{name}' is kind {kind}")
            )
        for other in KINDS.values():
            for key in other.options:
                if other.name != kind and getattr(spec, key):
                    problems.append(located.problem(path + (key,), f"'{key}' applies to kind: {other.name} nodes only"))
        problems += [located.problem(path + where, message) for where, message in KINDS.get(kind).check(spec)]
    return problems


def _check_dynamics(topology: Topology, located: Located) -> list[Problem]:
    """``dynamics: nodes:``: defined nodes, with names short enough for their radio interfaces (v-PEER)."""
    problems: list[Problem] = []
    if not topology.dynamics:
        return problems
    for j, name in enumerate(topology.dynamics.nodes or []):
        if name not in topology.topology.nodes:
            problems.append(located.problem(("dynamics", "nodes", j), f"node '{name}' is not defined under topology.nodes"))
        elif len(name) > IFNAMSIZ - 2:
            problems.append(
                located.problem(
                    ("dynamics", "nodes", j),
                    f"radio interfaces are named v-PEER: '{name}' is longer than {IFNAMSIZ - 2} characters",
                )
            )
    return problems


def _check_links(topology: Topology, located: Located) -> list[Problem]:
    """Each link against its mode: the keys it takes, its ends and parent, then the mode's own rules."""
    problems: list[Problem] = []
    body = topology.topology
    ctx = Context(topology, located)
    owners = option_owners()
    parents: dict[tuple[str | None, str], tuple[str, Path]] = {}
    for i, link in enumerate(body.links):
        base = ("topology", "links", i)
        name = link_mode(topology, link)
        mode = LINK_MODES.get(name)
        if any(ep.node not in body.nodes for ep in link.endpoints):
            continue  # reported by the endpoint checks
        problems += _check_link_keys(located, link, base, name, owners)
        found, go_on = _check_ends(topology, located, ctx, link, base, parents)
        problems += found
        if go_on:
            problems += mode.check(ctx, link, base)
    return problems


def _check_link_keys(located: Located, link: LinkSpec, base: Path, name: str, owners: dict[str, list[str]]) -> list[Problem]:
    """The keys a link sets that its mode does not take (macs, and the keys other modes own)."""
    problems: list[Problem] = []
    if link.macs and not LINK_MODES.get(name).takes_macs:
        takers = " or ".join(m.name for m in LINK_MODES.values() if m.takes_macs)
        problems.append(
            located.problem(base + ("macs",), f"macs applies to mode: {takers} links only (this link is mode: {name})")
        )
    for key, owned_by in owners.items():
        if getattr(link, key) not in (None, []) and name not in owned_by:
            problems.append(
                located.problem(
                    base + (key,), f"'{key}' applies to mode: {' or '.join(owned_by)} links only (this link is mode: {name})"
                )
            )
    return problems


def _check_ends(
    topology: Topology,
    located: Located,
    ctx: Context,
    link: LinkSpec,
    base: Path,
    parents: dict[tuple[str | None, str], tuple[str, Path]],
) -> tuple[list[Problem], bool]:
    """A link's ends for its mode: one, on its parent, for a mode that attaches a node to its host; two otherwise.
    ``(problems, whether the mode's own rules apply)``: not when the ends are wrong."""
    name = link_mode(topology, link)
    mode = LINK_MODES.get(name)
    ends = [ep.node for ep in link.endpoints]
    if mode.ends != 1:
        if len(ends) != 2:
            one_ended = ", ".join(m.name for m in LINK_MODES.values() if m.ends == 1)
            return [
                located.problem(
                    base + ("endpoints",), f"a {name} link joins two endpoints; for one endpoint use mode: {one_ended}"
                )
            ], False
        if link.parent:
            return [located.problem(base + ("parent",), f"parent: is for single-endpoint attachments, not mode: {name}")], True
        return [], True
    if len(ends) != 1:
        message = f'mode: {name} attaches one endpoint to its host; give one endpoint, e.g. ["{ends[0]}:eth1"]'
        return [located.problem(base + ("endpoints",), message)], False
    if mode.needs_parent and not link.parent:
        message = f"mode: {name} needs parent: HOST:NIC, the host NIC it sits on (e.g. {node_host(topology, ends[0])}:nic0)"
        return [located.problem(base + ("mode",), message)], False
    if not link.parent:
        return [], True
    found = mode.check_parent(ctx, link, base)
    return (_check_parent(topology, located, link, base, mode, parents) if found is None else found), True


def _check_wires(topology: Topology, located: Located) -> list[Problem]:
    problems = []
    nics: dict[tuple[str, str], Path] = {}
    for i, wire in enumerate(topology.wires):
        for j, endpoint in enumerate(wire.endpoints):
            path = ("wires", i, "endpoints", j)
            host, nic = endpoint.key
            if ":" not in endpoint or host not in topology.hosts:
                problems.append(
                    located.problem(
                        path,
                        f"wire endpoint '{endpoint}' must be HOST:NIC with HOST under hosts: ({', '.join(topology.hosts) or 'none declared'})",
                    )
                )
            elif not _ifname_ok(nic):
                problems.append(
                    located.problem(path, f"NIC name '{nic}' must be 1-{IFNAMSIZ} characters of letters, digits, '.', '-', '_'")
                )
            elif (host, nic) in nics:
                problems.append(located.problem(path, f"NIC '{endpoint}' is already on wires[{nics[(host, nic)][1]}]"))
            else:
                nics[(host, nic)] = path
        if wire.ipv4 is not None and len(wire.ipv4) != len(wire.endpoints):
            problems.append(
                located.problem(
                    ("wires", i, "ipv4"), f"ipv4 needs one entry per endpoint ({len(wire.endpoints)}); use null for automatic"
                )
            )
    return problems


class _ParentMode(Protocol):
    """What a parent's check needs of a link mode (nestlab/links)."""

    name: str
    moves_parent: bool


def _check_parent(
    topology: Topology,
    located: Located,
    link: LinkSpec,
    base: Path,
    mode: _ParentMode,
    parents: dict[tuple[str | None, str], tuple[str, Path]],
) -> list[Problem]:
    """A parent that is a NIC of the node's host (or, with allow_host_interfaces, of this machine)."""
    problems = []
    node = link.endpoints[0].node
    host, nic = parent_of(topology, link)
    path = base + ("parent",)
    if host is None:
        if not _ifname_ok(nic):
            problems.append(located.problem(path, f"'{nic}' is not an interface name"))
        return problems
    if host not in host_names(topology):
        problems.append(located.problem(path, f"host '{host}' is not declared under hosts: ({', '.join(host_names(topology))})"))
    elif host != node_host(topology, node):
        problems.append(
            located.problem(
                path, f"{node} runs on host {node_host(topology, node)}; its parent must be a NIC of that host, not of {host}"
            )
        )
    elif topology.hosts and (host, nic) not in topology.wired_nics:
        known = ", ".join(f"{h}:{n}" for h, n in sorted(topology.wired_nics) if h == host) or "none"
        problems.append(
            located.problem(
                path,
                f"'{host}:{nic}' is not a NIC of a wire (NICs of {host}: {known}); "
                "to use a real interface of this machine write parent: IFACE with allow_host_interfaces: true",
            )
        )
    elif not _ifname_ok(nic):
        problems.append(located.problem(path, f"NIC name '{nic}' must be 1-{IFNAMSIZ} characters"))
    key = (host, nic)
    if key in parents and (mode.moves_parent or LINK_MODES.get(parents[key][0]).moves_parent):
        problems.append(
            located.problem(
                path,
                f"NIC '{link.parent}' is moved into a node by mode: {mode.name if mode.moves_parent else parents[key][0]}, "
                f"so it can carry nothing else (also used at {'.'.join(map(str, parents[key][1]))})",
            )
        )
    parents.setdefault(key, (mode.name, base))
    return problems


def _ifname_ok(name: str) -> bool:
    return is_ifname(name) and name != "lo"


def option_owners() -> dict[str, list[str]]:
    """Each mode-owned link key and the modes that take it."""
    owners: dict[str, list[str]] = {}
    for mode in LINK_MODES.values():
        for key in mode.options:
            owners.setdefault(key, []).append(mode.name)
    return owners

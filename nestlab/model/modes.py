"""Hosts, wires and attachment modes: resolving them and checking a topology's use of them.

A node runs on a host (``host:``; the implicit host ``local`` when the file
declares no ``hosts:``).  A link's mode says how its endpoints are attached:
``veth`` (two nodes on one host), ``ovs`` (one end is an OVS switch node),
``vxlan`` (two nodes on different hosts), or a single endpoint attached to its
host: ``bridge``, ``macvlan``, ``ipvlan``, ``phys`` on a host NIC ``parent``.
"""

from __future__ import annotations

import re

from .errors import Path, Problem
from .schema import IFNAMSIZ, IMPLICIT_HOST, NAME_PATTERN, SINGLE_ENDED_MODES, LinkSpec, Topology
from .yamlsource import Located

WIRE_SWITCH = re.compile(r"^wire\d+$")
_MODE_OPTIONS = {
    "macvlan_mode": "macvlan",
    "ipvlan_mode": "ipvlan",
    "ipvlan_flag": "ipvlan",
    "bridge": "bridge",
    "nat": "bridge",
    "publish": "bridge",
    "vni": "vxlan",
    "port": "vxlan",
}
_PUBLISH = re.compile(r"^(\d{1,5})/(tcp|udp)$")


def _layered(topology: Topology, name: str, field: str):
    """A node field with kind defaults and ``defaults`` applied (last set wins)."""
    from .load import node_kind

    body = topology.topology
    kind = node_kind(topology, name)
    layers = [body.defaults, body.kinds.get(kind) or body.kinds.get("host" if kind == "linux" else kind), body.nodes[name]]
    value = None
    for layer in layers:
        if layer is not None and getattr(layer, field) is not None:
            value = getattr(layer, field)
    return value


def node_host(topology: Topology, name: str) -> str:
    return _layered(topology, name, "host") or (IMPLICIT_HOST if not topology.hosts else next(iter(topology.hosts)))


def shares_host_stack(topology: Topology, name: str) -> bool:
    return _layered(topology, name, "mode") in ("none", "host")


def host_names(topology: Topology) -> list[str]:
    return list(topology.hosts) or [IMPLICIT_HOST]


def link_mode(topology: Topology, link: LinkSpec) -> str:
    from .load import node_kind

    if link.mode:
        return link.mode
    nodes = [ep.partition(":")[0] for ep in link.endpoints]
    if any(n in topology.topology.nodes and node_kind(topology, n) == "ovs" for n in nodes):
        return "ovs"
    return "veth"


def parent_of(topology: Topology, link: LinkSpec) -> tuple[str | None, str]:
    """``(host, nic)`` of an attachment's parent; host None for a real interface of this machine."""
    parent = link.parent or ""
    host, sep, nic = parent.rpartition(":")
    if sep:
        return host, nic
    if topology.allow_host_interfaces:
        return None, parent
    return node_host(topology, link.endpoints[0].partition(":")[0]), parent


def check_modes(topology: Topology, located: Located) -> list[Problem]:
    """Rules for hosts, wires, node placement and link modes."""
    from .load import node_kind

    problems: list[Problem] = []
    body = topology.topology

    def bad(path: Path, message: str) -> None:
        problems.append(located.problem(path, message))

    for name in topology.hosts:
        if not re.match(NAME_PATTERN, name) or WIRE_SWITCH.match(name) or name in body.nodes:
            bad(("hosts", name), f"host name '{name}' must be letters, digits, '-', '_', not wireN, and differ from every node name")
    for name in body.nodes:
        path = ("topology", "nodes", name)
        if WIRE_SWITCH.match(name):
            bad(path, f"node name '{name}' is reserved for wire switches; pick another")
        host = _layered(topology, name, "host")
        if host is not None and host not in topology.hosts:
            where = ", ".join(topology.hosts) or "none; declare them under hosts:"
            bad(path + ("host",), f"host '{host}' is not declared under hosts: (declared: {where})")
        kind = node_kind(topology, name)
        if shares_host_stack(topology, name) and kind != "linux":
            bad(path + ("mode",), f"only linux nodes can share their host's stack; '{name}' is kind {kind}")
        spec = body.nodes[name]
        for key in ("datapath", "controller", "flows"):
            if getattr(spec, key) and kind != "ovs":
                bad(path + (key,), f"'{key}' applies to kind: ovs nodes only")
    if topology.dynamics:
        for j, name in enumerate(topology.dynamics.nodes or []):
            if name not in body.nodes:
                bad(("dynamics", "nodes", j), f"node '{name}' is not defined under topology.nodes")
            elif len(name) > IFNAMSIZ - 2:
                bad(("dynamics", "nodes", j), f"radio interfaces are named v-PEER: '{name}' is longer than {IFNAMSIZ - 2} characters")
    nics: dict[tuple[str, str], Path] = {}
    for i, wire in enumerate(topology.wires):
        for j, endpoint in enumerate(wire.endpoints):
            path = ("wires", i, "endpoints", j)
            host, sep, nic = endpoint.partition(":")
            if not sep or host not in topology.hosts:
                bad(path, f"wire endpoint '{endpoint}' must be HOST:NIC with HOST under hosts: ({', '.join(topology.hosts) or 'none declared'})")
            elif not _ifname_ok(nic):
                bad(path, f"NIC name '{nic}' must be 1-{IFNAMSIZ} characters of letters, digits, '.', '-', '_'")
            elif (host, nic) in nics:
                bad(path, f"NIC '{endpoint}' is already on wires[{nics[(host, nic)][1]}]")
            else:
                nics[(host, nic)] = path
        if wire.ipv4 is not None and len(wire.ipv4) != len(wire.endpoints):
            bad(("wires", i, "ipv4"), f"ipv4 needs one entry per endpoint ({len(wire.endpoints)}); use null for automatic")
    parents: dict[tuple[str | None, str], tuple[str, Path]] = {}
    for i, link in enumerate(body.links):
        base = ("topology", "links", i)
        mode = link_mode(topology, link)
        ends = [ep.partition(":")[0] for ep in link.endpoints]
        if any(n not in body.nodes for n in ends):
            continue  # reported by the endpoint checks
        for key, owner in _MODE_OPTIONS.items():
            if getattr(link, key) not in (None, []) and owner != mode:
                bad(base + (key,), f"'{key}' applies to mode: {owner} links only (this link is mode: {mode})")
        if mode in SINGLE_ENDED_MODES:
            if len(ends) != 1:
                bad(base + ("endpoints",), f"mode: {mode} attaches one endpoint to its host; give one endpoint, e.g. [\"{ends[0]}:eth1\"]")
                continue
            if mode != "bridge" and not link.parent:
                bad(base + ("mode",), f"mode: {mode} needs parent: HOST:NIC, the host NIC it sits on (e.g. {node_host(topology, ends[0])}:nic0)")
                continue
            if link.parent:
                problems.extend(_check_parent(topology, located, link, base, mode, parents))
            for port in link.publish:
                if not _PUBLISH.match(port):
                    bad(base + ("publish",), f"'{port}' must look like 5201/tcp or 11111/udp")
            if link.nat and link.parent:
                bad(base + ("nat",), "nat: true routes out of the host's NICs; it cannot also bridge a NIC (drop parent: or nat:)")
            if link.publish and not link.nat:
                bad(base + ("publish",), "publish: forwards ports from the host's NICs, which needs nat: true")
            continue
        if len(ends) != 2:
            bad(base + ("endpoints",), f"a {mode} link joins two endpoints; for one endpoint use mode: bridge, macvlan, ipvlan or phys")
            continue
        if link.parent:
            bad(base + ("parent",), f"parent: is for single-endpoint attachments, not mode: {mode}")
        if any(shares_host_stack(topology, n) for n in ends) and mode == "vxlan":
            bad(base + ("mode",), "a node sharing its host's stack cannot hold a vxlan end; give it its own stack")
        where = [node_host(topology, n) for n in ends]
        if mode == "ovs" and "ovs" not in (node_kind(topology, ends[0]), node_kind(topology, ends[1])):
            bad(base + ("mode",), "mode: ovs needs one endpoint on a kind: ovs node")
        if mode == "vxlan" and where[0] == where[1]:
            bad(base + ("mode",), f"a vxlan overlay joins nodes on different hosts; {ends[0]} and {ends[1]} are both on {where[0]} (use veth)")
        # Between two nodes that share their hosts' stacks, a veth is a cable between the hosts (a wire).
        cable = mode == "veth" and all(shares_host_stack(topology, n) for n in ends)
        if mode in ("veth", "ovs") and where[0] != where[1] and not cable:
            bad(
                base + ("endpoints",),
                f"{ends[0]} is on host {where[0]} and {ends[1]} on {where[1]}: a {mode} link cannot cross hosts; "
                "use mode: vxlan, or attach each node to its host's NIC (mode: macvlan/bridge with parent:)",
            )
    return problems


def _check_parent(topology, located, link, base, mode, parents) -> list[Problem]:
    problems = []
    node = link.endpoints[0].partition(":")[0]
    host, nic = parent_of(topology, link)
    declared = {tuple(ep.split(":", 1)) for w in topology.wires for ep in w.endpoints}
    path = base + ("parent",)
    if host is None:
        if mode == "bridge":
            problems.append(located.problem(path, "bridge mode on a real interface would re-plumb this machine's own network; use macvlan, ipvlan or phys"))
        elif not _ifname_ok(nic):
            problems.append(located.problem(path, f"'{nic}' is not an interface name"))
        return problems
    if host not in host_names(topology):
        problems.append(located.problem(path, f"host '{host}' is not declared under hosts: ({', '.join(host_names(topology))})"))
    elif host != node_host(topology, node):
        problems.append(located.problem(path, f"{node} runs on host {node_host(topology, node)}; its parent must be a NIC of that host, not of {host}"))
    elif topology.hosts and (host, nic) not in declared:
        known = ", ".join(f"{h}:{n}" for h, n in sorted(declared) if h == host) or "none"
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
    if key in parents and "phys" in (mode, parents[key][0]):
        problems.append(located.problem(path, f"NIC '{link.parent}' is moved into a node by mode: phys, so it can carry nothing else (also used at {'.'.join(map(str, parents[key][1]))})"))
    parents.setdefault(key, (mode, base))
    return problems


def _ifname_ok(name: str) -> bool:
    return 0 < len(name) <= IFNAMSIZ and bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name)) and name != "lo"

"""The management network's rules: what ``mgmt:`` and a node's ``mgmt-ipv4``/``mgmt-ipv6``/``network-mode``
may say (each problem at its line), before anything is made."""

from __future__ import annotations

import ipaddress
import socket
import struct

from ..names import mgmt_bridge
from ..registry import KINDS
from .errors import Problem
from .modes import node_kind
from .schema import Topology
from .schema.management import MgmtSpec
from .yamlsource import Located

NETWORK_MODES = ("none",)  # besides a node's own network (the default)
NOTED_MODES = ("host", "container:")  # read, noted: the node keeps a network of its own and has no management interface


def machine_routes() -> list[tuple[ipaddress.IPv4Network, str]]:
    """This machine's IPv4 routes but the default one, with their interfaces (``/proc/net/route``)."""
    found = []
    try:
        with open("/proc/net/route") as fh:
            next(fh)
            for line in fh:
                iface, dest, _gw, _flags, _refcnt, _use, _metric, mask, *_ = line.split()
                if int(mask, 16):
                    net = ipaddress.IPv4Network(
                        (socket.inet_ntoa(struct.pack("<I", int(dest, 16))), socket.inet_ntoa(struct.pack("<I", int(mask, 16))))
                    )
                    found.append((net, iface))
    except (OSError, ValueError, StopIteration):
        return []
    return found


def check(topology: Topology, located: Located) -> list[Problem]:
    """The nodes' network modes, ``mgmt:`` and the nodes' management addresses and interfaces."""
    problems = _check_network_modes(topology, located)
    spec = topology.mgmt
    if spec is None:
        return problems + _addresses_without_network(topology, located)
    try:
        v4 = ipaddress.IPv4Network(spec.ipv4_subnet)
    except ValueError as exc:
        return problems + [located.problem(("mgmt", "ipv4-subnet"), f"'{spec.ipv4_subnet}' is not an IPv4 network ({exc})")]
    try:
        v6 = ipaddress.IPv6Network(spec.ipv6_subnet)
    except ValueError as exc:
        return problems + [located.problem(("mgmt", "ipv6-subnet"), f"'{spec.ipv6_subnet}' is not an IPv6 network ({exc})")]
    gateway = ipaddress.IPv4Address(spec.ipv4_gw) if spec.ipv4_gw and _inside(spec.ipv4_gw, v4) else v4.network_address + 1
    return (
        problems
        + _check_network(spec, v4, v6, located)
        + _check_node_addresses(topology, located, v4, v6, gateway)
        + _capacity(topology, located, v4, gateway)
        + _check_eth0_links(topology, located)
    )


def _check_network_modes(topology: Topology, located: Located) -> list[Problem]:
    """A node's ``network-mode``: none, host or container:NODE."""
    problems: list[Problem] = []
    for name, spec in topology.topology.nodes.items():
        mode = spec.network_mode
        if mode is not None and mode not in NETWORK_MODES and not mode.startswith(NOTED_MODES):
            problems.append(
                located.problem(
                    ("topology", "nodes", name, "network-mode"),
                    f"network-mode: {mode} is not a network mode (none, host or container:NODE)",
                )
            )
    return problems


def _addresses_without_network(topology: Topology, located: Located) -> list[Problem]:
    """A node's ``mgmt-ipv4``/``mgmt-ipv6`` in a file without ``mgmt:``."""
    return [
        located.problem(("topology", "nodes", name, key), f"{key} needs a management network: add mgmt: to the file")
        for name, node in topology.topology.nodes.items()
        for key in ("mgmt-ipv4", "mgmt-ipv6")
        if getattr(node, key.replace("-", "_"))
    ]


def _check_network(spec: MgmtSpec, v4: ipaddress.IPv4Network, v6: ipaddress.IPv6Network, located: Located) -> list[Problem]:
    """``mgmt:`` itself: a subnet no route of this machine overlaps, gateways and range inside the subnets."""
    problems: list[Problem] = []
    bridge = spec.bridge or mgmt_bridge(spec.network)
    for net, iface in machine_routes():
        if iface != bridge and net.overlaps(v4):
            problems.append(
                located.problem(
                    ("mgmt", "ipv4-subnet"),
                    f"{v4} overlaps this machine's route to {net} (on {iface}): pick another ipv4-subnet",
                )
            )
            break
    for key, value, subnet in (("ipv4-gw", spec.ipv4_gw, v4), ("ipv6-gw", spec.ipv6_gw, v6)):
        if value is not None and not _inside(value, subnet):
            problems.append(located.problem(("mgmt", key), f"'{value}' is not an address of {subnet}"))
    if spec.ipv4_range is not None:
        try:
            if not ipaddress.IPv4Network(spec.ipv4_range).subnet_of(v4):
                problems.append(located.problem(("mgmt", "ipv4-range"), f"{spec.ipv4_range} is not inside {v4}"))
        except ValueError as exc:
            problems.append(located.problem(("mgmt", "ipv4-range"), f"'{spec.ipv4_range}' is not an IPv4 network ({exc})"))
    return problems


def _check_node_addresses(
    topology: Topology,
    located: Located,
    v4: ipaddress.IPv4Network,
    v6: ipaddress.IPv6Network,
    gateway: ipaddress.IPv4Address,
) -> list[Problem]:
    """A node's ``mgmt-ipv4``/``mgmt-ipv6``: on a node with a management interface, a host address of the subnet
    (not its gateway), held by one node."""
    problems: list[Problem] = []
    seen: dict[object, str] = {}
    for name, node in topology.topology.nodes.items():
        managed = not node.component_of and node.network_mode is None and not KINDS.get(node_kind(topology, name)).switch
        for key, value, subnet in (("mgmt-ipv4", node.mgmt_ipv4, v4), ("mgmt-ipv6", node.mgmt_ipv6, v6)):
            if value is None:
                continue
            path = ("topology", "nodes", name, key)
            if not managed:
                problems.append(
                    located.problem(path, f"{key}: node {name} has no management interface (a switch, or network-mode: none)")
                )
            elif not _inside(value, subnet):
                problems.append(
                    located.problem(path, f"{value} is not inside the management subnet {subnet} (mgmt: {key[5:]}-subnet)")
                )
            elif ipaddress.ip_address(value) in (subnet.network_address, gateway) or (
                subnet.version == 4 and ipaddress.ip_address(value) == subnet.broadcast_address
            ):
                problems.append(
                    located.problem(path, f"{value} is the management subnet's network, broadcast or gateway address")
                )
            elif ipaddress.ip_address(value) in seen:
                problems.append(located.problem(path, f"{value} is node {seen[ipaddress.ip_address(value)]}'s {key} already"))
            else:
                seen[ipaddress.ip_address(value)] = name
    return problems


def _check_eth0_links(topology: Topology, located: Located) -> list[Problem]:
    """A link's end on a managed node's eth0, which is the node's management interface."""
    nodes = topology.topology.nodes
    problems: list[Problem] = []
    for i, link in enumerate(topology.topology.links):
        for j, end in enumerate(link.endpoints):
            if (
                end.iface == "eth0"
                and end.node in nodes
                and nodes[end.node].network_mode is None
                and not nodes[end.node].component_of
            ):
                if not KINDS.get(node_kind(topology, end.node)).switch:
                    problems.append(
                        located.problem(
                            ("topology", "links", i, "endpoints", j),
                            f"eth0 is {end.node}'s management interface (mgmt:); name this one eth1 or later, "
                            "or give the node network-mode: none",
                        )
                    )
    return problems


def _capacity(topology: Topology, located: Located, v4: ipaddress.IPv4Network, gateway: ipaddress.IPv4Address) -> list[Problem]:
    """Whether the addresses the network hands out (its ``ipv4-range``, else its subnet) are enough for the lab's
    managed nodes, and which subnet would be (a 2 000-node lab on containerlab's default /24)."""
    spec = topology.mgmt
    assert spec is not None
    nodes = topology.topology.nodes
    managed = sum(
        1
        for name, node in nodes.items()
        if not node.component_of and node.network_mode is None and not KINDS.get(node_kind(topology, name)).switch
    )
    try:
        pool = ipaddress.IPv4Network(spec.ipv4_range) if spec.ipv4_range else v4
    except ValueError:
        return []  # reported above
    free = sum(1 for _ in pool.hosts()) - (gateway in pool) if pool.num_addresses <= 1 << 16 else 1 << 16
    if managed <= free:
        return []
    bits = 32 - max(2, (managed + 2).bit_length())  # room for every node, the gateway, network and broadcast
    key = "ipv4-range" if spec.ipv4_range else "ipv4-subnet"
    bigger = ipaddress.IPv4Network((pool.network_address, bits), strict=False)
    return [
        located.problem(
            ("mgmt", key),
            f"{key} {pool} has {free} addresses for nodes and the lab has {managed} nodes on the management network: "
            f"give {key}: {bigger} (or more), or network-mode: none to the nodes that need none",
        )
    ]


def notes(topology: Topology, located: Located) -> list[Problem]:
    """``network-mode: host`` and ``container:NODE``, as read: the node keeps a network namespace of its own."""
    return [
        located.problem(
            ("topology", "nodes", name, "network-mode"),
            f"network-mode: {spec.network_mode}: the node keeps a network namespace of its own, without a management interface",
        )
        for name, spec in topology.topology.nodes.items()
        if spec.network_mode and spec.network_mode.startswith(NOTED_MODES)
    ]


def _inside(value: str, subnet: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(value) in subnet
    except ValueError:
        return False

"""The management network's addresses: which node of which lab holds which address of a network.

Labs naming one network (``mgmt: {network: clab}``, containerlab's default) share its bridge and
subnet, so an address is leased, not planned alone.  Planning is handed the network's :class:`Leases`
as a value, read once by whoever starts it (``nestlab.lab.Lab``, from the store on this machine:
``backends/kernel/mgmtleases.py``, ``/run/nestlab-mgmt/NETWORK.json``): a lab keeps what it holds, new
nodes take the first free addresses of the range, fixed ``mgmt-ipv4:`` addresses are the node's.
Nothing here reads or writes a file; deploying writes the lab's leases under the network's lock and
refuses an address another lab took meanwhile.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import names
from ..errors import LabError
from ..model.credentials import IN_QUOTES, Login, text_problem
from ..registry import KINDS
from .objects import AttachObj, Plan

if TYPE_CHECKING:
    from ..model.schema import Topology
    from ..model.schema.management import MgmtSpec


@dataclass(frozen=True)
class Leases:
    """A management network's leases as they were when planning started: read them, do not change them."""

    network: str
    subnet: str = ""  # the subnet the network's labs use ("" while none holds an address)
    labs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # lab -> node -> its IPv4 address


def interfaces(plan: Plan) -> dict[str, AttachObj]:
    """Each node's management interface (its eth0 with the management address), by node: the attachments
    of mode mgmt that are not a port (``host_interface``, containerlab's ``mgmt-net:IF``)."""
    return {a.end.node: a for a in plan.attachments.values() if a.mode == "mgmt" and not a.option("host_interface")}


def login(topology: Topology, node: str, kind: str, source: str) -> Login:
    """Who logs in to ``node`` over SSH (``credentials:``): each key from the nearest of the node, its group, its
    ``kind``'s defaults and ``defaults``; an ``identity-file`` relative to the folder of ``source`` (the lab's file;
    for a lab of no file, the working folder)."""
    body = topology.topology
    spec = body.nodes[node]
    group = body.groups.get(spec.group or "")
    kinds = next((given for word, given in body.kinds.items() if KINDS.canonical(word) == kind), None)
    layers = [("node", spec), ("node", group), ("kind", kinds), ("defaults", body.defaults)]
    given = [(where, layer.credentials) for where, layer in layers if layer is not None and layer.credentials is not None]
    username, password, identity = (next((v for _, c in given if (v := getattr(c, key)) is not None), None) for key in _KEYS)
    if identity:
        base = os.path.dirname(os.path.abspath(source)) if os.path.exists(source) else os.getcwd()
        identity = os.path.join(base, os.path.expanduser(identity))
        if problem := text_problem(identity, f"node {node}'s identity-file, as a path ({identity!r}),", IN_QUOTES):
            raise LabError(f"{problem}: it would break the lab's ssh config; deploy from a folder whose path has none")
    said = next((where for where, c in given if c.username or c.password), None)
    return Login(username, password, identity, said)


_KEYS = ("username", "password", "identity_file")


@dataclass(frozen=True)
class Network:
    """A management network as a lab's file sets it, parsed."""

    name: str
    bridge: str
    ipv4: ipaddress.IPv4Network
    ipv6: ipaddress.IPv6Network
    gw4: ipaddress.IPv4Address
    gw6: ipaddress.IPv6Address
    range4: ipaddress.IPv4Network
    mtu: int
    external: bool

    @classmethod
    def of(cls, spec: MgmtSpec) -> Network:
        """From the topology's ``mgmt:`` (checked by the model)."""
        v4, v6 = ipaddress.IPv4Network(spec.ipv4_subnet), ipaddress.IPv6Network(spec.ipv6_subnet)
        return cls(
            spec.network,
            spec.bridge or names.mgmt_bridge(spec.network),
            v4,
            v6,
            ipaddress.IPv4Address(spec.ipv4_gw) if spec.ipv4_gw else v4.network_address + 1,
            ipaddress.IPv6Address(spec.ipv6_gw) if spec.ipv6_gw else v6.network_address + 1,
            ipaddress.IPv4Network(spec.ipv4_range) if spec.ipv4_range else v4,
            spec.mtu,
            spec.external_access,
        )

    def v6_for(self, v4: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
        """The IPv6 address that goes with ``v4``: the same host number (172.20.20.3 -> 3fff:172:20:20::3)."""
        return self.ipv6.network_address + (int(v4) - int(self.ipv4.network_address))


def in_use(leases: Leases, lab: str) -> tuple[str, list[str]] | None:
    """The subnet a network has while other labs hold addresses on it, and those labs (None: free)."""
    others = sorted(other for other in leases.labs if other != lab)
    return (leases.subnet, others) if others and leases.subnet else None


def choose(net: Network, lab: str, nodes: list[str], fixed: dict[str, str], leases: Leases) -> dict[str, ipaddress.IPv4Address]:
    """Each node's IPv4 address: its fixed one, else what the lab holds in ``leases``, else the first free one of the range."""
    others = {ipaddress.IPv4Address(a) for other, held in leases.labs.items() if other != lab for a in held.values()}
    taken = others | {ipaddress.IPv4Address(a) for a in fixed.values()} | {net.gw4}
    mine = leases.labs.get(lab, {})
    out: dict[str, ipaddress.IPv4Address] = {}
    for node in nodes:
        if node in fixed:
            out[node] = ipaddress.IPv4Address(fixed[node])
        elif node in mine and ipaddress.IPv4Address(mine[node]) not in taken:
            out[node] = ipaddress.IPv4Address(mine[node])
            taken.add(out[node])
    free = (a for a in net.range4.hosts() if a not in taken and a in net.ipv4)
    for node in nodes:
        if node not in out:
            address = next(free, None)
            if address is None:
                raise LabError(f"management network {net.name} ({net.ipv4}) has no free address left for node {node}")
            out[node] = address
    return out

"""A lab partitioned, a share per server: a topology each server deploys with nestlab itself.

Each share holds the server's nodes (with their components), every link whose ends are both
there, with the addresses the whole lab's plan gave them (so no server picks its own), and:

* per link cut between two servers, a ``vxlan-remote`` end on each side, to the other server's
  underlay address, on a VNI of its own from the lab's range, with each side's shaping;
* per switch whose ports sit on several servers, a copy of the switch on each of them, joined to
  the switch's own server by a ``vxlan-remote`` port (a star: no loops).

Links and ports that cross servers lose 50 bytes of MTU to the VXLAN headers; so do all ports of a
switch that spans servers, so no frame fits one port and not the next.

The management network (``mgmt:``) is one segment: each share makes its nodes' eth0 with the addresses
the whole lab's plan leased them, on its server's management bridge, and where nodes sit on several
servers those bridges are joined in a star by a switch ``nestlab-mgmt`` on each (a port on the bridge,
``vxlan-remote`` ports between servers).  The first server's bridge keeps the network's gateway
addresses; every other server's takes the highest free address of the subnet, so no address is on the
segment twice and each server's own nodes leave through its NAT.
"""

from __future__ import annotations

import copy
import ipaddress
import itertools
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from ..model import ipv6
from ..names import IFNAMSIZ
from .mgmt import Network, interfaces
from .objects import AttachObj, EndObj, LinkObj, Pairs, Plan
from .placement import Placement

if TYPE_CHECKING:
    from ..model.schema.management import MgmtSpec

VXLAN_HEADERS = 50
MGMT_STITCH = "nestlab-mgmt"  # on each server holding managed nodes of a lab whose nodes sit on several
_LOCAL_MODES = {"veth", "ovs", "machine-veth"}  # modes a share can hold as they are (the rest need emulated hosts)


@dataclass
class Partition:
    """A lab cut into shares: where each node went, what each share deploys, and the MTU of the links and ports
    that cross servers."""

    placement: Placement
    shares: dict[str, Share]
    mtu: int


@dataclass
class Share:
    server: str
    topology: dict[str, Any]
    stitched: list[str] = field(default_factory=list)  # what this share tunnels, for the report


def partition(
    raw: dict[str, Any],
    plan: Plan,
    placed: Placement,
    underlay: dict[str, str],
    port: int,
    vni: int,
    mtu: int,
    mgmt: MgmtSpec | None = None,
) -> Partition:
    """The lab ``raw`` (its checked topology as data) planned as ``plan`` and placed as ``placed``, cut into a
    share per server; ``mgmt``: its management network (the topology's ``mgmt:``), if any."""
    if raw.get("schedule") or raw.get("dynamics") or raw.get("wires"):
        raise LabError("schedule:, dynamics: and wires: are not split across servers yet; deploy this lab on one machine")
    servers = sorted(set(placed.server_of.values()) | set(underlay))
    nodes = raw["topology"]["nodes"]
    out = {s: Share(s, _frame(raw)) for s in servers}
    _place_nodes(out, nodes, placed)
    fits = mtu - VXLAN_HEADERS
    next_vni = itertools.count(vni)
    _stitch_switches(out, nodes, placed, lambda: next(next_vni), underlay, port, fits)
    _share_links(out, plan, placed, lambda: next(next_vni), underlay, port, fits)
    for att in plan.attachments.values():
        if att.mode != "mgmt" or att.option("host_interface"):  # eth0 on the management network: each share's own
            out[placed.server(att.end.node)].topology["topology"]["links"].append(_attachment(att))
    if mgmt is not None:
        _management(raw, plan, placed, out, Network.of(mgmt), lambda: next(next_vni), underlay, port, fits)
    return Partition(placed, out, fits)


def _place_nodes(out: dict[str, Share], nodes: dict[str, Any], placed: Placement) -> None:
    """Each node in its server's share; a node waiting for another on a server of its own is refused."""
    for name, spec in nodes.items():
        out[placed.server(name)].topology["topology"]["nodes"][name] = _without_server(spec)
        for stage, wanted in (spec.get("stages") or {}).items():
            for wait in wanted.get("wait_for") or []:
                if placed.server(wait["node"]) != placed.server(name):
                    raise LabError(
                        f"node {name} waits for {wait['node']} ({stage}), which runs on another server; "
                        "pin both to one server with server:"
                    )


def _stitch_switches(
    out: dict[str, Share],
    nodes: dict[str, Any],
    placed: Placement,
    vni: Callable[[], int],
    underlay: dict[str, str],
    port: int,
    fits: int,
) -> None:
    """A switch with ports on several servers: a copy in each share, joined to its home's by a VXLAN port."""
    for switch, others in sorted(placed.spans.items()):
        home = placed.server(switch)
        for other in others:
            out[other].topology["topology"]["nodes"][switch] = _without_server(nodes[switch])
            ident = vni()
            port_name = f"st{ident}"[:IFNAMSIZ]
            for here, there in ((home, other), (other, home)):
                out[here].topology["topology"]["links"].append(
                    _half(EndObj(switch, port_name), underlay[there], ident, port, fits, ())
                )
                out[here].stitched.append(f"{switch}:{port_name} -> {there} (vni {ident})")


def _share_links(
    out: dict[str, Share], plan: Plan, placed: Placement, vni: Callable[[], int], underlay: dict[str, str], port: int, fits: int
) -> None:
    """Each link in the share holding its ends; a link cut between servers as a VXLAN half in each of theirs.
    A link to a switch that spans servers fits the stitched MTU too."""
    narrow = set(placed.spans)  # switches whose every port must fit the stitched MTU
    cut = {frozenset(pair) for pair in placed.cut}
    for link in plan.links.values():
        if link.mode not in _LOCAL_MODES:
            raise LabError(f"link {link.a.ref} - {link.b.ref}: mode {link.mode} is not split across servers yet; use veth links")
        if frozenset((link.a.ref, link.b.ref)) in cut:
            ident = vni()
            for end, shape, other in ((link.a, link.shape_a, link.b), (link.b, link.shape_b, link.a)):
                there = placed.server(other.node)
                half = _half(end, underlay[there], ident, port, min(link.mtu or fits, fits), shape)
                out[placed.server(end.node)].topology["topology"]["links"].append(half)
                out[placed.server(end.node)].stitched.append(f"{end.ref} -> {there}:{other.ref} (vni {ident})")
            continue
        narrowed = fits if {link.a.node, link.b.node} & narrow else None
        out[_holder(link, placed)].topology["topology"]["links"].append(_link(link, narrowed))


def _management(
    raw: dict[str, Any],
    plan: Plan,
    placed: Placement,
    out: dict[str, Share],
    net: Network,
    vni: Callable[[], int],
    underlay: dict[str, str],
    port: int,
    fits: int,
) -> None:
    """The management network on every share (see the module's text): fixed addresses, a gateway per
    server, and the star of switches joining the servers' bridges."""
    eth0 = {node: att.end for node, att in interfaces(plan).items()}
    holding = sorted({placed.server(node) for node in eth0}) or sorted(out)[:1]
    if MGMT_STITCH in raw["topology"]["nodes"]:
        raise LabError(f"node name {MGMT_STITCH} is nestlab's own on a lab split across servers; rename the node")
    for node, end in eth0.items():
        spec = out[placed.server(node)].topology["topology"]["nodes"][node]
        spec["mgmt_ipv4"], spec["mgmt_ipv6"] = end.ipv4[0].split("/")[0], end.ipv6[0].split("/")[0]
    taken = {ipaddress.IPv4Interface(end.ipv4[0]).ip for end in eth0.values()} | {net.gw4}
    free = (a for a in _downward(net.ipv4) if a not in taken)
    joined = len(holding) > 1
    for server in out:
        mine = {**raw["mgmt"], "mtu": min(net.mtu, fits) if joined else net.mtu}
        if server != holding[0]:  # the hub keeps the network's gateways
            gw4 = next(free, None)
            if gw4 is None:
                raise LabError(f"management network {net.name} ({net.ipv4}) has no address left for server {server}'s gateway")
            mine |= {"ipv4_gw": str(gw4), "ipv6_gw": str(net.v6_for(gw4))}
        out[server].topology["mgmt"] = mine
    if not joined:
        return
    bridge_port = f"ms{zlib.crc32(raw['name'].encode()):08x}"  # the switch's port on the server's bridge
    for server in holding:
        share = out[server].topology["topology"]
        share["nodes"][MGMT_STITCH] = {"kind": "bridge"}
        share["links"].append({"endpoints": [f"{MGMT_STITCH}:mgmt"], "mode": "mgmt", "host_interface": bridge_port})
    hub = holding[0]
    for other in holding[1:]:
        ident = vni()
        end = EndObj(MGMT_STITCH, f"st{ident}"[:IFNAMSIZ])
        for here, there in ((hub, other), (other, hub)):
            out[here].topology["topology"]["links"].append(_half(end, underlay[there], ident, port, fits, ()))
            out[here].stitched.append(f"management network -> {there} (vni {ident})")


def _downward(subnet: ipaddress.IPv4Network) -> Iterator[ipaddress.IPv4Address]:
    """The subnet's host addresses, highest first."""
    last, first = int(subnet.broadcast_address) - 1, int(subnet.network_address) + 1
    return (ipaddress.IPv4Address(n) for n in range(last, first - 1, -1))


def _holder(link: LinkObj, placed: Placement) -> str:
    """The server a link that is not cut lives on: its ends', or, for a port of a switch copied onto
    another server, that server's (where the copy is)."""
    sa, sb = placed.server(link.a.node), placed.server(link.b.node)
    if sa == sb:
        return sa
    return sb if sb in placed.spans.get(link.a.node, ()) else sa


def _frame(raw: dict[str, Any]) -> dict[str, Any]:
    """A share's top level: the lab's, without servers or checks, with addresses fixed by the whole lab's plan and its hosts'
    IPv6 as the whole lab's."""
    body = {k: v for k, v in raw["topology"].items() if k not in ("nodes", "links")}
    # mgmt: _management; checks: the whole lab's (`nestlab check` runs them where the lab is looked at from)
    skipped = ("servers", "stitch", "topology", "schedule", "dynamics", "wires", "hosts", "mgmt", "checks")
    top = {k: v for k, v in raw.items() if k not in skipped}
    return copy.deepcopy({**top, "ipv4_pool": None, "ipv6": ipv6.resolve(raw), "topology": {**body, "nodes": {}, "links": []}})


def _without_server(spec: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy({k: v for k, v in spec.items() if k != "server"})


def _addresses(ends: tuple[EndObj, ...]) -> dict[str, Any]:
    out: dict[str, list[str | None]] = {}
    for family in ("ipv4", "ipv6"):
        values = [getattr(end, family) for end in ends]
        if any(len(v) > 1 for v in values):
            raise LabError(f"{ends[0].ref}: several {family} addresses on one end are not split across servers yet")
        out[family] = [v[0] if v else None for v in values]
    return out


def _link(link: LinkObj, narrowed: int | None) -> dict[str, Any]:
    params: dict[str, Any] | None = {"a": dict(link.shape_a), "b": dict(link.shape_b)} if link.shape_a or link.shape_b else None
    if link.state:
        params = {**(params or {}), "state": link.state}
    out = {"endpoints": [link.a.ref, link.b.ref], "mode": link.mode, **_addresses(link.ends), **dict(link.options)}
    mtu = min(x for x in (link.mtu, narrowed) if x) if (link.mtu or narrowed) else None
    if mtu:
        out["mtu"] = mtu
    if params:
        out["params"] = params
    if link.a.mac or link.b.mac:
        out["macs"] = [link.a.mac, link.b.mac]
    return out


def _half(end: EndObj, remote: str, ident: int, port: int, mtu: int, shape: Pairs) -> dict[str, Any]:
    out = {
        "endpoints": [end.ref],
        "mode": "vxlan-remote",
        "remote": remote,
        "vni": ident,
        "port": port,
        "mtu": mtu,
        **_addresses((end,)),
    }
    if shape:
        out["params"] = dict(shape)
    return out


def _attachment(att: AttachObj) -> dict[str, Any]:
    if att.mode == "mgmt":  # a port on the management bridge (mgmt-net:IF)
        return {"endpoints": [att.end.ref], "mode": "mgmt", "host_interface": att.text("host_interface")}
    if att.mode not in _LOCAL_MODES | {"vxlan-remote"} or att.host is not None:
        raise LabError(f"{att.end.ref}: mode {att.mode} is not split across servers yet")
    out = {"endpoints": [att.end.ref], "mode": att.mode, **_addresses((att.end,)), **dict(att.options)}
    if att.mtu:
        out["mtu"] = att.mtu
    if att.shape:
        out["params"] = dict(att.shape)
    return out

"""mgmt: every node's management interface (eth0) on its management network's bridge on this machine.

``mgmt:`` (on for containerlab files, as containerlab) gives each node that has a network of its own
an eth0 here, with its leased address and a default route to the bridge's gateway address
(docs/management.md).  The bridge is the network's, shared by every lab that names it; the veth's end
on this machine is ``mg`` and a digest of lab and node, with the lab's marker.  A link written with
``host_interface`` (containerlab's ``mgmt-net:IF``) is a plain port: another interface of the node on
the same bridge, its end here named IF, no address; its endpoint's ``mac:`` is the node end's MAC (as
containerlab gives it; the end here gets the kernel's).
"""

from __future__ import annotations

import ipaddress
import zlib
from typing import TYPE_CHECKING, Any

from ..errors import LabError
from ..model.errors import Problem, TopologyError
from ..names import IFNAMSIZ, is_ifname
from ..plan import mgmt
from ..plan.objects import AttachObj, EndObj, LinkObj
from ..registry import KINDS
from .base import LinkMode, Stage, into_switches, register, up_and_address

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plugins import Applying, Checking, Planning

IFACE = "eth0"


def host_end(lab: str, node: str) -> str:
    """The veth's end on this machine, stable per lab and node."""
    return f"mg{zlib.crc32(f'{lab}/{node}'.encode()):08x}"


def is_host_end(name: str) -> bool:
    return len(name) == 10 and name.startswith("mg") and all(c in "0123456789abcdef" for c in name[2:])


def managed(b: Planning) -> list[str]:
    """The nodes that get a management interface: every node with a network of its own, but switches,
    components and ``network-mode: none``."""
    specs = b.t.topology.nodes
    return [
        name
        for name, obj in b.plan.nodes.items()
        if name in specs
        and not obj.parent
        and not obj.shares
        and not KINDS.get(obj.kind).switch
        and not KINDS.get(obj.kind).machine
        and specs[name].network_mode is None
    ]


class Mgmt(LinkMode):
    name = "mgmt"
    summary = "a node's management interface eth0 on its management network's bridge (made by mgmt:, never written)"
    ends = 1
    real_host = True
    takes_macs = True  # a port's node end (containerlab's mgmt-net endpoint mac:)
    stage = Stage.ATTACH
    options = {
        "host_interface": (
            str | None,
            {"default": None, "description": "machine-veth, mgmt: the name of the veth's end on the machine"},
        )
    }

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        if not link.host_interface:
            return [
                ctx.problem(
                    path + ("mode",),
                    "mode: mgmt is made by mgmt: for every node; a link of it is a port with host_interface: NAME "
                    "(containerlab's mgmt-net:NAME)",
                )
            ]
        if not is_ifname(link.host_interface):
            return [
                ctx.problem(
                    path + ("host_interface",),
                    f"'{link.host_interface}' is not an interface name (1-{IFNAMSIZ} letters, digits, '.', '-', '_')",
                )
            ]
        return []

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """A port takes no address: nothing to join."""

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> AttachObj:
        if b.t.mgmt is None:
            b.fail(f"{ends[0].ref}: a port on the management network (mgmt-net:) needs the management network: give mgmt:")
        options = (*_options(mgmt.Network.of(b.t.mgmt)), ("host_interface", link.host_interface))
        return AttachObj(
            EndObj(ends[0].node, ends[0].iface, mac=ends[0].mac), self.name, None, None, tuple(sorted(options)), link.mtu
        )

    def machine_root(self, obj: LinkObj | AttachObj) -> str | None:
        """None: rootless, the bridge stands in the user's own network namespace (the holder's), the lab's machine."""
        return None

    def label(self, att: AttachObj) -> str:
        return f"mgmt:{att.text('network')}"

    def finish(self, b: Planning) -> None:
        if b.t.mgmt is None:
            return
        net = mgmt.Network.of(b.t.mgmt)
        leases = b.leases
        if leases is None or leases.network != net.name:  # read where the lab is handed out to be made (engine/handout.py)
            raise LabError(
                f"lab {b.t.name}: planning is not handed the leases of its management network {net.name}: a lab with mgmt: "
                "is planned where it is made (its deploy, or `nestlab validate`)"
            )
        held = mgmt.in_use(leases, b.t.name)
        if held and held[0] != str(net.ipv4):
            raise TopologyError(
                b.source,
                [
                    Problem(
                        ("mgmt",),
                        f"management network {net.name} is {held[0]} while lab {', '.join(held[1])} uses it, not {net.ipv4}: "
                        f"give ipv4-subnet: {held[0]}, or another network:",
                    )
                ],
            )
        nodes = managed(b)
        specs = b.t.topology.nodes
        fixed = {n: str(specs[n].mgmt_ipv4) for n in nodes if specs[n].mgmt_ipv4}
        chosen = mgmt.choose(net, b.t.name, nodes, fixed, leases)
        options = _options(net)
        for node in nodes:
            v4 = chosen[node]
            v6 = ipaddress.IPv6Address(specs[node].mgmt_ipv6) if specs[node].mgmt_ipv6 else net.v6_for(v4)
            end = EndObj(node, IFACE, (f"{v4}/{net.ipv4.prefixlen}",), (f"{v6}/{net.ipv6.prefixlen}",))
            b.plan.add(AttachObj(end, self.name, None, None, options, net.mtu, gateway=str(net.gw4)))

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import mgmtleases, mgmtnet, netlink

        for network in sorted({att.text("network") for att in objs}):
            mine = [att for att in objs if att.text("network") == network]
            first = mine[0]
            subnet = ipaddress.IPv4Network(first.text("subnet"))
            ports = [att for att in mine if att.option("host_interface")]
            mine = [att for att in mine if not att.option("host_interface")]
            number = {
                att.end.node: int(ipaddress.IPv4Interface(att.end.ipv4[0]).ip) - int(subnet.network_address) for att in mine
            }
            with mgmtleases.locked(network):
                bridge = mgmtleases.bridge_of(network, first.text("bridge"))
                mgmtleases.lease(
                    network, bridge, ap.lab, {att.end.node: att.end.ipv4[0].split("/")[0] for att in mine}, str(subnet)
                )
                gateways = (first.text("gateway4"), first.text("gateway6"))
                index = {
                    bridge: mgmtnet.ensure(network, bridge, gateways, first.number("mtu"), str(subnet), first.flag("external"))
                }
                for name in sorted({mgmtnet.bridge_for(bridge, n) for n in number.values()} - {bridge}):
                    index[name] = mgmtnet.child(network, bridge, name, first.number("mtu"))
            for att in mine:
                ap.queue(
                    None,
                    netlink.new_veth(
                        host_end(ap.lab, att.end.node),
                        att.end.iface,
                        ap.fd(att.end.node),
                        alias=ap.alias,
                        mtu=att.mtu,
                        master=index[mgmtnet.bridge_for(bridge, number[att.end.node])],
                        group=mgmtnet.GROUP,
                    ),
                    # the kernel keeps no alias given at birth; a bridge port needs no IPv6 address (its DAD and MLD
                    # reports would be flooded to every other port)
                    netlink.set_up(host_end(ap.lab, att.end.node), alias=ap.alias, link_local=False),
                )
                made.append(att)
            for att in ports:
                ap.queue(
                    None,
                    netlink.new_veth(
                        att.text("host_interface"),
                        att.end.iface,
                        ap.fd(att.end.node),
                        alias=ap.alias,
                        mtu=att.mtu,
                        master=index[bridge],
                        macs=(None, att.end.mac),
                    ),
                    netlink.set_up(att.text("host_interface"), alias=ap.alias),
                )
                made.append(att)
        ap.flush()
        into_switches(ap, [att.end for att in objs if att.option("host_interface")])  # a switch's port on the bridge
        up_and_address(ap, [att.end for att in objs], {att.end.node: att.gateway for att in objs if att.gateway}, nodad=True)


def _options(net: Any) -> tuple[tuple[str, str | int | bool], ...]:
    """What creating a network's attachment needs of it (its bridge, gateways, MTU, name, subnet)."""
    return (
        ("bridge", net.bridge),
        ("external", net.external),
        ("gateway4", f"{net.gw4}/{net.ipv4.prefixlen}"),
        ("gateway6", f"{net.gw6}/{net.ipv6.prefixlen}"),
        ("mtu", net.mtu),
        ("network", net.name),
        ("subnet", str(net.ipv4)),
    )


register(Mgmt())

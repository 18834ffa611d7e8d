"""vlan: an 802.1Q (or QinQ 802.1ad) sub-interface, on a host NIC or on an interface of the node itself.

``parent: HOST:NIC`` puts the node on that VLAN of the host's wire (tagged frames leave the NIC);
``parent: NODE:IF`` tags traffic on one of the node's own interfaces (a router on a stick).
Endpoints with the same ``vlan_id`` and protocol on one layer-2 segment share a subnet.

Example::

    links:
      - endpoints: ["r1:eth1.10"]
        mode: vlan
        parent: r1:eth1
        vlan_id: 10
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Literal

from .base import KernelFeature, SubInterface, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.objects import AttachObj, Options
    from ..plugins import Applying, Checking, Planning

IFLA_VLAN_ID, IFLA_VLAN_PROTOCOL = 1, 5
PROTOCOLS = {"802.1Q": 0x8100, "802.1ad": 0x88A8}


class Vlan(SubInterface):
    name = "vlan"
    summary = "an 802.1Q sub-interface (vlan_id:, vlan_protocol: 802.1ad for QinQ) of a host NIC or of the node's own interface"
    options = {
        "vlan_id": (int | None, {"default": None, "ge": 1, "le": 4094, "description": "vlan: the VLAN id, 1..4094"}),
        "vlan_protocol": (
            Literal["802.1Q", "802.1ad"] | None,
            {"default": None, "description": "vlan: 802.1Q (default) or 802.1ad (QinQ)"},
        ),
    }
    features = {"vlan": KernelFeature("CONFIG_VLAN_8021Q", {"kind": "vlan", "vlan_id": 10, "link": "parent"})}

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        if link.vlan_id is None:
            return [ctx.problem(path + ("mode",), "mode: vlan needs vlan_id: (1..4094)")]
        return []

    def check_parent(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem] | None:
        owner, iface = ctx.parent_of(link)
        if owner not in ctx.topology.topology.nodes:
            return None  # a host NIC: the usual rules
        node = link.endpoints[0].node
        if owner != node:
            return [
                ctx.problem(
                    path + ("parent",),
                    f"a vlan on a node's interface stays in that node: give {node} one of its own interfaces (parent: {node}:IF)",
                )
            ]
        if f"{node}:{iface}" not in {ep for ln in ctx.topology.topology.links for ep in ln.endpoints}:
            return [
                ctx.problem(
                    path + ("parent",), f"{node} has no interface {iface}; a vlan sits on an interface of one of the node's links"
                )
            ]
        return []

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """Same VLAN on the same segment: one subnet (joined once every untagged segment is complete)."""
        host, parent = b.attach_point(link)
        vlan = (link.vlan_id, link.vlan_protocol or "802.1Q")
        b.later(lambda: b.seg.join(keys[0], ("vlan", *vlan, b.seg.find((host, parent)))))

    def plan_options(self, link: LinkSpec) -> Options:
        return (("id", link.vlan_id), ("protocol", link.vlan_protocol or "802.1Q"))

    def request(self, ap: Applying, att: AttachObj, parent_index: int) -> Request:
        from ..backends.kernel import netlink

        data = netlink.attr(IFLA_VLAN_ID, struct.pack("=H", att.number("id")))
        data += netlink.attr(IFLA_VLAN_PROTOCOL, struct.pack("!H", PROTOCOLS[att.text("protocol")]))
        return netlink.sublink(
            self.name, att.end.iface, data, alias=ap.alias, parent=parent_index, ns_fd=ap.fd(att.end.node), mtu=att.mtu
        )


register(Vlan())

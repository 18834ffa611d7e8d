"""ipvlan: a node's interface shares a host NIC's MAC address (L2, or routed L3/L3S; seed 002).

In L3 modes the containers answer no ARP, so other hosts on the wire route to them via their host.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from .base import KernelFeature, SubInterface, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.schema.links import LinkSpec
    from ..plan.objects import AttachObj, Options
    from ..plugins import Applying, Planning

IFLA_IPVLAN_MODE, IFLA_IPVLAN_FLAGS = 1, 2
MODES = {"l2": 0, "l3": 1, "l3s": 2}
FLAGS = {"bridge": 0, "private": 1, "vepa": 2}


class Ipvlan(SubInterface):
    name = "ipvlan"
    summary = "an ipvlan sub-interface of a host NIC (parent:), ipvlan_mode l2/l3/l3s, ipvlan_flag bridge/private/vepa"
    options = {
        "ipvlan_mode": (Literal["l2", "l3", "l3s"] | None, {"default": None}),
        "ipvlan_flag": (Literal["bridge", "private", "vepa"] | None, {"default": None}),
    }
    features = {"ipvlan": KernelFeature("CONFIG_IPVLAN", {"kind": "ipvlan", "ipvlan_mode": 0, "link": "parent"})}

    def plan_options(self, link: LinkSpec) -> Options:
        return (("flag", link.ipvlan_flag or "bridge"), ("mode", link.ipvlan_mode or "l2"))

    def request(self, ap: Applying, att: AttachObj, parent_index: int) -> Request:
        from ..backends.kernel import netlink

        data = netlink.attr(IFLA_IPVLAN_MODE, struct.pack("=H", MODES[att.text("mode")])) + netlink.attr(
            IFLA_IPVLAN_FLAGS, struct.pack("=H", FLAGS[att.text("flag")])
        )
        return netlink.sublink(
            self.name, att.end.iface, data, alias=ap.alias, parent=parent_index, ns_fd=ap.fd(att.end.node), mtu=att.mtu
        )

    def finish(self, b: Planning) -> None:
        """Other hosts on an L3 container's wire get a /32 route to it via its host's NIC."""
        routes: dict[str, list[tuple[str, str]]] = {}
        for subnet, owners in b.host_addresses().items():
            for att in b.plan.attachments.values():
                if (
                    att.mode != self.name
                    or att.option("mode") == "l2"
                    or att.host is None
                    or att.host not in owners
                    or att.parent is None
                ):
                    continue
                nic = b.nic_address(att.host, att.parent)
                if nic is None or ipaddress.IPv4Address(nic) not in subnet:
                    continue
                for other in owners:
                    if other != att.host:
                        routes.setdefault(other, []).extend((f"{a.split('/')[0]}/32", nic) for a in att.end.ipv4)
        for host, entries in routes.items():
            b.plan.nodes[host] = replace(b.plan.nodes[host], routes=tuple(entries))


register(Ipvlan())

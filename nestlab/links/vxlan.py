"""vxlan: a point-to-point VXLAN overlay between nodes on two hosts (seed 002's overlay networks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import KernelFeature, register
from .overlay import Overlay

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.schema.links import LinkSpec
    from ..plan.objects import LinkObj, Options
    from ..plugins import Applying


class Vxlan(Overlay):
    name = "vxlan"
    summary = "a VXLAN overlay between nodes on two hosts (vni:, port: default 4789)"
    overhead = 50  # outer Ethernet + IPv4 + UDP + VXLAN headers
    options = {
        "vni": (
            int | None,
            {
                "default": None,
                "ge": 1,
                "le": 16777215,
                "description": "vxlan/geneve: the network identifier (default: one per link)",
            },
        ),
        "port": (
            int | None,
            {"default": None, "ge": 1, "le": 65535, "description": "vxlan/geneve: UDP port (default 4789/6081)"},
        ),
    }
    features = {"vxlan": KernelFeature("CONFIG_VXLAN", {"kind": "vxlan", "vxlan_id": 42})}

    def plan_options(self, link: LinkSpec) -> Options:
        return (("port", link.port or 4789),)

    def request(self, ap: Applying, link: LinkObj, side: int) -> Request:
        """A point-to-point VXLAN device born in the node; its UDP socket stays in the host's namespace."""
        from ..backends.kernel import netlink

        end, (_host, local, remote) = link.ends[side], link.underlay[side]
        data = netlink.vxlan_data(link.number("vni"), remote, link.number("port"), local)
        return netlink.sublink(self.name, end.iface, data, alias=ap.alias, ns_fd=ap.fd(end.node), mtu=link.mtu)


register(Vxlan())

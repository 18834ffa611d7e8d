"""geneve: a point-to-point Geneve overlay between nodes on two hosts (RFC 8926; OVN's and NSX's encapsulation)."""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING

from .base import KernelFeature, register
from .overlay import Overlay
from .vxlan import Vxlan

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.schema.links import LinkSpec
    from ..plan.objects import LinkObj, Options
    from ..plugins import Applying

IFLA_GENEVE_ID, IFLA_GENEVE_REMOTE, IFLA_GENEVE_PORT = 1, 2, 5


class Geneve(Overlay):
    name = "geneve"
    summary = "a Geneve overlay between nodes on two hosts (vni:, port: default 6081)"
    overhead = 50  # outer Ethernet + IPv4 + UDP + Geneve headers (no options)
    options = Vxlan.options
    features = {"geneve": KernelFeature("CONFIG_GENEVE", {"kind": "geneve", "geneve_id": 42, "geneve_remote": "10.255.0.2"})}

    def plan_options(self, link: LinkSpec) -> Options:
        return (("port", link.port or 6081),)

    def request(self, ap: Applying, link: LinkObj, side: int) -> Request:
        """A Geneve device born in the node; its UDP socket stays in the host's namespace (Geneve names no local address)."""
        from ..backends.kernel import netlink

        end, (_host, _local, remote) = link.ends[side], link.underlay[side]
        data = (
            netlink.u32_attr(IFLA_GENEVE_ID, link.number("vni"))
            + netlink.attr(IFLA_GENEVE_REMOTE, socket.inet_aton(remote))
            + netlink.attr(IFLA_GENEVE_PORT, struct.pack("!H", link.number("port")))
        )
        return netlink.sublink(self.name, end.iface, data, alias=ap.alias, ns_fd=ap.fd(end.node), mtu=link.mtu)


register(Geneve())

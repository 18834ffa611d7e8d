"""gretap and gre: point-to-point GRE overlays between nodes on two hosts, Ethernet (gretap) or IP (gre).

A GRE device keeps the namespace it was made in for its outer packets (x-netns tunnels), so each
end is made in its host's namespace under a scratch name and then moved into its node.  Every
link carries a GRE key of its own, so several tunnels can join the same two hosts.
"""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING, Any

from .base import KernelFeature, register, up_and_address
from .overlay import Overlay, scratch_name

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..plan.diff import Changes
    from ..plan.objects import AttachObj, LinkObj
    from ..plugins import Applying

IFLA_GRE_IFLAGS, IFLA_GRE_OFLAGS, IFLA_GRE_IKEY, IFLA_GRE_OKEY, IFLA_GRE_LOCAL, IFLA_GRE_REMOTE = 2, 3, 4, 5, 6, 7
GRE_KEY = 0x2000


class Gretap(Overlay):
    name = "gretap"
    summary = "an Ethernet-over-GRE overlay between nodes on two hosts (gre_key:)"
    overhead = 42  # outer IPv4 + GRE with key + inner Ethernet
    id_key = "gre_key"
    options = {
        "gre_key": (
            int | None,
            {"default": None, "ge": 1, "le": 4294967295, "description": "gre/gretap: the GRE key (default: one per link)"},
        )
    }
    features = {
        "gretap": KernelFeature("CONFIG_NET_IPGRE", {"kind": "gretap", "gre_local": "10.255.0.1", "gre_remote": "10.255.0.2"})
    }

    def request(self, ap: Applying, link: LinkObj, side: int) -> Request:
        """The end's device, made in its host's namespace under a scratch name, keyed both ways."""
        from ..backends.kernel import netlink

        _host, local, remote = link.underlay[side]
        key = struct.pack("!I", link.number("gre_key"))
        flags = struct.pack("!H", GRE_KEY)
        data = (
            netlink.attr(IFLA_GRE_LOCAL, socket.inet_aton(local))
            + netlink.attr(IFLA_GRE_REMOTE, socket.inet_aton(remote))
            + netlink.attr(IFLA_GRE_IFLAGS, flags)
            + netlink.attr(IFLA_GRE_OFLAGS, flags)
            + netlink.attr(IFLA_GRE_IKEY, key)
            + netlink.attr(IFLA_GRE_OKEY, key)
        )
        return netlink.sublink(self.name, scratch_name(link, side), data, alias=ap.alias, mtu=link.mtu)

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        """Made in the hosts, then moved into the nodes under the endpoint's name."""
        from ..backends.kernel import netlink

        lookups = []
        for link in objs:
            for side, end in enumerate(link.ends):
                host = link.underlay[side][0]
                lookups.append(
                    (host, ap.queue(host, self.request(ap, link, side), netlink.get_link(scratch_name(link, side))) + 1, end)
                )
            made.append(link)
        answers = ap.flush()
        for host, slot, end in lookups:
            ap.queue(host, netlink.move(answers[host][slot], ap.fd(end.node), end.iface))
        ap.flush()
        up_and_address(ap, [end for link in objs for end in link.ends])

    def delete(self, ap: Applying, link: LinkObj | AttachObj, quiet: bool) -> None:
        """Both ends, in their nodes or, if a deploy stopped before moving them, in their hosts."""
        from ..backends.kernel import netlink

        assert isinstance(link, LinkObj), "gre joins two endpoints"
        super().delete(ap, link, quiet)
        for side in (0, 1):
            ap.run_quiet(link.underlay[side][0], netlink.del_link(scratch_name(link, side)), True)


class Gre(Gretap):
    name = "gre"
    summary = "an IP-over-GRE overlay (layer 3, no Ethernet header) between nodes on two hosts (gre_key:)"
    overhead = 28  # outer IPv4 + GRE with key
    features = {"gre": KernelFeature("CONFIG_NET_IPGRE", {"kind": "gre", "gre_local": "10.255.0.1", "gre_remote": "10.255.0.2"})}


register(Gretap())
register(Gre())

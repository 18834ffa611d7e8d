"""macvlan: a node's interface is a MAC-address sub-interface of a host NIC (seeds 000 and 002)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .base import KernelFeature, SubInterface, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.schema.links import LinkSpec
    from ..plan.objects import AttachObj, Options
    from ..plugins import Applying

IFLA_MACVLAN_MODE = 1
MODES = {"private": 1, "vepa": 2, "bridge": 4, "passthru": 8, "source": 16}


class Macvlan(SubInterface):
    name = "macvlan"
    summary = "a macvlan sub-interface of a host NIC (parent:), macvlan_mode bridge/private/vepa/passthru/source"
    options = {"macvlan_mode": (Literal["bridge", "private", "vepa", "passthru", "source"] | None, {"default": None})}
    features = {"macvlan": KernelFeature("CONFIG_MACVLAN", {"kind": "macvlan", "macvlan_mode": "bridge", "link": "parent"})}

    def plan_options(self, link: LinkSpec) -> Options:
        return (("mode", link.macvlan_mode or "bridge"),)

    def request(self, ap: Applying, att: AttachObj, parent_index: int) -> Request:
        from ..backends.kernel import netlink

        data = netlink.u32_attr(IFLA_MACVLAN_MODE, MODES[att.text("mode")])
        return netlink.sublink(
            self.name, att.end.iface, data, alias=ap.alias, parent=parent_index, ns_fd=ap.fd(att.end.node), mtu=att.mtu
        )


register(Macvlan())

"""vxlan-remote: a node's interface tunnelled in VXLAN to another machine (containerlab's ``type: vxlan``).

The device is born in the node; its UDP socket stays in this machine's namespace and sends to
``remote`` (the kernel picks the source by route).  It is how a lab split across servers joins
the two halves of a cut link, and how a bridge replicated on several servers is stitched.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from ..plan.objects import AttachObj, Options
from .base import KernelFeature, LinkMode, Stage, into_switches, register, up_and_address
from .vxlan import Vxlan

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import EndObj, LinkObj
    from ..plugins import Applying, Checking, Planning

OVERHEAD = 50  # outer Ethernet + IPv4 + UDP + VXLAN headers


class VxlanRemote(LinkMode):
    name = "vxlan-remote"
    summary = "the node's interface tunnelled in VXLAN to another machine's address (remote:, vni:, port:, src_port:)"
    ends = 1
    real_host = True
    switch_port = True
    stage = Stage.ATTACH
    options = {
        "remote": (str | None, {"default": None, "description": "vxlan-remote: the other machine's address (IPv4)"}),
        "vni": Vxlan.options["vni"],
        "port": Vxlan.options["port"],
        "src_port": (
            int | None,
            {
                "default": None,
                "ge": 1,
                "le": 65535,
                "description": "vxlan-remote: the UDP source port (default: the kernel's range)",
            },
        ),
    }
    features = {"vxlan": KernelFeature("CONFIG_VXLAN", {"kind": "vxlan", "vxlan_id": 42})}

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        try:
            ipaddress.IPv4Address(link.remote or "")
        except ValueError:
            return [
                ctx.problem(
                    path + ("remote",), f"mode: vxlan-remote needs remote: the other machine's IPv4 address (got {link.remote!r})"
                )
            ]
        if not link.vni:
            return [ctx.problem(path + ("vni",), "mode: vxlan-remote needs vni: the identifier both ends use")]
        if link.parent:
            return [ctx.problem(path + ("parent",), "mode: vxlan-remote finds its way to remote: by route; drop parent:")]
        return []

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """The far end is on another machine: nothing here to share a segment with."""

    def plan_options(self, link: LinkSpec) -> Options:
        chosen: Options = (("src_port", link.src_port),) if link.src_port else ()
        return (("port", link.port or 4789), ("remote", link.remote), ("vni", link.vni), *chosen)

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        host = b.host_of(ends[0].node) if b.t.hosts else None
        obj = super().build(b, link, ends)
        assert isinstance(obj, AttachObj)
        return AttachObj(obj.end, self.name, host, None, obj.options, link.mtu or 1500 - OVERHEAD, shape=obj.shape)

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import netlink

        for att in objs:
            src_port = att.number("src_port") if att.option("src_port") else 0
            data = netlink.vxlan_data(att.number("vni"), att.text("remote"), att.number("port"), src_port=src_port)
            ap.queue(
                att.host, netlink.sublink("vxlan", att.end.iface, data, alias=ap.alias, ns_fd=ap.fd(att.end.node), mtu=att.mtu)
            )
            made.append(att)
        ap.flush()
        into_switches(ap, [att.end for att in objs])
        up_and_address(ap, [att.end for att in objs])


register(VxlanRemote())

"""What every point-to-point overlay between two hosts shares (vxlan, gretap, gre, geneve).

Each end is a device in its node whose outer packets leave from its host's namespace, between
two host addresses on a wire both hosts share; its MTU is the wire's less the overlay's headers.
Each link gets an identifier (VNI or key) of its own unless the file gives one.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from ..plan.objects import LinkObj
from .base import LinkMode, Stage, up_and_address

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import AttachObj, EndObj
    from ..plugins import Applying, Checking, Planning


class Overlay(LinkMode):
    """Subclasses set ``overhead`` and ``id_key`` (the link key naming the identifier) and make :meth:`request`."""

    stage = Stage.OVERLAY
    separate_ends = True
    overhead = 0
    id_key = "vni"

    def request(self, ap: Applying, link: LinkObj, side: int) -> Request:
        """The request, sent in end ``side``'s host namespace, that makes that end's device."""
        raise NotImplementedError

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        a, b = (ep.node for ep in link.endpoints)
        if ctx.shares_stack(a) or ctx.shares_stack(b):
            return [
                ctx.problem(
                    path + ("mode",), f"a node sharing its host's stack cannot hold a {self.name} end; give it its own stack"
                )
            ]
        if ctx.host(a) == ctx.host(b):
            return [
                ctx.problem(
                    path + ("mode",),
                    f"a {self.name} overlay joins nodes on different hosts; {a} and {b} are both on {ctx.host(a)} (use veth)",
                )
            ]
        return []

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        super().join(b, link, keys)
        for node, _iface in keys:
            b.machine(b.host_of(node))

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        underlay, wire_mtu = b.underlay(ends[0].node, ends[1].node)
        fits = wire_mtu - self.overhead
        if link.mtu and link.mtu > fits:
            b.fail(
                f"{self.name} link {ends[0].node}-{ends[1].node}: mtu {link.mtu} does not fit the wire's {wire_mtu} minus {self.overhead} bytes "
                f"of {self.name} headers; use at most {fits} or raise the wire's mtu"
            )
        ident = getattr(link, self.id_key) or 1 + sum(x.mode == self.name for x in b.plan.links.values())
        obj = super().build(b, link, ends)
        assert isinstance(obj, LinkObj)
        options = obj.options + ((self.id_key, ident),)
        return LinkObj(
            obj.a, obj.b, link.mtu or fits, self.name, obj.shape_a, obj.shape_b, obj.state, tuple(sorted(options)), underlay
        )

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        for link in objs:
            for side in (0, 1):
                ap.queue(link.underlay[side][0], self.request(ap, link, side))
            made.append(link)
        ap.flush()
        up_and_address(ap, [end for link in objs for end in link.ends])


def scratch_name(link: LinkObj, side: int) -> str:
    """A name for an end's device while it is still in its host's namespace (unique per link end)."""
    return f"nlt{zlib.crc32(f'{link.key}/{side}'.encode()):08x}"

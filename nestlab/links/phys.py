"""phys: a host's NIC itself moves into the node (LXC's phys mode); it carries nothing else.

On an emulated host the wire's end is simply created inside the node, so no object of its own
is planned; a real interface of this machine (``allow_host_interfaces``) is moved in and goes
home under its own name when the lab goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import LinkMode, Stage, register, up_and_address

if TYPE_CHECKING:
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import AttachObj, EndObj, LinkObj
    from ..plugins import Applying, Planning


class Phys(LinkMode):
    name = "phys"
    summary = "the host NIC (parent:) itself moves into the node"
    ends = 1
    needs_parent = True
    moves_parent = True
    stage = Stage.ATTACH

    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """On an emulated NIC the wire's end is the node's interface (joined with the wire)."""
        host, parent = b.attach_point(link)
        if host is None:
            return
        b.seg.join(keys[0], (host, parent))

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        host, _parent = b.attach_point(link)
        return None if host is not None else super().build(b, link, ends)

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import netlink

        lookups = [ap.queue(att.host, netlink.get_link(att.parent)) for att in objs]
        answers = ap.flush()
        for att, slot in zip(objs, lookups):
            ap.queue(att.host, netlink.move(answers[att.host][slot], ap.fd(att.end.node), att.end.iface))
            made.append(att)
        ap.flush()
        up_and_address(ap, [att.end for att in objs])

    def delete(self, ap: Applying, att: LinkObj | AttachObj, quiet: bool) -> None:
        """A real interface goes home under its own name."""
        from ..backends.kernel import netlink

        assert isinstance(att, AttachObj) and att.parent is not None, "phys makes attachments to a parent"
        try:
            index = ap.run(att.end.node, netlink.get_link(att.end.iface))[0]
        except (netlink.NetlinkError, FileNotFoundError):
            return
        ap.run_quiet(att.end.node, netlink.move(index, ap.fd(att.host), att.parent), quiet)


register(Phys())

"""veth: a virtual cable between two nodes on one host (or between two hosts: a wire).

Each pair is created from its bridge side, if any, so the port is enslaved as it is born,
with the peer created directly in the other namespace; one batch per namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import LinkMode, into_switches, register

if TYPE_CHECKING:
    from ..model.errors import Path, Problem
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes
    from ..plan.objects import EndObj, LinkObj
    from ..plugins import Applying, Checking


class Veth(LinkMode):
    name = "veth"
    takes_macs = True
    summary = "a veth pair between two nodes on one host (the default)"

    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        a, b = (ep.node for ep in link.endpoints)
        if link.macs is not None and len(link.macs) != 2:
            return [ctx.problem(path + ("macs",), "macs needs one entry per endpoint (2); use null to let the kernel choose")]
        where = ctx.host(a), ctx.host(b)
        # Between two nodes that share their hosts' stacks, a veth is a cable between the hosts (a wire).
        cable = self.name == "veth" and ctx.shares_stack(a) and ctx.shares_stack(b)
        if where[0] != where[1] and not cable:
            return [
                ctx.problem(
                    path + ("endpoints",),
                    f"{a} is on host {where[0]} and {b} on {where[1]}: a {self.name} link cannot cross hosts; "
                    "use mode: vxlan (or gretap, geneve), or attach each node to its host's NIC (mode: macvlan/bridge with parent:)",
                )
            ]
        return []

    @staticmethod
    def orient(ap: Applying, link: LinkObj) -> tuple[EndObj, EndObj]:
        """``(main, peer)``: the end a pair is created from, its bridge side if it has one (enslaved at birth)."""
        return (link.b, link.a) if ap.bridge(link.b.node) and not ap.bridge(link.a.node) else (link.a, link.b)

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import netlink

        oriented = [self.orient(ap, ln) for ln in objs]
        quiet = {
            a.node for a, _ in oriented if not ap.nodes[a.node].link_local
        }  # up only once told not to make a link-local address
        for i, (link, (a, b)) in enumerate(zip(objs, oriented), 1):
            ap.queue(
                a.node,
                netlink.new_veth(
                    a.iface,
                    b.iface,
                    ap.fd(b.node),
                    alias=ap.alias,
                    mtu=link.mtu,
                    master=ap.bridge(a.node),
                    macs=(a.mac, b.mac),
                    up=a.node not in quiet,
                ),
            )
            made.append(link)
            if i % ap.CHUNK == 0:  # each batch names at most CHUNK namespace fds
                ap.flush()
        ap.flush()
        ap.progress("links", len(objs) // 3, len(objs))
        into_switches(ap, [b for _, b in oriented])
        ap.address(
            [end for pair in oriented for end in pair],
            up=[a for a, _ in oriented if a.node in quiet] + [b for _, b in oriented if not ap.bridge(b.node)],
        )
        ap.progress("links", len(objs), len(objs))


register(Veth())

"""bridge: a Linux bridge named after the node, in a namespace of its own; links ending in it are its ports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Switch, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..plan.objects import NodeObj
    from ..plugins import Applying


class Bridge(Switch):
    name = "bridge"
    summary = "a Linux bridge named after the node (containerlab's bridge), in a namespace of its own"
    own_bridge = True

    def started(self, ap: Applying, node: NodeObj, nl: Netlink) -> None:
        from ..backends.kernel import netlink

        # A fresh namespace: a bridge already in it is the one the spares' helper made there.
        # Multicast snooping waits for finish: filling a snooping bridge costs O(ports²) (netlink.new_bridge).
        nl.run(netlink.new_bridge(node.name, ap.alias, exclusive=False, snooping=False))

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        from ..backends.kernel import netlink

        for node in nodes:  # every port is up and has its carrier: one pass each
            ap.queue(node.name, netlink.snooping(node.name))
        ap.flush()


register(Bridge())

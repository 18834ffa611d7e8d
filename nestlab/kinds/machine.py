"""machine: an emulated server of ``hosts:`` (a namespace the lab's nodes and its NICs sit in)."""

from __future__ import annotations

from .base import NodeKind, no_bridge_netfilter, register


class Machine(NodeKind):
    name = "machine"
    summary = "an emulated server of hosts: (its NICs, bridges and the nodes on it); not written as a node's kind"
    order = 0
    machine = True

    def sysctls(self) -> dict[str, str]:
        return no_bridge_netfilter()


register(Machine())

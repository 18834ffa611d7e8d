"""linux: a plain node, namespaces and what runs in them (containerlab's ``linux``, Mininet's Host)."""

from __future__ import annotations

from typing import Any

from ..plan.objects import NodeObj
from ..plugins import Draft
from .base import NodeKind, register

IPV6_OFF = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}  # a host's with ipv6: false


class Linux(NodeKind):
    name = "linux"
    aliases = ("host",)  # containerlab's and Mininet's word for it
    summary = "a node of its own namespaces (its runtime says which and what runs in them)"
    endpoint = True
    shares_stack = True

    def plan(self, node: Draft) -> dict[str, Any]:
        own = not node.shares
        return {"sysctls": IPV6_OFF if own and node.ipv6 is False else {}, "link_local": not (own and node.ipv6 == "quiet")}

    def made_ahead(self, node: NodeObj) -> bool:
        return node.runtime == "namespace" and not (node.view or node.cgroup or node.shares)


register(Linux())

"""The topology file's schema (pydantic), containerlab-shaped.

Example::

    name: quickstart
    topology:
      defaults: {kind: linux}
      nodes:
        h1: {}
        h2: {}
        s1: {kind: bridge}
      links:
        - endpoints: ["h1:eth1", "s1:p1"]
          ipv4: ["10.0.0.1/24", null]
        - endpoints: ["h2:eth1", "s1:p2"]
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
IFNAMSIZ = 15
DEFAULT_IPV4_POOL = "10.200.0.0/16"

# Node kinds: "host" is containerlab's and Mininet's word for a plain namespace node.
NodeKind = Literal["linux", "host", "bridge"]

# containerlab keys that load but have no effect yet: the CLI says so on every deploy.
IGNORED_NODE_KEYS = {
    "image": "nodes run in namespaces on the host filesystem until image runtimes exist",
    "cmd": "nodes have no container entrypoint; use exec:",
    "entrypoint": "nodes have no container entrypoint; use exec:",
    "binds": "nodes share the host filesystem",
    "ports": "nodes are not reachable from outside the lab",
    "mgmt-ipv4": "there is no management network",
    "mgmt-ipv6": "there is no management network",
    "labels": "labels are not used",
    "group": "groups are not used",
    "startup-config": "only linux and bridge kinds exist",
    "license": "only linux and bridge kinds exist",
    "user": "commands run as the deploying user",
    "restart-policy": "there is no container engine",
    "network-mode": "every node gets its own network namespace",
}
IGNORED_TOP_KEYS = {
    "mgmt": "there is no management network (nodes have no route to the host)",
    "prefix": "namespace names are always nestlab.LAB.NODE",
}
IGNORED_LINK_KEYS = {"type": "every link is a veth pair", "vars": "link vars are not used", "labels": "not used"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeSpec(_Strict):
    """One node. ``kind`` falls back to ``topology.kinds`` / ``topology.defaults``, then ``linux``."""

    kind: NodeKind | None = None
    exec: list[str] = Field(default_factory=list, description="shell commands run in the node after deploy")
    sysctls: dict[str, str | int] = Field(default_factory=dict, description="net.* sysctls of the node")
    env: dict[str, str | int] = Field(default_factory=dict, description="environment of exec/cmd/shell")

    @field_validator("sysctls")
    @classmethod
    def _net_only(cls, value: dict) -> dict:
        for key in value:
            if not key.startswith("net."):
                raise ValueError(f"'{key}' is not per-namespace; a node may set only net.* sysctls")
        return value


class LinkSpec(_Strict):
    """A veth between two endpoints ``NODE:IFACE``; ``ipv4``/``ipv6`` list one entry per endpoint."""

    endpoints: list[str] = Field(min_length=2, max_length=2)
    ipv4: list[str | None] | None = None
    ipv6: list[str | None] | None = None
    mtu: int | None = Field(default=None, ge=68, le=65535)

    @field_validator("endpoints", mode="before")
    @classmethod
    def _extended_form(cls, value):
        """Accept containerlab's extended endpoint form ``{node: h1, interface: eth1}``."""
        if isinstance(value, list):
            return [
                f"{ep.get('node')}:{ep.get('interface')}" if isinstance(ep, dict) and set(ep) <= {"node", "interface", "mac"} else ep
                for ep in value
            ]
        return value


class TopologyBody(_Strict):
    defaults: NodeSpec = Field(default_factory=NodeSpec)
    kinds: dict[NodeKind, NodeSpec] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    links: list[LinkSpec] = Field(default_factory=list)


class Topology(_Strict):
    """A whole lab: its ``name``, the subnet pool for automatic addresses and the ``topology``."""

    name: str = Field(pattern=NAME_PATTERN, max_length=40)
    ipv4_pool: str | None = DEFAULT_IPV4_POOL
    topology: TopologyBody

    @field_validator("ipv4_pool")
    @classmethod
    def _pool(cls, value):
        if value is not None:
            try:
                ipaddress.IPv4Network(value)
            except ValueError as exc:
                raise ValueError(f"'{value}' is not an IPv4 network such as 10.200.0.0/16 ({exc})") from None
        return value


ALLOWED_KEYS: dict[str, list[str]] = {
    "top": [*Topology.model_fields, *IGNORED_TOP_KEYS],
    "body": list(TopologyBody.model_fields),
    "node": [*NodeSpec.model_fields, *IGNORED_NODE_KEYS],
    "link": [*LinkSpec.model_fields, *IGNORED_LINK_KEYS],
}

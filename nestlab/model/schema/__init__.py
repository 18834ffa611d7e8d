"""The topology file's schema (pydantic), containerlab-shaped: the lab as a whole here, its nodes, links,
machines and management in the modules beside.

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
from functools import cached_property
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ...names import is_plain
from ..checks import Check
from ..units import parse_time
from .base import NAME_PATTERN, Strict, parsed_by
from .links import IGNORED_LINK_KEYS, LinkParams, LinkSpec, Shape
from .machines import HostSpec, Nic, ServerSpec, Stitch, WireParams, WireSpec
from .management import MgmtSpec
from .nodes import IGNORED_NODE_KEYS, ComponentSpec, Healthcheck, NodeKind, NodeSpec, Resources, StageSpec

DEFAULT_IPV4_POOL = "10.200.0.0/16"
# The host every node is on when a topology declares no ``hosts:``.
IMPLICIT_HOST = "local"
IGNORED_TOP_KEYS = {
    "settings": "nestlab has no certificate authority or per-lab settings",
    "debug": "nestlab says what it does anyway",
}


class ScheduledChange(Strict):
    """One timed change at ``at`` (from the start of ``nestlab run``).

    A ``link``: what to ``set`` and/or its ``state``, or ``action: remove|add``.
    A ``node``: ``action: stop`` (processes frozen, interfaces down) or ``start``.
    """

    at: str
    link: list[str] | None = Field(default=None, min_length=2, max_length=2)
    node: str | None = None
    action: Literal["add", "remove", "stop", "start"] | None = None
    set: Shape | None = None
    state: Literal["up", "down"] | None = None
    direction: Literal["both", "a", "b"] = "both"

    @model_validator(mode="after")
    def _target(self) -> Self:
        if (self.link is None) == (self.node is None):
            raise ValueError("give either link: [A, B] or node: NAME")
        if self.node and self.action not in ("stop", "start"):
            raise ValueError("a node change needs action: stop or start")
        if self.link and self.action in ("stop", "start"):
            raise ValueError("links take action: add or remove (or set:/state:)")
        if self.link and not (self.action or self.set or self.state):
            raise ValueError("say what happens to the link: set:, state: or action:")
        return self

    _at = parsed_by(parse_time, "at")


class Dynamics(Strict):
    """A MANET whose links follow a time-varying visibility graph (``graph``: a file, see docs/shaping.md).

    Every pair of ``nodes`` gets a point-to-point link ``NODE:v-PEER``, created down; the
    controller brings a pair's link up while the two see each other.
    """

    type: Literal["visibility"] = "visibility"
    graph: str
    nodes: list[str] | None = Field(default=None, description="the mobile nodes (default: every linux node)")
    params: Shape | None = Field(default=None, description="shaping of every radio link, e.g. {rate: 11mbit}")


class TopologyBody(Strict):
    defaults: NodeSpec = Field(default_factory=NodeSpec)
    kinds: dict[NodeKind, NodeSpec] = Field(default_factory=dict)
    groups: dict[str, NodeSpec] = Field(
        default_factory=dict, description="containerlab's groups: node beats group beats kind beats defaults"
    )
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    links: list[LinkSpec] = Field(default_factory=list)


class Topology(Strict):
    """A whole lab: its ``name``, the subnet pool for automatic addresses and the ``topology``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=40)
    mgmt: MgmtSpec | None = Field(default=None, description="the management network; on for containerlab files")
    prefix: str | None = Field(
        default=None, description="containerlab's long names: PREFIX-LAB-NODE (default clab; empty: NODE)", max_length=40
    )

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        """A container name's characters (Docker's rule for containerlab's): it names /run/netns files and
        /etc/hosts and ssh config lines; "" and "__lab-name" are containerlab's special values."""
        if value is None or value in ("", "__lab-name") or is_plain(value):
            return value
        raise ValueError(f"{value!r} may hold only letters, digits, '_', '.' and '-', the first a letter or digit")

    ipv4_pool: str | None = DEFAULT_IPV4_POOL
    allow_host_interfaces: bool = Field(
        default=False, description="let parent: name a real interface of this machine (never needed for emulated hosts)"
    )
    allow_host_ports: bool = Field(default=False, description="forward nodes' ports: from this machine's loopback (127.0.0.1)")
    ipv6: bool | Literal["auto", "quiet"] = Field(
        default="auto",
        description="hosts' IPv6: true (link-local addresses, the kernel's defaults), quiet (none until a command adds one), "
        "false (off); auto: quiet unless the lab uses IPv6 (docs/performance.md)",
    )
    _hosts_ipv6: bool | str = PrivateAttr(default=True)  # ipv6: with auto worked out (model/ipv6.py), set by the loader

    @property
    def hosts_ipv6(self) -> bool | str:
        """``ipv6:`` with ``auto`` worked out: True, "quiet" or False (model/ipv6.py)."""
        return self._hosts_ipv6

    hosts: dict[str, HostSpec] = Field(default_factory=dict)

    @cached_property
    def wired_nics(self) -> frozenset[Nic]:
        """Every host NIC a wire declares, read once from the wires' endpoints."""
        return frozenset(Nic(*ep.key) for wire in self.wires for ep in wire.endpoints)

    servers: dict[str, ServerSpec] = Field(
        default_factory=dict, description="machines the lab is split across (or --servers FILE)"
    )
    stitch: Stitch = Field(default_factory=Stitch, description="VXLAN between servers")
    wires: list[WireSpec] = Field(default_factory=list)
    topology: TopologyBody
    schedule: list[ScheduledChange] = Field(default_factory=list, description="timed link changes played by nestlab run")
    dynamics: Dynamics | None = None
    checks: list[Check] = Field(default_factory=list, description="assertions that the lab works (nestlab check, docs/checks.md)")

    @field_validator("ipv4_pool")
    @classmethod
    def _pool(cls, value: Any) -> Any:
        if value is not None:
            try:
                ipaddress.IPv4Network(value)
            except ValueError as exc:
                raise ValueError(f"'{value}' is not an IPv4 network such as 10.200.0.0/16 ({exc})") from None
        return value


ALLOWED_KEYS: dict[str, list[str]] = {
    "top": [*(f.alias or n for n, f in Topology.model_fields.items()), *IGNORED_TOP_KEYS],
    "mgmt": [f.alias or n for n, f in MgmtSpec.model_fields.items()],
    "body": list(TopologyBody.model_fields),
    "node": [*(f.alias or n for n, f in NodeSpec.model_fields.items() if n != "component_of"), *IGNORED_NODE_KEYS],
    "link": [*LinkSpec.model_fields, *IGNORED_LINK_KEYS],
    "wire": list(WireSpec.model_fields),
    "params": list(WireParams.model_fields),
    "shape": list(LinkParams.model_fields),
    "schedule": list(ScheduledChange.model_fields),
    "check": list(Check.model_fields),
    "dynamics": list(Dynamics.model_fields),
    "host": list(HostSpec.model_fields),
    "server": list(ServerSpec.model_fields),
    "stitch": list(Stitch.model_fields),
    "resources": list(Resources.model_fields),
    "stage": [f.alias or n for n, f in StageSpec.model_fields.items()],
    "healthcheck": [f.alias or n for n, f in Healthcheck.model_fields.items()],
    "component": list(ComponentSpec.model_fields),
}

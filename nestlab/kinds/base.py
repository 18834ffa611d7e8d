"""The interface every node kind implements; each kind module registers one (``nestlab.registry.KINDS``).

A kind is the one place that knows what sets its nodes apart, in every layer: the keys of the file
it owns (:attr:`NodeKind.options`) and its rules (:meth:`NodeKind.check`), the plan object's fields
(:meth:`NodeKind.plan`), what is made once its namespaces exist and what is removed with it
(:meth:`NodeKind.started`, :meth:`NodeKind.finish`, :meth:`NodeKind.removed`), its sysctls, its
columns in ``nestlab inspect`` and what ``nestlab doctor`` and a deploy check for it.  Kernel code
is imported inside the hooks that use it, so reading a kind's keys (the schema) loads none.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..plugins import Draft
from ..registry import KINDS

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..model.schema.nodes import NodeSpec
    from ..plan.machine import Machine
    from ..plan.objects import NodeObj
    from ..plugins import Applying


class NodeKind:
    """A node kind.  Subclasses set the class attributes and override the hooks that differ."""

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()  # other words a file may use for it
    summary: ClassVar[str] = ""  # one line for `nestlab modes` and docs/kinds.md
    order: ClassVar[int] = 2  # creation order: emulated hosts (0), then switches (1), then nodes (2)
    switch: ClassVar[bool] = False  # a layer-2 switch: its interfaces are ports (no addresses, no components)
    machine: ClassVar[bool] = False  # an emulated server of hosts: (holds nodes; not a node of the lab)
    endpoint: ClassVar[bool] = False  # an end host: `nestlab bench` and the demo's pings pick it
    shares_stack: ClassVar[bool] = False  # may use its host's network stack (mode: none)
    own_bridge: ClassVar[bool] = False  # holds a Linux bridge named after it (so its name is at most 15 characters)
    takes_ports: ClassVar[bool] = False  # interfaces made inside it are handed to :meth:`ports`
    link_mode: ClassVar[str | None] = None  # the mode of a link ending in it that names none (default veth)
    router: ClassVar[bool] = False  # routes between its interfaces (and so speaks IPv6 by default)
    config_file: ClassVar[str | None] = None  # where startup-config: goes inside the node
    images: ClassVar[tuple[str, ...]] = ()  # image repositories it runs itself (e.g. frrouting/frr)
    # Its daemons run as root in rootless mode, where the users of its run_dirs are not mapped (they would be refused).
    guest_as_root: ClassVar[bool] = False
    # The node keys it owns: name -> (annotation, pydantic Field's arguments).
    options: ClassVar[Mapping[str, tuple[Any, dict[str, Any]]]] = {}
    # Keys it reads on nodes of any kind (a wireless station's position), in the same form.
    node_options: ClassVar[Mapping[str, tuple[Any, dict[str, Any]]]] = {}
    tools: ClassVar[Mapping[str, str]] = {}  # programs a deploy needs: program -> Debian package

    # -- model -----------------------------------------------------------------------------------
    def check(self, spec: NodeSpec) -> list[tuple[tuple[str | int, ...], str]]:
        """Problems with a node of this kind: (path below the node, message)."""
        return []

    # -- plan ------------------------------------------------------------------------------------
    def plan(self, node: Draft) -> dict[str, Any]:
        """Fields of the node's plan object (:class:`~nestlab.plan.objects.NodeObj`); ``sysctls``: defaults
        under the node's own; ``binds``: binds before the node's own."""
        return {}

    # -- apply -----------------------------------------------------------------------------------
    def sysctls(self) -> dict[str, str]:
        """Sysctls every node of this kind gets at creation, under its own (read by the Applier)."""
        return {}

    def made_ahead(self, node: NodeObj) -> bool:
        """Whether the node is only its namespaces, so it may be made in parallel ahead of the rest."""
        return False

    def prepare(self, ap: Applying, node: NodeObj) -> None:
        """Before the node's namespaces are made (files its view binds)."""

    def started(self, ap: Applying, node: NodeObj, nl: Netlink) -> None:
        """Right after the node's namespaces are made (``nl``: a netlink socket inside it)."""

    def bridge(self, node: NodeObj) -> str | None:
        """The bridge (in the node) that links ending in this node join as ports; None: none."""
        return node.name if self.own_bridge else None

    def ports(self, ap: Applying, node: NodeObj, ifaces: list[str]) -> None:
        """(``takes_ports``) Interfaces just made inside the node."""

    def finish(self, ap: Applying, nodes: list[NodeObj]) -> None:
        """Once every link of the change exists: the new nodes of this kind (services, flows, a bridge's snooping)."""

    def resumed(self, ap: Applying, nodes: list[NodeObj]) -> None:
        """Stopped nodes of this kind starting again, their interfaces back up: what :meth:`started` and
        :meth:`finish` started (their processes were ended by the stop; their files are kept)."""

    def retuned(self, ap: Applying, nodes: list[NodeObj]) -> None:
        """Running nodes of this kind kept by a deploy whose ``live`` values changed (after every new port is made)."""

    def port_removed(self, ap: Applying, node: NodeObj, iface: str) -> None:
        """(``takes_ports``) A link ending in the node was deleted."""

    def removed(self, lab: str, node: NodeObj) -> None:
        """After the node's namespaces are gone: whatever else of it is left."""

    def missing(self, nodes: list[NodeObj]) -> list[str]:
        """What this machine lacks for ``nodes`` (checked before anything is created)."""
        return [f"{program} (apt-get install {package})" for program, package in self.tools.items() if not shutil.which(program)]

    def doctor(self, machine: Machine) -> list[tuple[str, bool, str, str]]:
        """Rows of ``nestlab doctor`` for this kind on ``machine``: (feature, works here, detail, fix)."""
        return []

    # -- observe ---------------------------------------------------------------------------------
    def inspect(self, lab: str, node: NodeObj) -> dict[str, Any]:
        """Extra keys of the node's entry in ``nestlab inspect --format json``; ``detail``: a few words
        the table shows beside the kind."""
        return {}


# Switches need no IPv6 on their ports and send no IGMP reports (nor the bridge's own, flooded to every port).
SWITCH_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.igmp_link_local_mcast_reports": "0",
}
_BRIDGE_NF = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.bridge.bridge-nf-call-arptables")


def no_bridge_netfilter() -> dict[str, str]:
    """No namespace of ours sends bridged traffic through iptables unless a host bridge asks (bridge_netfilter)."""
    return {key: "0" for key in _BRIDGE_NF if os.path.exists("/proc/sys/" + key.replace(".", "/"))}


class Switch(NodeKind):
    """A layer-2 switch node: made before the nodes, its interfaces are ports."""

    order = 1
    switch = True

    def sysctls(self) -> dict[str, str]:
        return {**SWITCH_SYSCTLS, **no_bridge_netfilter()}


def register(kind: NodeKind) -> NodeKind:
    """Each kind module calls this for its kind."""
    KINDS.register(kind, kind.aliases)
    return kind

"""The interface every link mode implements; each mode module registers one (``nestlab.registry.LINK_MODES``).

Who knows what (as in Mininet's link.py): the topology *model* checks a file, the *planner*
turns a link into plan objects, the *applier* turns plan objects into kernel objects; a mode
is the one place that knows all three for its kind of link.  Each hook receives the caller as
a typed seam (nestlab/plugins.py: ``ctx`` :class:`Checking`, ``b`` :class:`Planning`, ``ap``
:class:`Applying`) and uses only what that lists.  Kernel code is imported in the hooks that
use it, so reading a mode's keys (the schema) loads none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..model.errors import Path, Problem
from ..plan.objects import AttachObj, EndObj, LinkObj, Options, shapes
from ..plugins import Applying, Checking, KernelFeature, Planning
from ..registry import LINK_MODES

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Request
    from ..model.schema.links import LinkSpec
    from ..plan.diff import Changes

__all__ = ["KernelFeature", "LinkMode", "Stage", "SubInterface", "into_switches", "register", "up_and_address"]


class Stage(IntEnum):
    """When a deploy creates a mode's objects (each stage's requests batched per namespace)."""

    CABLES = 1  # veth pairs between nodes, switches and hosts
    ATTACH = 2  # a node's interface on an interface of its host (after the hosts' bridges)
    OVERLAY = 3  # tunnels whose sockets sit in the hosts' namespaces
    DAEMON = 4  # processes that carry the link (after every address is in place)


class LinkMode:
    """One way of connecting endpoints.  Subclasses set the class attributes and override the hooks that differ."""

    name: str = ""
    aliases: tuple[str, ...] = ()  # older words a file may still use for it
    summary: str = ""  # one line for `nestlab modes` and the docs
    ends: int = 2  # 2: joins two endpoints; 1: attaches one node to an interface (``parent:``) of its host
    needs_parent: bool = False  # (one end) parent: is required
    moves_parent: bool = False  # (one end) the parent interface itself moves into the node (phys)
    real_host: bool = False  # (one end) without hosts:, the host side is this machine, not an emulated host
    switch_port: bool = False  # (one end) on a switch node, the node's end is one of the switch's ports
    stage: Stage = Stage.CABLES
    separate_ends: bool = False  # (two ends) each end is a device of its own; else deleting one end removes the pair
    takes_macs: bool = False  # its ends' MAC addresses may be chosen (``macs:``, containerlab's endpoint ``mac:``)
    options: Mapping[str, tuple[Any, dict[str, Any]]] = {}  # link keys this mode owns: name -> (annotation, Field's arguments)
    features: dict[str, KernelFeature] = {}  # kernel features it needs, probed by doctor and before a deploy

    # -- model: extra rules for a link of this mode --------------------------------------------------
    def check(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem]:
        """Problems with ``link`` (``ctx``: ``problem(path, msg)``, ``kind(n)``, ``host(n)``, ``shares_stack(n)``,
        ``parent_of(link)``, ``topology``).  Endpoint count and parent presence are checked before."""
        return []

    def check_parent(self, ctx: Checking, link: LinkSpec, path: Path) -> list[Problem] | None:
        """(one end) Rules for ``parent:``; None lets the model apply the host-NIC rules."""
        return None

    # -- plan --------------------------------------------------------------------------------------------
    def join(self, b: Planning, link: LinkSpec, keys: list[tuple[str, str]]) -> None:
        """Join the endpoints into layer-2 segments for automatic addressing (``b.seg``, ``b.machine(host)``,
        ``b.parent_of(link)``, ``b.later(fn)``)."""
        if self.ends == 2:
            b.seg.join(keys[0], keys[1])
            return
        host, parent = b.attach_point(link)
        if parent and host is not None:
            b.seg.join(keys[0], (host, parent))

    def build(self, b: Planning, link: LinkSpec, ends: list[EndObj]) -> LinkObj | AttachObj | None:
        """The plan object for ``link`` once addresses are assigned (``b.attach_point(link)``); None: nothing of its own."""
        if self.ends == 2:
            shape_a, shape_b = shapes(link.params)
            state = link.params.state if link.params else None
            return LinkObj(ends[0], ends[1], link.mtu, self.name, shape_a, shape_b, state, self.plan_options(link))
        host, parent = b.attach_point(link)
        return AttachObj(ends[0], self.name, host, parent, self.plan_options(link), link.mtu, shape=shapes(link.params)[0])

    def plan_options(self, link: LinkSpec) -> Options:
        """The mode's own keys of ``link`` as plan options (defaults filled in)."""
        return ()

    def prepare(self, b: Planning) -> None:
        """Before any link is built: host-level objects the mode needs (``b.plan``, ``b.members``)."""

    def finish(self, b: Planning) -> None:
        """After every link is built: anything derived from all of them (e.g. routes)."""

    # -- apply -------------------------------------------------------------------------------------------
    def needs(self, obj: LinkObj | AttachObj) -> set[str]:
        """Kernel features (names of :attr:`features`) an object of this mode needs."""
        return set(self.features)

    def machine_root(self, obj: LinkObj | AttachObj) -> str | None:
        """Why ``obj`` needs the machine's root (rootless mode refuses it, docs/rootless.md), or None: by default, an
        attachment on this machine's own network stack (a real ``parent:``, ``host:IF``, a management network)."""
        if isinstance(obj, AttachObj) and obj.host is None:
            return f"mode {self.name} on this machine's own network{f', interface {obj.parent}' if obj.parent else ''}"
        return None

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        """Create ``objs`` through ``ap`` (``queue(node, *reqs)``, ``flush()``, ``fd(node)``, ``address(ends)``,
        ``bridge(node)``, ``alias``, ``lab``, ``nodes``); append each to ``made`` as soon as it may exist."""
        raise NotImplementedError(self.name)

    def devices(self, obj: LinkObj | AttachObj) -> tuple[EndObj, ...]:
        """The ends whose deletion removes ``obj``: one end of a pair, both ends of separate devices."""
        if isinstance(obj, AttachObj):
            return (obj.end,)
        return obj.ends if self.separate_ends else (obj.a,)

    # -- observe ----------------------------------------------------------------------------------------
    def label(self, att: AttachObj) -> str:
        """How ``inspect`` names an attachment of this mode: the mode and its options' values."""
        return ":".join([self.name, *(str(v) for k, v in att.options if k != "bridge")])

    def counters(self, lab: str, link: LinkObj, end: EndObj) -> dict[str, Any] | None:
        """What ``inspect`` shows of a running link end beyond its interface (a tunnel's own counters), or None."""
        return None

    def delete(self, ap: Applying, obj: LinkObj | AttachObj, quiet: bool) -> None:
        """Remove ``obj``'s kernel objects (``ap.run_quiet(node, req, quiet)``)."""
        from ..backends.kernel import netlink

        for end in self.devices(obj):
            ap.run_quiet(end.node, netlink.del_link(end.iface), quiet)


def into_switches(ap: Applying, ends: Iterable[EndObj]) -> None:
    """Queue each end made inside a ``kind: bridge`` node as a port of its bridge."""
    from ..backends.kernel import netlink

    for end in ends:
        if master := ap.bridge(end.node):
            ap.queue(end.node, netlink.set_master(end.iface, master))


def up_and_address(ap: Applying, ends: Iterable[EndObj], routes: dict[str, str] | None = None, nodad: bool = False) -> None:
    """Bring freshly made interfaces up and give them their addresses (and default routes)."""
    ends = list(ends)
    ap.address(ends, routes, up=ends, nodad=nodad)


class SubInterface(LinkMode):
    """A device made on a parent interface in the parent's namespace and born in the node's."""

    ends = 1
    needs_parent = True
    stage = Stage.ATTACH

    def request(self, ap: Applying, att: AttachObj, parent_index: int) -> Request:
        raise NotImplementedError

    def create(self, ap: Applying, objs: list[Any], made: list[Any], changes: Changes) -> None:
        from ..backends.kernel import netlink

        lookups = [ap.queue(att.host, netlink.get_link(att.parent)) for att in objs]
        answers = ap.flush()
        for att, slot in zip(objs, lookups):
            ap.queue(att.host, self.request(ap, att, answers[att.host][slot]))
            made.append(att)
        ap.flush()
        up_and_address(ap, [att.end for att in objs], {att.end.node: att.gateway for att in objs if att.gateway})


def register(mode: LinkMode) -> LinkMode:
    """Each mode module calls this for its mode."""
    LINK_MODES.register(mode, mode.aliases)
    return mode

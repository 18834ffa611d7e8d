"""The plan's vocabulary: the kernel objects a lab is made of, as frozen dataclasses.

* :class:`NodeObj`: a namespace (a node, a switch, an emulated host ``machine``);
* :class:`LinkObj`: two endpoints joined by a link mode (veth, an overlay, a tunnel);
* :class:`AttachObj`: one node's interface hung on a host (bridge, macvlan, vlan...).

Mode- and kind-specific values travel in ``options`` (sorted ``(key, value)`` pairs, each value a
number, a word or a flag as the plug-in set it, read back with :meth:`Optioned.number`,
:meth:`Optioned.text` and :meth:`Optioned.flag`), so a new link mode or node kind needs no new field
here.  Change objects with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from ..model.credentials import Login
from ..registry import KINDS

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from ..model.schema.links import LinkParams

Pairs = tuple[tuple[str, str], ...]
Options = tuple[tuple[str, str | int | bool], ...]


class Optioned:
    """A plan object's ``options``, read back as the type they were set as."""

    options: Options

    def option(self, key: str, default: str | int | bool | None = None) -> str | int | bool | None:
        return dict(self.options).get(key, default)

    def number(self, key: str) -> int:
        value = dict(self.options)[key]
        assert isinstance(value, int), (key, value)
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = dict(self.options).get(key, default)
        assert isinstance(value, str), (key, value)
        return value

    def flag(self, key: str) -> bool:
        return dict(self.options).get(key) is True


def pairs(mapping: dict[str, Any]) -> Pairs:
    """A mapping as sorted ``(key, str(value))`` pairs, leaving out None."""
    return tuple(sorted((k, str(v)) for k, v in mapping.items() if v is not None))


def shapes(params: LinkParams | None) -> tuple[Pairs, Pairs]:
    """Per-direction shapes from a link's ``params`` (LinkParams or None): common keys, then ``a``/``b``."""
    if params is None:
        return (), ()
    common = params.model_dump(exclude_none=True, exclude={"a", "b", "state"})
    a, b = (pairs({**common, **(side.model_dump(exclude_none=True) if side else {})}) for side in (params.a, params.b))
    return a, b


@dataclass(frozen=True)
class HostBridge:
    """A Linux bridge in a host's namespace (bridge mode), with its NIC ``uplink`` or NAT gateway.

    ``netfilter``: bridged frames go through the host's iptables with Docker's default rules.
    """

    name: str
    uplink: str | None = None
    addresses: tuple[str, ...] = ()
    nat: bool = False
    publish: tuple[tuple[str, int, str], ...] = ()  # (proto, port, container address)
    netfilter: bool = False


@dataclass(frozen=True)
class NodeObj(Optioned):
    """A namespace.  ``kind``: a name in nestlab.registry.KINDS (nestlab/kinds); ``machine`` is an emulated host."""

    name: str
    kind: str
    sysctls: Pairs = ()
    # Not kernel objects: changing them never recreates the node.
    env: Pairs = field(default=(), compare=False)
    exec: tuple[str, ...] = field(default=(), compare=False)
    host: str | None = None
    shares: str | None = None  # the host whose network stack this node uses (mode: none)
    datapath: str | None = None
    controller: str | None = None
    flows: tuple[str, ...] = ()
    bridges: tuple[HostBridge, ...] = ()
    routes: tuple[tuple[str, str], ...] = ()  # (destination, via): a host's routes to routed (ipvlan l3) containers
    # Containers (docs/nesting.md)
    parent: str | None = None  # the node a component belongs to
    runtime: str = "namespace"  # a name in nestlab.runtimes
    image: str | None = None
    cgroup: bool = False  # has a cgroup of its own (limits, usage)
    resources: Pairs = field(default=(), compare=False)  # changed live, never by recreating
    # A filesystem view of its own (a mount namespace): (source, destination, read-only) binds, and
    # folders made in its fresh /run or /tmp with their owner (path, user)
    view: bool = False
    own_root: bool = False  # the view's root is the machine's under a writable layer of the node's
    binds: tuple[tuple[str, str, bool], ...] = ()
    run_dirs: tuple[tuple[str, str], ...] = ()
    router: str | None = None  # "frr": FRR runs in the node, configured by ``config`` (its frr.conf)
    config: str | None = None
    # Multipath TCP: (subflows, add_addr_accepted, endpoint kind) and the endpoints as (address, device)
    mptcp: tuple[int, int, str] | tuple[()] = ()
    mptcp_endpoints: tuple[tuple[str, str], ...] = ()
    ports: tuple[tuple[int, int, str], ...] = ()  # (this machine's loopback port, the node's port, tcp/udp) forwarded
    link_local: bool = True  # its interfaces make IPv6 link-local addresses (False in a quiet lab's hosts: model/ipv6.py)
    # How people and tools reach it (a lab with a management network): containerlab's long name, who logs in
    long: str = field(default="", compare=False)
    login: Login = field(default=Login(), compare=False)
    options: Options = ()  # its kind's own values, so a new kind needs no new field here
    live: Options = field(default=(), compare=False)  # its kind's values a running node takes in place (NodeKind.retuned)

    @property
    def deps(self) -> set[str]:
        return ({self.shares} if self.shares else set()) | ({self.parent} if self.parent else set())


@dataclass(frozen=True)
class EndObj:
    node: str
    iface: str
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    mac: str | None = None  # the interface's address at birth; None: the kernel picks one

    @property
    def ref(self) -> str:
        return f"{self.node}:{self.iface}"


@dataclass(frozen=True)
class LinkObj(Optioned):
    """Two endpoints joined by ``mode`` (a name in nestlab.links).

    ``underlay``: for overlays, per end its host and the local and remote host addresses.
    ``paths``: for an MPT tunnel, (interface, a's address, b's address, weight) per path.
    """

    a: EndObj
    b: EndObj
    mtu: int | None = None
    mode: str = "veth"
    # What each end sends is shaped by (key, value) pairs; changed live, never by recreating the link.
    shape_a: Pairs = field(default=(), compare=False)
    shape_b: Pairs = field(default=(), compare=False)
    state: str | None = field(default=None, compare=False)
    options: Options = ()
    underlay: tuple[tuple[str, str, str], ...] = ()
    paths: tuple[tuple[str, str, str, int], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.a.ref}={self.b.ref}"

    @property
    def ends(self) -> tuple[EndObj, EndObj]:
        return self.a, self.b

    @property
    def deps(self) -> set[str]:
        return {self.a.node, self.b.node, *(u[0] for u in self.underlay)}


@dataclass(frozen=True)
class AttachObj(Optioned):
    """A node's interface hung on ``host``'s interface ``parent``, by ``mode`` (a name in nestlab.links).

    ``host`` None means the real machine (a real ``parent`` interface).
    """

    end: EndObj
    mode: str
    host: str | None
    parent: str | None = None
    options: Options = ()
    mtu: int | None = None
    gateway: str | None = None
    shape: Pairs = ()  # what the node's end does to what it sends (the link's params)

    @property
    def key(self) -> str:
        return self.end.ref

    @property
    def deps(self) -> set[str]:
        return {self.end.node} | ({self.host} if self.host else set())


@dataclass
class Plan:
    nodes: dict[str, NodeObj] = field(default_factory=dict)
    links: dict[str, LinkObj] = field(default_factory=dict)
    attachments: dict[str, AttachObj] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [_plain(n) for n in self.nodes.values()],
            "links": [_plain(x) for x in self.links.values()],
            "attachments": [_plain(x) for x in self.attachments.values()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        nodes = [_build(NodeObj, n) for n in data["nodes"]]
        links = [_build(LinkObj, x) for x in data["links"]]
        attachments = [_build(AttachObj, x) for x in data.get("attachments", [])]
        return cls({n.name: n for n in nodes}, {x.key: x for x in links}, {x.key: x for x in attachments})

    @staticmethod
    def link_from_json(data: dict[str, Any], a: str, b: str) -> LinkObj | None:
        """Only the link between endpoints ``a`` and ``b`` (either order) of a plan in JSON form, or None."""
        for x in data["links"]:
            if {f"{x['a']['node']}:{x['a']['iface']}", f"{x['b']['node']}:{x['b']['iface']}"} == {a, b}:
                return _build(LinkObj, x)
        return None

    def machines(self) -> set[str]:
        """The emulated hosts (``hosts:``) of the plan."""
        return {n for n, o in self.nodes.items() if KINDS.get(o.kind).machine}

    def add(self, obj: LinkObj | AttachObj) -> None:
        if isinstance(obj, LinkObj):
            self.links[obj.key] = obj
        else:
            self.attachments[obj.key] = obj


_NESTED = {"a": EndObj, "b": EndObj, "end": EndObj, "bridges": HostBridge, "login": Login}


def _plain(obj: object) -> dict[str, Any]:
    """A plan object as JSON-ready data (what ``asdict`` gives, without its deep copies: the objects are frozen)."""
    out = dict(obj.__dict__)
    for name, value in out.items():
        if name in _NESTED:
            out[name] = [_plain(x) for x in value] if isinstance(value, tuple) else _plain(value)
    return out


_FIELDS: dict[type, set[str]] = {}
_T = TypeVar("_T", bound="DataclassInstance")


def _build(cls: type[_T], data: dict[str, Any]) -> _T:
    """A dataclass from its ``asdict`` form (lists back to tuples, nested objects rebuilt)."""

    def value(name: str, v: Any) -> Any:
        if name in _NESTED:
            return tuple(_build(_NESTED[name], x) for x in v) if isinstance(v, list) else _build(_NESTED[name], v)
        return _tuple(v)

    known = _FIELDS.get(cls) or _FIELDS.setdefault(cls, {f.name for f in fields(cls)})
    return cls(**{k: value(k, v) for k, v in data.items() if k in known})


def _tuple(v: Any) -> Any:
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v

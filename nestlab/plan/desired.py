"""The kernel objects a topology asks for: one namespace per node, one veth per link."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..model.addressing import assign
from ..model.load import node_kind
from ..model.schema import Topology


@dataclass(frozen=True)
class NodeObj:
    """A node: a network + UTS namespace; a ``bridge`` node also holds a bridge device of its name."""

    name: str
    kind: str
    sysctls: tuple[tuple[str, str], ...] = ()
    # Not kernel objects: changing them never recreates the node.
    env: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    exec: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class EndObj:
    node: str
    iface: str
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.node}:{self.iface}"


@dataclass(frozen=True)
class LinkObj:
    """A veth pair between two endpoints."""

    a: EndObj
    b: EndObj
    mtu: int | None = None

    @property
    def key(self) -> str:
        return f"{self.a.ref}={self.b.ref}"


@dataclass
class Plan:
    nodes: dict[str, NodeObj] = field(default_factory=dict)
    links: dict[str, LinkObj] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"nodes": [asdict(n) for n in self.nodes.values()], "links": [asdict(link) for link in self.links.values()]}

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        def tuples(d: dict) -> dict:
            return {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v for k, v in d.items()}

        nodes = [NodeObj(**tuples(n)) for n in data["nodes"]]
        links = [LinkObj(EndObj(**tuples(ln["a"])), EndObj(**tuples(ln["b"])), ln["mtu"]) for ln in data["links"]]
        return cls({n.name: n for n in nodes}, {ln.key: ln for ln in links})


def desired(topology: Topology, source: str = "<topology>") -> Plan:
    """Resolve kinds, defaults and automatic addresses into a :class:`Plan`."""
    body = topology.topology
    addresses = assign(topology, source)
    plan = Plan()
    for name, spec in body.nodes.items():
        kind = node_kind(topology, name)
        kind_defaults = body.kinds.get(kind) or body.kinds.get("host" if kind == "linux" else kind)
        layers = [body.defaults, kind_defaults, spec] if kind_defaults else [body.defaults, spec]
        sysctls: dict = {}
        env: dict = {}
        exec_: list[str] = []
        for layer in layers:
            sysctls.update(layer.sysctls)
            env.update(layer.env)
            exec_ = list(layer.exec) or exec_
        plan.nodes[name] = NodeObj(
            name,
            kind,
            tuple((k, str(v)) for k, v in sysctls.items()),
            tuple((k, str(v)) for k, v in env.items()),
            tuple(exec_),
        )
    for link in body.links:
        ends = []
        for ep in link.endpoints:
            node, iface = ep.split(":", 1)
            addrs = addresses.get((node, iface), {"ipv4": [], "ipv6": []})
            ends.append(EndObj(node, iface, tuple(addrs["ipv4"]), tuple(addrs["ipv6"])))
        obj = LinkObj(ends[0], ends[1], link.mtu)
        plan.links[obj.key] = obj
    return plan

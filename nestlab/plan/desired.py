"""The kernel objects a topology asks for.

* a namespace per node and per emulated host (``machine``), and per wire
  switch (``wireN``, a bridge);
* links: a veth pair (nodes, wires) or a VXLAN pair (one device per end,
  its UDP socket in the end's host);
* attachments: one interface of a node hung on its host (bridge, macvlan,
  ipvlan, or a real interface moved in: phys).

A ``phys`` attachment to an emulated NIC needs no object of its own: the
wire's end is simply created inside the node instead of its host.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field, fields, replace

from ..model.addressing import Segments
from ..model.errors import Problem, TopologyError
from ..model.load import node_kind
from ..model.modes import link_mode, node_host, parent_of, shares_host_stack
from ..model.nesting import is_flat
from ..model.schema import LinkParams, LinkSpec, Topology
from ..model.visibility import pair_link_names

VXLAN_OVERHEAD = 50  # outer Ethernet + IPv4 + UDP + VXLAN headers
MPT_OVERHEAD = 32  # outer IPv4 + UDP + GRE headers (RFC 8086)
MPTCP_ENDPOINTS_MAX = 8  # the kernel path manager's MPTCP_PM_ADDR_MAX per network namespace


@dataclass(frozen=True)
class HostBridge:
    """A Linux bridge in a host's namespace (bridge mode), with its NIC ``uplink`` or NAT gateway."""

    name: str
    uplink: str | None = None
    addresses: tuple[str, ...] = ()
    nat: bool = False
    publish: tuple[tuple[str, int, str], ...] = ()  # (proto, port, container address)


@dataclass(frozen=True)
class NodeObj:
    """A namespace.  ``kind``: linux, bridge (holds a bridge of its name), ovs, machine (an emulated host)."""

    name: str
    kind: str
    sysctls: tuple[tuple[str, str], ...] = ()
    # Not kernel objects: changing them never recreates the node.
    env: tuple[tuple[str, str], ...] = field(default=(), compare=False)
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
    runtime: str = "namespace"  # namespace: net+UTS only; isolated: + PID, mount, IPC; runc; docker
    image: str | None = None
    cgroup: bool = False  # has a cgroup of its own (limits, usage)
    resources: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # changed live, never by recreating
    # Multipath TCP: (subflows, add_addr_accepted, endpoint kind) and the endpoints as (address, device)
    mptcp: tuple = ()
    mptcp_endpoints: tuple[tuple[str, str], ...] = ()

    @property
    def deps(self) -> set[str]:
        return ({self.shares} if self.shares else set()) | ({self.parent} if self.parent else set())


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
    """Two endpoints joined by a veth pair, or by VXLAN (``underlay``: per end, host, local and remote IP)."""

    a: EndObj
    b: EndObj
    mtu: int | None = None
    mode: str = "veth"
    # What each end sends is shaped by (key, value) pairs; changed live, never by recreating the link.
    shape_a: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    shape_b: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    state: str | None = field(default=None, compare=False)
    vni: int | None = None
    port: int | None = None
    underlay: tuple[tuple[str, str, str], ...] = ()
    # mode mpt: the tunnel's paths as (interface, a's address, b's address, weight), and its scheduler
    paths: tuple[tuple[str, str, str, int], ...] = ()
    scheduler: str | None = None

    @property
    def key(self) -> str:
        return f"{self.a.ref}={self.b.ref}"

    @property
    def deps(self) -> set[str]:
        return {self.a.node, self.b.node, *(u[0] for u in self.underlay)}


@dataclass(frozen=True)
class AttachObj:
    """A node's interface hung on its host: ``mode`` bridge/macvlan/ipvlan/phys, on host NIC ``parent``.

    ``host`` None means the real machine (a real ``parent`` interface).
    """

    end: EndObj
    mode: str
    host: str | None
    parent: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    mtu: int | None = None
    gateway: str | None = None

    @property
    def key(self) -> str:
        return self.end.ref

    @property
    def options_dict(self) -> dict[str, str]:
        return dict(self.options)

    @property
    def deps(self) -> set[str]:
        return {self.end.node} | ({self.host} if self.host else set())


@dataclass
class Plan:
    nodes: dict[str, NodeObj] = field(default_factory=dict)
    links: dict[str, LinkObj] = field(default_factory=dict)
    attachments: dict[str, AttachObj] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "nodes": [asdict(n) for n in self.nodes.values()],
            "links": [asdict(x) for x in self.links.values()],
            "attachments": [asdict(x) for x in self.attachments.values()],
        }

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        nodes = [_build(NodeObj, n) for n in data["nodes"]]
        links = [_build(LinkObj, x) for x in data["links"]]
        attachments = [_build(AttachObj, x) for x in data.get("attachments", [])]
        return cls({n.name: n for n in nodes}, {x.key: x for x in links}, {x.key: x for x in attachments})

    def switches(self, kind: str) -> set[str]:
        return {n for n, o in self.nodes.items() if o.kind == kind}


_NESTED = {"a": EndObj, "b": EndObj, "end": EndObj, "bridges": HostBridge}


def _build(cls, data: dict):
    """A dataclass from its ``asdict`` form (lists back to tuples, nested objects rebuilt)."""
    def value(name, v):
        if name in _NESTED:
            return tuple(_build(_NESTED[name], x) for x in v) if isinstance(v, list) else _build(_NESTED[name], v)
        return _tuple(v)

    known = {f.name for f in fields(cls)}
    return cls(**{k: value(k, v) for k, v in data.items() if k in known})


def _tuple(v):
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


def _runtime(topology: Topology, name: str) -> str:
    """namespace (a network + UTS namespace), isolated (a nested component: + PID, mount, IPC), runc or docker."""
    spec = topology.topology.nodes[name]
    if spec.image or spec.runtime in ("runc", "docker"):
        return spec.runtime or "runc"
    return "isolated" if spec.component_of and not is_flat(topology, name) else "namespace"


def desired(topology: Topology, source: str = "<topology>") -> Plan:
    """Resolve kinds, defaults, hosts, modes and automatic addresses into a :class:`Plan`."""
    return _Builder(topology, source).build()


class _Builder:
    def __init__(self, topology: Topology, source: str):
        self.t = topology
        self.source = source
        self.body = topology.topology
        self.seg = Segments()
        self.plan = Plan()

    def build(self) -> Plan:
        for host in self.t.hosts:
            self._machine(host)
        self._nodes()
        wires = self._wires()
        links = self._links()
        members = self.seg.assign(self.t.ipv4_pool, self.source)

        def end(key: tuple) -> EndObj:
            m = members.get(key)
            return EndObj(key[0], key[1], tuple(m.ipv4), tuple(m.ipv6)) if m else EndObj(key[0], key[1])

        for (ka, kb, mtu, rate) in wires:
            shape = (("rate", rate),) if rate else ()
            self._add_link(LinkObj(end(ka), end(kb), mtu, shape_a=shape, shape_b=shape))
        self._host_bridges(members)
        for item in sorted(links, key=lambda item: item[0] == "link" and item[4] == "mpt"):  # tunnels after their paths
            if item[0] == "link" and item[4] == "mpt":
                self._add_link(self._tunnel(end(item[1]), end(item[2]), item[3]))
            elif item[0] == "link":
                _, ka, kb, spec, mode = item
                underlay, wire_mtu = self._underlay(ka[0], kb[0]) if mode == "vxlan" else ((), 0)
                if underlay and spec.mtu and spec.mtu > wire_mtu - VXLAN_OVERHEAD:
                    problem = Problem(("topology", "links"), f"vxlan link {ka[0]}-{kb[0]}: mtu {spec.mtu} does not fit the wire's {wire_mtu} minus {VXLAN_OVERHEAD} bytes of VXLAN headers; use at most {wire_mtu - VXLAN_OVERHEAD} or raise the wire's mtu")
                    raise TopologyError(self.source, [problem])
                mtu = spec.mtu or (wire_mtu - VXLAN_OVERHEAD if underlay else None)
                vni = spec.vni or (len([x for x in self.plan.links.values() if x.mode == "vxlan"]) + 1) if underlay else None
                shape_a, shape_b = shapes(spec.params)
                state = spec.params.state if spec.params else None
                port = spec.port or (4789 if underlay else None)
                self._add_link(LinkObj(end(ka), end(kb), mtu, mode, shape_a, shape_b, state, vni, port, underlay))
            else:
                _, key, spec, mode, host, parent, options = item
                gateway = None
                if mode == "bridge" and spec.nat:
                    gateway = members[(host, spec.bridge or "br0")].ipv4[0].split("/")[0]
                mtu = spec.mtu or (self._nic_mtu(host, parent) if mode == "bridge" and parent else None)
                obj = AttachObj(end(key), mode, host, parent, options, mtu, gateway)
                self.plan.attachments[obj.key] = obj
        self._l3_routes()
        self._mptcp()
        return self.plan

    # -- nodes and hosts -----------------------------------------------------------
    def _nodes(self) -> None:
        body = self.body
        for name, spec in body.nodes.items():
            kind = node_kind(self.t, name)
            kind_defaults = body.kinds.get(kind) or body.kinds.get("host" if kind == "linux" else kind)
            layers = [body.defaults, kind_defaults, spec] if kind_defaults else [body.defaults, spec]
            sysctls: dict = {}
            env: dict = {}
            exec_: list[str] = []
            for layer in layers:
                sysctls.update(layer.sysctls)
                env.update(layer.env)
                exec_ = list(layer.exec) or exec_
            host = node_host(self.t, name)
            shares = host if shares_host_stack(self.t, name) else None
            if is_flat(self.t, name):
                shares = spec.component_of
            elif shares:
                self._machine(host)
            self.plan.nodes[name] = NodeObj(
                name,
                kind,
                tuple((k, str(v)) for k, v in sysctls.items()),
                tuple((k, str(v)) for k, v in env.items()),
                tuple(exec_),
                host=host if (self.t.hosts or shares) else None,
                shares=shares,
                datapath=(spec.datapath or "auto") if kind == "ovs" else None,
                controller=spec.controller,
                flows=tuple(spec.flows),
                parent=spec.component_of,
                runtime=_runtime(self.t, name),
                image=spec.image,
                cgroup=bool(spec.resources or spec.components or spec.component_of or spec.image),
                resources=tuple((k, str(v)) for k, v in (spec.resources.model_dump(exclude_none=True) if spec.resources else {}).items()),
            )

    def _wires(self) -> list:
        """Wire ends as (key, key, mtu, rate); a wire of 1 or 3+ NICs gets a switch ``wireN``."""
        phys = {
            parent_of(self.t, ln): tuple(ln.endpoints[0].split(":", 1))
            for ln in self.body.links
            if link_mode(self.t, ln) == "phys"
        }
        specs = [(w.endpoints, w.params.mtu, w.params.rate, w.ipv4) for w in self.t.wires]
        declared = {tuple(ep.split(":", 1)) for w in self.t.wires for ep in w.endpoints}
        for ln in self.body.links:  # a parent NIC no wire declares: a NIC on a switch of its own
            if ln.parent and link_mode(self.t, ln) in ("bridge", "macvlan", "ipvlan", "phys"):
                host, nic = parent_of(self.t, ln)
                if host is not None and (host, nic) not in declared:
                    declared.add((host, nic))
                    specs.append(([f"{host}:{nic}"], ln.mtu, None, None))
        result = []
        for i, (endpoints, mtu, rate, ipv4) in enumerate(specs):
            ends = [phys.get(tuple(ep.split(":", 1)), tuple(ep.split(":", 1))) for ep in endpoints]
            for j, key in enumerate(ends):
                if key[0] in self.body.nodes and node_kind(self.t, key[0]) in ("bridge", "ovs"):
                    self.seg.join(key, ("sw", key[0]))  # a NIC moved into a switch node: its uplink port
                else:
                    self.seg.member(key, [ipv4[j]] if ipv4 else None)
            if len(ends) == 2:
                self.seg.join(ends[0], ends[1])
                result.append((ends[0], ends[1], mtu, rate))
                continue
            switch = f"wire{i}"
            self.plan.nodes[switch] = NodeObj(switch, "bridge")
            for j, key in enumerate(ends):
                self.seg.join(key, ("sw", switch))
                result.append((key, (switch, f"p{j}"), mtu, rate))
        for host in {k[0] for w in specs for k in (tuple(ep.split(":", 1)) for ep in w[0])}:
            self._machine(host)
        return result

    def _machine(self, host: str, sysctls: dict | None = None) -> None:
        spec = self.t.hosts.get(host)
        current = self.plan.nodes.get(host)
        merged = {**{k: str(v) for k, v in (spec.sysctls if spec else {}).items()}, **dict(current.sysctls if current else ()), **(sysctls or {})}
        self.plan.nodes[host] = NodeObj(host, "machine", tuple(sorted(merged.items())), bridges=current.bridges if current else ())

    # -- links and attachments ------------------------------------------------------
    def _radio_links(self) -> list:
        """Dynamics: a link per pair of mobile nodes, created down (the controller raises visible pairs)."""
        dyn = self.t.dynamics
        if dyn is None:
            return []
        mobile = mobile_nodes(self.t)
        shape = dyn.params.model_dump(exclude_none=True) if dyn.params else {}
        return [
            LinkSpec(endpoints=list(pair_link_names(a, b)), params=LinkParams(state="down", **shape))
            for i, a in enumerate(mobile)
            for b in mobile[i + 1 :]
        ]

    def _links(self) -> list:
        items = []
        for link in [*self.body.links, *self._radio_links()]:
            mode = link_mode(self.t, link)
            keys = [tuple(ep.split(":", 1)) for ep in link.endpoints]
            for j, key in enumerate(keys):
                if node_kind(self.t, key[0]) in ("bridge", "ovs"):
                    self.seg.join(key, ("sw", key[0]))
                else:
                    self.seg.member(key, _nth(link.ipv4, j), _nth(link.ipv6, j))
            if len(keys) == 2:
                self.seg.join(keys[0], keys[1])
                items.append(("link", keys[0], keys[1], link, mode))
                if mode == "vxlan":
                    for n in (keys[0][0], keys[1][0]):
                        self._machine(node_host(self.t, n))
                continue
            if mode == "phys" and parent_of(self.t, link)[0] is not None:
                continue  # the wire's end is created inside the node (see _wires)
            host, parent = parent_of(self.t, link) if link.parent else (node_host(self.t, keys[0][0]), None)
            if host is not None:
                self._machine(host)
            if mode == "bridge":
                self._attach_bridge(link, keys[0], host, parent)
            elif parent and host is not None:
                self.seg.join(keys[0], (host, parent))
            options = {
                "macvlan": (("mode", link.macvlan_mode or "bridge"),),
                "ipvlan": (("mode", link.ipvlan_mode or "l2"), ("flag", link.ipvlan_flag or "bridge")),
                "bridge": (("bridge", link.bridge or "br0"),),
            }.get(mode, ())
            items.append(("attach", keys[0], link, mode, host, parent, options))
        return items

    def _mptcp(self) -> None:
        """Nodes with ``mptcp:``: limits, and an endpoint on each of their addressed interfaces (tunnels aside;
        the kernel keeps at most 8, so the first 8)."""
        for name, spec in self.body.nodes.items():
            if not (spec.mptcp and spec.mptcp.enabled):
                continue
            ends = [e for ln in self.plan.links.values() if ln.mode != "mpt" for e in (ln.a, ln.b)]
            ends += [att.end for att in self.plan.attachments.values()]
            found = tuple((e.ipv4[0].split("/")[0], e.iface) for e in ends if e.node == name and e.ipv4)
            m = spec.mptcp
            sysctls = {**dict(self.plan.nodes[name].sysctls), "net.mptcp.enabled": "1"}
            if m.scheduler != "default":
                sysctls["net.mptcp.scheduler"] = m.scheduler
            self.plan.nodes[name] = replace(self.plan.nodes[name], sysctls=tuple(sysctls.items()),
                                            mptcp=(m.subflows, m.add_addr_accepted, m.endpoints), mptcp_endpoints=found[:MPTCP_ENDPOINTS_MAX])

    def _tunnel(self, a: EndObj, b: EndObj, spec) -> LinkObj:
        """An MPT tunnel between a and b over the links named in ``multipath.paths``."""
        mp = spec.multipath
        paths, mtus = [], []
        for i, name in enumerate(mp.paths):
            link = self.plan.links.get(f"{a.node}:{name}={b.node}:{name}") or self.plan.links.get(f"{b.node}:{name}={a.node}:{name}")
            ends = (link.a, link.b) if link.a.node == a.node else (link.b, link.a)
            if not (ends[0].ipv4 and ends[1].ipv4):
                raise TopologyError(self.source, [Problem(("topology", "links"), f"mpt path {name} between {a.node} and {b.node} has no IPv4 addresses")])
            paths.append((name, ends[0].ipv4[0].split("/")[0], ends[1].ipv4[0].split("/")[0], mp.weights[i] if mp.weights else 1))
            mtus.append(link.mtu or 1500)
        return LinkObj(a, b, spec.mtu or min(mtus) - MPT_OVERHEAD, "mpt", paths=tuple(paths), scheduler=mp.scheduler)

    def _attach_bridge(self, link, key, host, parent) -> None:
        name = link.bridge or "br0"
        self.seg.join(key, ("hbr", host, name))
        if link.nat:
            self.seg.member((host, name))
            self.seg.join((host, name), ("hbr", host, name))
            self._machine(host, {"net.ipv4.ip_forward": "1"})
        if parent:
            self.seg.join((host, parent), ("hbr", host, name))

    def _host_bridges(self, members) -> None:
        """Record each host's bridges; an uplink NIC's address moves to its bridge."""
        found: dict[tuple[str, str], dict] = {}
        for link in self.body.links:
            if link_mode(self.t, link) != "bridge":
                continue
            node = link.endpoints[0].split(":", 1)[0]
            host, parent = parent_of(self.t, link) if link.parent else (node_host(self.t, node), None)
            name = link.bridge or "br0"
            entry = found.setdefault((host, name), {"uplink": None, "nat": False, "publish": []})
            entry["uplink"] = entry["uplink"] or parent
            entry["nat"] |= bool(link.nat)
            if link.publish:
                target = members[tuple(link.endpoints[0].split(":", 1))].ipv4[0].split("/")[0]
                entry["publish"] += [(p.split("/")[1], int(p.split("/")[0]), target) for p in link.publish]
        for (host, name), entry in found.items():
            addresses: tuple[str, ...] = ()
            if entry["nat"]:
                addresses = tuple(members[(host, name)].ipv4)
            elif entry["uplink"]:
                wire, nic = self._wire_of(host, entry["uplink"])
                addresses = nic.ipv4 + nic.ipv6
                bare = EndObj(nic.node, nic.iface)
                ends = (bare, wire.b) if nic is wire.a else (wire.a, bare)
                fixed = LinkObj(*ends, wire.mtu, shape_a=wire.shape_a, shape_b=wire.shape_b)
                self.plan.links[wire.key] = fixed
            bridge = HostBridge(name, entry["uplink"], addresses, entry["nat"], tuple(entry["publish"]))
            node = self.plan.nodes[host]
            self.plan.nodes[host] = NodeObj(node.name, node.kind, node.sysctls, bridges=node.bridges + (bridge,), routes=node.routes)

    def _l3_routes(self) -> None:
        """ipvlan l3/l3s containers answer no ARP: other hosts on the wire route to them via their host."""
        routes: dict[str, list[tuple[str, str]]] = {}
        for subnet, owners in self._host_addresses().items():
            for att in self.plan.attachments.values():
                if att.mode != "ipvlan" or att.options_dict["mode"] == "l2" or att.host not in owners:
                    continue
                nic = self._nic_address(att.host, att.parent)
                if nic is None or ipaddress.IPv4Address(nic) not in subnet:
                    continue
                for other in owners:
                    if other != att.host:
                        routes.setdefault(other, []).extend((f"{a.split('/')[0]}/32", nic) for a in att.end.ipv4)
        for host, entries in routes.items():
            node = self.plan.nodes[host]
            self.plan.nodes[host] = NodeObj(node.name, node.kind, node.sysctls, bridges=node.bridges, routes=tuple(entries))

    def _wire_of(self, host: str, nic: str) -> tuple[LinkObj, EndObj] | None:
        """The wire a host NIC is on, and the NIC's end of it."""
        for ln in self.plan.links.values():
            for e in (ln.a, ln.b):
                if (e.node, e.iface) == (host, nic):
                    return ln, e
        return None

    def _nic_address(self, host: str, nic: str) -> str | None:
        found = self._wire_of(host, nic)
        return found[1].ipv4[0].split("/")[0] if found and found[1].ipv4 else None

    def _underlay(self, a: str, b: str) -> tuple[tuple[tuple[str, str, str], ...], int]:
        """Per end of a VXLAN link: its host and the two host addresses on a wire both hosts share; and that wire's MTU."""
        ha, hb = node_host(self.t, a), node_host(self.t, b)
        for owners in self._host_addresses().values():
            if ha in owners and hb in owners:
                (ip_a, mtu), (ip_b, _) = owners[ha], owners[hb]
                return ((ha, ip_a, ip_b), (hb, ip_b, ip_a)), mtu
        problem = Problem(("topology", "links"), f"hosts {ha} and {hb} share no wire with IPv4 addresses, so the vxlan link {a}-{b} has no underlay; add a wire between them")
        raise TopologyError(self.source, [problem])

    def _host_addresses(self) -> dict:
        """``{subnet: {host: (address, wire MTU)}}`` for every host NIC (or uplinked bridge)."""
        result: dict = {}
        hosts = self.plan.switches("machine")
        for ln in self.plan.links.values():
            for e in (ln.a, ln.b):
                if e.node in hosts and e.ipv4:
                    iface = ipaddress.IPv4Interface(e.ipv4[0])
                    result.setdefault(iface.network, {}).setdefault(e.node, (str(iface.ip), ln.mtu or 1500))
        for n in hosts:
            for br in self.plan.nodes[n].bridges:
                if br.uplink and br.addresses:
                    iface = ipaddress.IPv4Interface(br.addresses[0])
                    found = self._wire_of(n, br.uplink)
                    mtu = (found[0].mtu or 1500) if found else 1500
                    result.setdefault(iface.network, {}).setdefault(n, (str(iface.ip), mtu))
        return result

    def _nic_mtu(self, host: str, nic: str) -> int | None:
        """The MTU of the wire a host NIC is on (a bridge port must match its uplink)."""
        found = self._wire_of(host, nic)
        return found[0].mtu if found else None

    def _add_link(self, obj: LinkObj) -> None:
        self.plan.links[obj.key] = obj


def mobile_nodes(topology: Topology) -> list[str]:
    """The nodes a ``dynamics:`` section moves: its ``nodes``, else every linux node."""
    dyn = topology.dynamics
    return list(dyn.nodes) if dyn and dyn.nodes else [n for n in topology.topology.nodes if node_kind(topology, n) == "linux"]


def shapes(params) -> tuple[tuple, tuple]:
    """Per-direction shapes (sorted (key, value) pairs) from a link's ``params``: common keys, then ``a``/``b``."""
    if params is None:
        return (), ()
    common = params.model_dump(exclude_none=True, exclude={"a", "b", "state"})
    result = []
    for side in (params.a, params.b):
        merged = {**common, **(side.model_dump(exclude_none=True) if side else {})}
        result.append(tuple(sorted((k, str(v)) for k, v in merged.items())))
    return result[0], result[1]


def _nth(values, j):
    return [values[j]] if values and j < len(values) and values[j] else None


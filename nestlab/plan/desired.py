"""Build the plan (:mod:`nestlab.plan.objects`) a topology asks for.

* a namespace per node and per emulated host (``machine``), and per wire switch (``wireN``,
  a bridge);
* wires: veth pairs between hosts' NICs (or NICs and a wire switch);
* every link: what its mode's module (nestlab/links) makes of it, once addresses are assigned.

The builder resolves kinds, defaults, hosts and automatic addresses; link modes call back into
it through the small surface documented on ``LinkMode``'s hooks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn

from ..model.addressing import Key, Member, Segments, exec_addressed
from ..model.endpoint import Endpoint
from ..model.errors import Problem, TopologyError
from ..model.modes import kind_defaults, link_mode, node_host, node_kind, parent_of, shares_host_stack
from ..model.nesting import is_flat
from ..model.ports import parse as parse_port
from ..model.schema import Topology
from ..model.schema.links import LinkParams, LinkSpec
from ..model.schema.machines import Nic
from ..model.schema.nodes import NodeSpec
from ..model.visibility import pair_link_names
from ..names import long_name
from ..plugins import Draft
from ..registry import KINDS, LINK_MODES
from .machine import ROOT, Machine
from .mgmt import Leases, login
from .objects import EndObj, LinkObj, NodeObj, Plan, pairs

MPTCP_ENDPOINTS_MAX = 8  # the kernel path manager's MPTCP_PM_ADDR_MAX per network namespace


def desired(topology: Topology, source: str = "<topology>", leases: Leases | None = None, machine: Machine = ROOT) -> Plan:
    """Resolve kinds, defaults, hosts, modes and automatic addresses into a :class:`Plan`; ``leases``: the
    management network's, as read when planning started (a topology with ``mgmt:`` needs them); ``machine``:
    what the machine it is made on allows (rootless mode: no cgroups; daemons root's unless other ids are mapped)."""
    return Builder(topology, source, leases, machine).build()


class Builder:
    """Builds one plan.  Link modes use: ``t``, ``plan``, ``seg``, ``members``, ``machine``, ``host_of``,
    ``attach_point``, ``later``, ``underlay``, ``wire_of``, ``nic_mtu``, ``nic_address``,
    ``host_addresses``, ``links_of``, ``fail`` and ``leases``."""

    def __init__(self, topology: Topology, source: str, leases: Leases | None = None, machine: Machine = ROOT):
        self.t = topology
        self.source = source
        self.leases = leases
        self.on = machine
        self.body = topology.topology
        self.seg = Segments()
        self.plan = Plan()
        self.members: dict[Key, Member] = {}
        self._later: list[Callable[[], None]] = []
        self._links = [*self.body.links, *self._radio_links()]

    def build(self) -> Plan:
        for host in self.t.hosts:
            self.machine(host)
        self._nodes()
        wires = self._wires()
        for link in self._links:
            self._join(link)
        for join in self._later:
            join()
        self.members = self.seg.assign(self.t.ipv4_pool, self.source)
        for ka, kb, mtu, rate in wires:
            shape = (("rate", rate),) if rate else ()
            self.plan.add(LinkObj(self._end(ka), self._end(kb), mtu, shape_a=shape, shape_b=shape))
        modes = LINK_MODES.values()
        for mode in modes:
            mode.prepare(self)
        moded = [(LINK_MODES.get(link_mode(self.t, link)), link) for link in self._links]
        for mode, link in sorted(moded, key=lambda pair: pair[0].stage):  # tunnels after their paths
            ends = [self._end(ep.key) for ep in link.endpoints]
            if link.macs:
                ends = [replace(end, mac=mac) for end, mac in zip(ends, link.macs)]
            obj = mode.build(self, link, ends)
            if obj is not None:
                self.plan.add(obj)
        for mode in modes:
            mode.finish(self)
        self._mptcp()
        self._named()
        return self.plan

    # -- what link modes call -------------------------------------------------------------
    def machine(self, host: str, sysctls: dict[str, str] | None = None) -> None:
        """Make sure the emulated host ``host`` is in the plan, with ``sysctls`` added to its own."""
        spec = self.t.hosts.get(host)
        current = self.plan.nodes.get(host)
        merged = {
            **{k: str(v) for k, v in (spec.sysctls if spec else {}).items()},
            **dict(current.sysctls if current else ()),
            **(sysctls or {}),
        }
        self.plan.nodes[host] = (
            replace(current, sysctls=tuple(sorted(merged.items())))
            if current
            else NodeObj(host, "machine", tuple(sorted(merged.items())))
        )

    def host_of(self, node: str) -> str:
        return node_host(self.t, node)

    def attach_point(self, link: LinkSpec) -> tuple[str | None, str | None]:
        """``(host, parent)`` of a one-ended link: its parent's owner and interface, else the node's host and None."""
        return parent_of(self.t, link) if link.parent else (node_host(self.t, link.endpoints[0].node), None)

    def later(self, join: Callable[[], None]) -> None:
        """Run ``join`` once every link has joined its segments (before addresses are assigned)."""
        self._later.append(join)

    def links_of(self, mode: str) -> list[LinkSpec]:
        return [ln for ln in self._links if link_mode(self.t, ln) == mode]

    def fail(self, message: str) -> NoReturn:
        raise TopologyError(self.source, [Problem(("topology", "links"), message)])

    def underlay(self, a: str, b: str) -> tuple[tuple[tuple[str, str, str], ...], int]:
        """Per end of an overlay between nodes a and b: its host and the two host addresses on a wire both hosts
        share; and that wire's MTU."""
        ha, hb = node_host(self.t, a), node_host(self.t, b)
        for owners in self.host_addresses().values():
            if ha in owners and hb in owners:
                (ip_a, mtu), (ip_b, _) = owners[ha], owners[hb]
                return ((ha, ip_a, ip_b), (hb, ip_b, ip_a)), mtu
        self.fail(
            f"hosts {ha} and {hb} share no wire with IPv4 addresses, so the link {a}-{b} has no underlay; add a wire between them"
        )

    def wire_of(self, host: str, nic: str) -> tuple[LinkObj, EndObj] | None:
        """The wire a host NIC is on, and the NIC's end of it."""
        for ln in self.plan.links.values():
            for e in ln.ends:
                if (e.node, e.iface) == (host, nic):
                    return ln, e
        return None

    def nic_mtu(self, host: str, nic: str) -> int | None:
        """The MTU of the wire a host NIC is on (a bridge port must match its uplink)."""
        found = self.wire_of(host, nic)
        return found[0].mtu if found else None

    def nic_address(self, host: str, nic: str) -> str | None:
        found = self.wire_of(host, nic)
        return found[1].ipv4[0].split("/")[0] if found and found[1].ipv4 else None

    def host_addresses(self) -> dict[ipaddress.IPv4Network, dict[str, tuple[str, int]]]:
        """``{subnet: {host: (address, wire MTU)}}`` for every host NIC (or uplinked bridge)."""
        result: dict[ipaddress.IPv4Network, dict[str, tuple[str, int]]] = {}
        hosts = self.plan.machines()
        for ln in self.plan.links.values():
            for e in ln.ends:
                if e.node in hosts and e.ipv4:
                    iface = ipaddress.IPv4Interface(e.ipv4[0])
                    result.setdefault(iface.network, {}).setdefault(e.node, (str(iface.ip), ln.mtu or 1500))
        for n in hosts:
            for br in self.plan.nodes[n].bridges:
                if br.uplink and br.addresses:
                    iface = ipaddress.IPv4Interface(br.addresses[0])
                    result.setdefault(iface.network, {}).setdefault(n, (str(iface.ip), self.nic_mtu(n, br.uplink) or 1500))
        return result

    # -- nodes, wires, links --------------------------------------------------------------
    def _end(self, key: tuple[str, str]) -> EndObj:
        m = self.members.get(key)
        return EndObj(key[0], key[1], tuple(m.ipv4), tuple(m.ipv6)) if m else EndObj(key[0], key[1])

    def _nodes(self) -> None:
        body = self.body
        for name, spec in body.nodes.items():
            kind = node_kind(self.t, name)
            defaults = kind_defaults(body, kind)
            layers = [body.defaults, defaults, spec] if defaults else [body.defaults, spec]
            sysctls: dict[str, Any] = {}
            env: dict[str, Any] = {}
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
                self.machine(host)
            own = KINDS.get(kind).plan(Draft(self.t.name, name, spec, bool(shares), self.t.hosts_ipv6, self.t))
            sysctls = {**own.pop("sysctls", {}), **sysctls}  # the node's own sysctls win
            binds = (*own.pop("binds", ()), *((b.source, b.target, b.read_only) for b in spec.binds))
            view = {"view": True, "binds": binds, "own_root": spec.own_root} if binds or spec.own_root or own.get("view") else {}
            made = own.pop("kind", kind)
            if self.on.daemons_as_root and KINDS.get(own.get("router") or made).guest_as_root:
                own["run_dirs"] = tuple((path, "root") for path, _user in own.get("run_dirs", ()))
            if self.t.mgmt is not None:  # how people and tools reach it
                own["login"] = login(self.t, name, made, self.source)
            self.plan.nodes[name] = NodeObj(
                name,
                made,
                pairs(sysctls),
                pairs(env),
                tuple(exec_),
                host=host if (self.t.hosts or shares) else None,
                shares=shares,
                parent=spec.component_of,
                runtime=_runtime(spec.runtime, spec.image, bool(spec.component_of) and not is_flat(self.t, name)),
                image=spec.image,
                cgroup=self.on.cgroups and wants_cgroup(spec),
                resources=pairs(spec.resources.model_dump(exclude_none=True) if spec.resources else {}),
                ports=tuple(parse_port(p) for p in spec.ports) if self.t.allow_host_ports else (),
                **{**view, **own},
            )

    def _wires(self) -> list[tuple[tuple[str, str], tuple[str, str], int | None, str | None]]:
        """Wire ends as (key, key, mtu, rate); a wire of 1 or 3+ NICs gets a switch ``wireN``."""
        moved = {
            parent_of(self.t, ln): ln.endpoints[0].key
            for ln in self.body.links
            if LINK_MODES.get(link_mode(self.t, ln)).moves_parent
        }
        specs = [(w.endpoints, w.params.mtu, w.params.rate, w.ipv4) for w in self.t.wires]
        declared = set(self.t.wired_nics)
        for ln in self.body.links:  # a parent NIC no wire declares: a NIC on a switch of its own
            if ln.parent and LINK_MODES.get(link_mode(self.t, ln)).ends == 1:
                host, nic = parent_of(self.t, ln)
                if host is not None and host not in self.body.nodes and (host, nic) not in declared:
                    declared.add(Nic(host, nic))
                    specs.append(([Endpoint(f"{host}:{nic}")], ln.mtu, None, None))
        result = []
        for i, (endpoints, mtu, rate, ipv4) in enumerate(specs):
            ends = [moved.get(ep.key, ep.key) for ep in endpoints]
            for j, key in enumerate(ends):
                if key[0] in self.body.nodes and KINDS.get(node_kind(self.t, key[0])).switch:
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
        for host in {ep.node for w in specs for ep in w[0]}:
            self.machine(host)
        return result

    def _join(self, link: LinkSpec) -> None:
        """Endpoints into address segments: switch ports join their switch, others are members; then the mode's joins."""
        mode = LINK_MODES.get(link_mode(self.t, link))
        keys = [ep.key for ep in link.endpoints]
        for j, key in enumerate(keys):
            if KINDS.get(node_kind(self.t, key[0])).switch:
                self.seg.join(key, ("sw", key[0]))
            else:
                self.seg.member(key, _nth(link.ipv4, j), _nth(link.ipv6, j), by_exec=key[1] in self._exec_addressed(key[0]))
        if mode.ends == 1:
            host, _parent = self.attach_point(link)
            if host is not None and host not in self.body.nodes and not (mode.real_host and not self.t.hosts):
                self.machine(host)
        mode.join(self, link, keys)

    def _exec_addressed(self, node: str) -> set[str]:
        """The interfaces of ``node`` its ``exec:`` addresses."""
        found = self.plan.nodes.get(node)
        return exec_addressed(found.exec) if found is not None else set()

    def _named(self) -> None:
        """Each node's long name, containerlab's (``clab-LAB-NODE``): how people and tools reach it."""
        for name, obj in self.plan.nodes.items():
            self.plan.nodes[name] = replace(obj, long=long_name(self.t.prefix, self.t.name, name))

    def _radio_links(self) -> list[LinkSpec]:
        """Dynamics: a link per pair of mobile nodes, created down (the controller raises visible pairs)."""
        dyn = self.t.dynamics
        if dyn is None:
            return []
        mobile = mobile_nodes(self.t)
        shape = dyn.params.model_dump(exclude_none=True) if dyn.params else {}
        return [
            LinkSpec(endpoints=[Endpoint(name) for name in pair_link_names(a, b)], params=LinkParams(state="down", **shape))
            for i, a in enumerate(mobile)
            for b in mobile[i + 1 :]
        ]

    def _mptcp(self) -> None:
        """Nodes with ``mptcp:``: limits, and an endpoint on each of their addressed interfaces (tunnels aside;
        the kernel keeps at most 8, so the first 8)."""
        for name, spec in self.body.nodes.items():
            if not (spec.mptcp and spec.mptcp.enabled):
                continue
            ends = [e for ln in self.plan.links.values() if ln.mode != "mpt" for e in ln.ends]
            ends += [att.end for att in self.plan.attachments.values()]
            found = tuple((e.ipv4[0].split("/")[0], e.iface) for e in ends if e.node == name and e.ipv4)
            m = spec.mptcp
            sysctls = {**dict(self.plan.nodes[name].sysctls), "net.mptcp.enabled": "1"}
            if m.scheduler != "default":
                sysctls["net.mptcp.scheduler"] = m.scheduler
            self.plan.nodes[name] = replace(
                self.plan.nodes[name],
                sysctls=tuple(sysctls.items()),
                mptcp=(m.subflows, m.add_addr_accepted, m.endpoints),
                mptcp_endpoints=found[:MPTCP_ENDPOINTS_MAX],
            )


def mobile_nodes(topology: Topology) -> list[str]:
    """The nodes a ``dynamics:`` section moves: its ``nodes``, else every end host (linux node)."""
    dyn = topology.dynamics
    return (
        list(dyn.nodes)
        if dyn and dyn.nodes
        else [n for n in topology.topology.nodes if KINDS.get(node_kind(topology, n)).endpoint]
    )


def wants_cgroup(spec: NodeSpec) -> bool:
    """Whether a node has a cgroup of its own where the machine allows it: limits, components or an image."""
    return bool(spec.resources or spec.components or spec.component_of or spec.image)


def _nth(values: list[str | None] | None, j: int) -> list[str] | None:
    value = values[j] if values and j < len(values) else None
    return [value] if value else None


def _runtime(runtime: str | None, image: str | None, nested_component: bool) -> str:
    """A node's runtime: the one it names; else runc for an image; else isolated for a nested component; else namespace."""
    if runtime:
        return runtime
    if image:
        return "runc"
    return "isolated" if nested_component else "namespace"

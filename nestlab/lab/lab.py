"""A lab in Python: a topology built from a file or in code, and what it offers once it runs.

A :class:`Lab` checks what it is given and plans it; deploying, inspecting and removing it are its
site's (nestlab/sites: this machine, through nestlab/engine; SSH servers; Kubernetes), to which it
hands one value, its :attr:`~Lab.blueprint` (nestlab/plan/blueprint.py), and whose answer it returns (a
deploy's: the blueprint as the site made it, which the lab holds from then on).
Its nodes (node.py) run commands where they run; its links (link_handle.py) change while it runs.

Example (run as root)::

    from nestlab import Lab

    lab = Lab("demo")
    lab.add_node("h1")
    lab.add_node("h2")
    lab.add_node("s1", kind="bridge")
    lab.add_link("h1:eth1", "s1:p1", ipv4=["10.0.0.1/24", None])
    lab.add_link("h2:eth1", "s1:p2")          # address picked from 10.0.0.0/24
    with lab.deployed():
        print(lab.nodes["h1"].cmd("ping -c1 " + lab.nodes["h2"].intf("eth1").ip))
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..engine import events, gc_pause, state
from ..engine.routers import saved as routers_saved
from ..errors import LabError
from ..model.endpoint import Endpoint
from ..model.errors import Problem, TopologyError
from ..model.overrides import Overrides
from ..plan.blueprint import Blueprint
from ..plan.objects import Plan
from ..registry import KINDS
from .node import Node

# Checking, planning and applying are imported when first used: a command on a running lab
# (exec, inspect, destroy) reads the recorded plan and never needs the schema (pydantic).
if TYPE_CHECKING:
    from ..apply.applier import Progress
    from ..model.schema import Topology
    from ..model.servers import Inventory
    from ..plan.diff import Changes
    from ..plugins import ExecReport
    from ..sites.seam import Deployed, Report, Site
    from .link_handle import LinkHandle


class Lab:
    """A topology (from a file, text, data or built in code) or a running lab (:meth:`running`); ``lab.nodes[name]``
    gives :class:`Node` objects.  :meth:`deploy`, :meth:`inspect` and :meth:`destroy` ask the lab's site.

    Building in code checks each addition cheaply; the whole topology is
    checked (and addresses assigned) when the plan is first needed.
    """

    _made_in_cluster: float | None = None  # when a lab found in a cluster (:meth:`at`) was last made or changed
    _site: Site | None = None  # where it runs, when it was handed one (a lab an operator made)
    _raw: dict[str, Any] | None = None  # its document while code changes it (add_node, ...), until a blueprint is asked for

    def __init__(self, name: str, *, ipv4_pool: str | None = "10.200.0.0/16"):
        from ..model.load import load_data

        raw: dict[str, Any] = {"name": name, "ipv4_pool": ipv4_pool, "topology": {"nodes": {}, "links": []}}
        self._blueprint = Blueprint.of(load_data(raw, "<python>"))

    @classmethod
    def of(cls, blueprint: Blueprint, site: Site | None = None) -> Lab:
        """The lab ``blueprint`` describes (at ``site``, when it was handed one)."""
        lab = cls.__new__(cls)
        lab._blueprint, lab._site = blueprint, site
        return lab

    # -- building ---------------------------------------------------------------
    @classmethod
    @gc_pause.paused()
    def from_file(
        cls,
        path: str | os.PathLike[str],
        vars_files: Sequence[str | os.PathLike[str]] = (),
        servers: str | os.PathLike[str] | Inventory | None = None,
        overrides: Overrides | None = None,
    ) -> Lab:
        """Load and check a topology file; errors name file, line and column.  A Go-template topology
        (containerlab's) is rendered with ``vars_files``, or the ``NAME_vars.yml`` beside it.  ``servers``:
        an inventory (its file, or as :func:`~nestlab.model.servers.load_inventory` read it) whose ``servers:``
        (and ``stitch:``) replace the file's (docs/servers.md); ``overrides``: what a command line changes in
        it (another name, only some nodes, ...).  The file is checked once, with the inventory's servers."""
        from ..model.load import load_file
        from ..model.servers import Inventory, load_inventory

        if servers is not None:
            inventory = servers if isinstance(servers, Inventory) else load_inventory(servers)
            overrides = replace(overrides or Overrides(), servers=inventory)
        files = [os.fspath(f) for f in vars_files]
        return cls.of(Blueprint.of(load_file(os.fspath(path), files, overrides)))  # a Kathará lab's folder: its lab.conf

    @classmethod
    def from_document(cls, data: dict[str, Any], source: str, overrides: Overrides | None = None) -> Lab:
        """A lab from topology data as :meth:`document` gives it (e.g. a running lab's, changed by ``overrides``)."""
        from ..model.load import load_data

        return cls.of(Blueprint.of(load_data(copy.deepcopy(data), source, overrides)))

    @classmethod
    def from_text(cls, text: str, source: str = "<text>") -> Lab:
        """Load and check a topology given as YAML text (benchmarks generate theirs)."""
        from ..model.load import load_text

        return cls.of(Blueprint.of(load_text(text, source)))

    @classmethod
    def running(cls, name: str) -> Lab:
        """The lab ``name`` as it was deployed (from its state on this machine).  While a deploy
        changes it, the state holds what ran before the change, which is there to use meanwhile."""
        current = state.read(name)
        if current is None or not (current.status == "running" or (current.status == "deploying" and current.plan.nodes)):
            raise LabError(f"no lab named '{name}' is running here (`nestlab inspect --all` lists labs)")
        return cls.of(Blueprint.recorded(current))

    @classmethod
    def at(cls, blueprint: Blueprint, site: Site, changed: float | None = None) -> Lab:
        """The lab ``blueprint`` asks for, running at ``site`` with no record on this machine (an operator's lab, found
        through its cluster: nestlab/operator/found.py); ``changed``: when it was last made or changed there."""
        lab = cls.of(blueprint, site)
        lab._made_in_cluster = changed
        return lab

    @property
    def blueprint(self) -> Blueprint:
        """The lab as one value to be made: what its site deploys (a change to the lab makes a new one); once
        deployed, as its site made it (on this machine: handed out with the machine and its leases, and planned)."""
        if self._raw is not None:  # changed in code since: a new blueprint of the changed document
            was = self._blueprint
            self._blueprint = Blueprint(self._raw["name"], was.source, self._raw, was.notices, was.located, author=was.author)
            self._raw = None
        return self._blueprint

    @property
    def source(self) -> str:
        """The file it came from, or "<python>", "<text>", ..."""
        return self._blueprint.source

    @property
    def notices(self) -> list[Problem]:
        """Keys of its file accepted but ignored, ..."""
        return list(self._blueprint.notices)

    @property
    def topology(self) -> Topology:
        return self.blueprint.topology

    @property
    def plan(self) -> Plan:
        """The kernel objects this lab asks for (kinds resolved, addresses assigned)."""
        return self.blueprint.plan

    @property
    def name(self) -> str:
        return self._raw["name"] if self._raw is not None else self._blueprint.name

    @property
    def nodes(self) -> dict[str, Node]:
        """Every node by name, components included (``"drone1/gnab"``)."""
        if not self.blueprint.was_checked and self.blueprint.planned is not None:  # a running lab: its recorded plan knows them
            return {name: Node(self, name) for name, obj in self.blueprint.plan.nodes.items() if not KINDS.get(obj.kind).machine}
        return {name: Node(self, name) for name in self.topology.topology.nodes}

    @property
    def hosts(self) -> dict[str, Node]:
        """The emulated hosts (``hosts:``, or the implicit ``local`` when something needs it)."""
        return {name: Node(self, name) for name, obj in self.plan.nodes.items() if KINDS.get(obj.kind).machine}

    def add_node(self, name: str, kind: str = "linux", **spec: Any) -> Node:
        """Add a node (``kind`` linux or bridge; ``exec``, ``sysctls``, ``env`` as in the file)."""
        from pydantic import ValidationError

        from ..model.schema.nodes import NodeSpec

        path = ("topology", "nodes", name)
        if name in self.document()["topology"]["nodes"]:
            raise TopologyError(self.source, [Problem(path, f"node '{name}' already exists")])
        try:
            NodeSpec.model_validate({"kind": kind, **spec})
        except ValidationError as exc:
            raise TopologyError(self.source, [Problem(path + tuple(e["loc"]), e["msg"]) for e in exc.errors()]) from None
        self._draft()["topology"]["nodes"][name] = {"kind": kind, **spec}
        return Node(self, name)

    def link(self, a: str, b: str) -> LinkHandle:
        """A running link between endpoints ``a`` and ``b``, for live changes: ``.set(rate="10mbit")``."""
        from .link_handle import LinkHandle

        return LinkHandle(self, a, b)

    def links_shown(self, a: str | None = None, b: str | None = None) -> list[dict[str, Any]]:
        """Each running link's shaping as planned and as the kernel has it (only the link between ``a`` and ``b``,
        when given): what :meth:`LinkHandle.show <nestlab.lab.link_handle.LinkHandle.show>` says, for all at once."""
        from ..engine.link_changes import shown

        return shown(self, a, b)

    def add_host(self, name: str, **spec: Any) -> None:
        """Declare an emulated physical host (``sysctls`` as in the file); nodes go on it with ``host=``."""
        self._draft().setdefault("hosts", {})[name] = spec

    def add_wire(self, *endpoints: str, rate: str | None = None, mtu: int | None = None) -> None:
        """Cable (two ``"host:nic"``) or switch (one, three or more) between hosts' NICs."""
        params = {k: v for k, v in (("rate", rate), ("mtu", mtu)) if v is not None}
        self._draft().setdefault("wires", []).append({"endpoints": list(endpoints), "params": params})

    def add_link(
        self, *endpoints: str, ipv4: list[str | None] | None = None, ipv6: list[str | None] | None = None, **options: Any
    ) -> None:
        """Join endpoints ``"node:iface"``: two for a veth (or ``mode="vxlan"``), one for an attachment.

        ``options`` are the link keys of the file: ``mtu``, ``mode``, ``parent``,
        ``macvlan_mode``, ``ipvlan_mode``, ``nat``, ``vni``...  Addresses: one per
        endpoint (None = automatic).
        """
        links = self.document()["topology"]["links"]
        nodes = self.document()["topology"]["nodes"]
        for j, endpoint in enumerate(map(Endpoint, endpoints)):
            node, _, component = endpoint.node.partition("/")
            if node not in nodes or (component and component not in (nodes[node].get("components") or {})):
                path = ("topology", "links", len(links), "endpoints", j)
                raise TopologyError(self.source, [Problem(path, f"node '{endpoint.node}' is not defined")])
        extra = {k: v for k, v in (("ipv4", ipv4), ("ipv6", ipv6), *options.items()) if v is not None}
        self._draft()["topology"]["links"].append({"endpoints": list(endpoints), **extra})

    def _draft(self) -> dict[str, Any]:
        """The document to change: a copy of the blueprint's at the first change (a blueprint handed out keeps the
        data it was made of); the next blueprint is made of it."""
        if self._raw is None:
            self._raw = copy.deepcopy(self._blueprint.document)
        return self._raw

    # -- lifecycle ----------------------------------------------------------------
    def site(self) -> Site:
        """Where the lab runs: the site it was handed (an operator's lab), else as its record says (this machine
        when there is none); a deploy goes where :func:`nestlab.sites.chosen` says."""
        from .. import sites

        return self._site or sites.of(self.name)

    def deploy(self, progress: Progress | None = None, on_exec: ExecReport | None = None, site: Site | None = None) -> Deployed:
        """Have ``site`` (default: the site a deploy goes to, :func:`nestlab.sites.chosen`: this machine or the
        file's ``servers:``) create what is missing and remove what is no longer wanted; returns what it did: what
        was changed here (``.changes``) or where each node went (``.partition``), and ``.notes`` on what it left
        out.  The lab holds the blueprint as the site made it from then on.

        Deploying an already running, identical lab changes nothing.
        """
        from .. import sites

        done = (site or self._site or sites.chosen(self.blueprint)).deploy(self.blueprint, progress, on_exec)
        self._blueprint = done.blueprint or self._blueprint
        return done

    def without(self, nodes: list[str]) -> Changes:
        """Remove ``nodes`` (and the links ending on them) from this running lab; the rest keeps running."""

        unknown = [n for n in nodes if n not in self.plan.nodes]
        if unknown:
            raise LabError(f"lab {self.name} has no node {', '.join(unknown)}")
        keep = frozenset(n for n in self.document()["topology"]["nodes"] if n not in nodes)
        changes = Lab.from_document(self.document(), self.source, Overrides(nodes=keep)).deploy().changes
        assert changes is not None  # a running lab's change is made where it runs: here
        return changes

    def inspect(self, only: set[str] | None = None) -> Report:
        """The lab as it runs, as its site reports it: each node (``only``: just those) with its namespace, state
        and live interfaces, and where it runs for a lab on servers or pods."""
        return self.site().inspect(self.blueprint, only)

    def document(self) -> dict[str, Any]:
        """The checked topology as data, as the state file holds it (read it, do not change it)."""
        return self._raw if self._raw is not None else self._blueprint.document

    def problem(self, path: tuple[str | int, ...], message: str) -> Problem:
        """A problem at ``path`` of the lab's file, with its line and column where the file is known."""
        return self.blueprint.problem(path, message)

    def save(self, to: str | os.PathLike[str] | None = None, only: set[str] | None = None) -> dict[str, str]:
        """Write each router's running configuration (``show running-config``) over its frr.conf in the
        lab's folder, and into ``to``/NODE/frr.conf when given (as ``clab save``); returns the files by node.
        ``only``: those routers alone."""

        routers = {name: Node(self, name).popen for name, obj in self.plan.nodes.items() if obj.router == "frr"}
        return routers_saved(self.name, {n: p for n, p in routers.items() if only is None or n in only}, to)

    def destroy(self, folder_too: bool = False) -> int:
        """Have the lab's site remove every object of it (and any process inside it), wherever it runs; returns
        the namespaces removed on this machine.  ``folder_too``: also the lab directory beside its file
        (clab-LAB/), as ``destroy --cleanup``."""
        from .. import sites

        with state.locked(self.name):
            return self._site.remove(folder_too) if self._site is not None else sites.remove(self.name, folder_too)

    @contextmanager
    def deployed(self) -> Iterator[Lab]:
        """Deploy for the ``with`` block and always destroy afterwards, even on errors."""
        try:
            self.deploy()
            yield self
        finally:
            self.destroy()

    def changed(self) -> float | None:
        """When the running lab was last deployed or changed (``time.time()``): its record's time or its last live
        change's (a NestLab's: its Ready condition's); None when it does not run here."""
        if self._made_in_cluster is not None:
            return self._made_in_cluster
        current = state.read(self.name)
        if current is None:
            return None
        return float(max([current.created, *(e["applied"] for e in events.read(self.name) if e.get("applied"))]))

    def is_running(self) -> bool:
        """Whether this machine's record of the lab says it runs."""
        current = state.read(self.name)
        return bool(current and current.status == "running")

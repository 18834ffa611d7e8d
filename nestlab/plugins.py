"""What the plug-ins (node kinds, link modes, runtimes, sites) are handed or must be, as typed Protocols.

A plug-in's hooks take one of these, and may use only what it lists: the model's view of a
topology while a file is checked (:class:`Checking`), the planner while plan objects are built
(:class:`Planning`), and the Applier while kernel objects are made (:class:`Applying`).  The
Applier (nestlab/apply) implements :class:`Applying`; the planner (nestlab/plan/desired.py)
:class:`Planning`; the model (nestlab/model/modes.py) :class:`Checking`.  Two records travel the
same way: :class:`Draft` (a node, as its kind plans it) and :class:`KernelFeature` (what a link
mode needs of the kernel).  A site (nestlab/sites, its seam in sites/seam.py) hands out a :class:`Remote`
for a node that runs elsewhere; a deploy reports to a :data:`Progress` and an :data:`ExecReport`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from .backends.kernel.cgroups import Tree
    from .backends.kernel.netlink import Request
    from .model.addressing import Segments
    from .model.errors import Path, Problem
    from .model.schema import Topology
    from .model.schema.links import LinkSpec
    from .model.schema.nodes import NodeSpec
    from .plan.mgmt import Leases
    from .plan.objects import EndObj, LinkObj, NodeObj, Plan

Progress = Callable[[str, int, int], None]  # (phase, done, total) while a deploy makes a lab
ExecReport = Callable[[str, str, int, str], None]  # (node, command, exit code, output) of each exec: command


@dataclass(frozen=True)
class Draft:
    """What the planner knows of a node when its kind plans it."""

    lab: str
    name: str
    spec: NodeSpec
    shares: bool  # it uses its host's network stack (mode: none)
    ipv6: bool | str  # the lab's IPv6 choice for hosts: True, "quiet" or False (model/ipv6.py)
    topology: Topology | None = None  # the whole checked file (a wireless medium reads its stations' keys)


class Checking(Protocol):
    """The model, while it checks a file: a link mode's :meth:`check` asks it about nodes and links."""

    topology: Topology

    def problem(self, path: Path, message: str) -> Problem: ...
    def kind(self, node: str) -> str: ...
    def host(self, node: str) -> str: ...
    def shares_stack(self, node: str) -> bool: ...
    def parent_of(self, link: LinkSpec) -> tuple[str | None, str]: ...


class Planning(Protocol):
    """The planner, while it turns a topology into plan objects."""

    t: Topology  # the checked topology
    plan: Plan
    seg: Segments
    members: dict[Any, Any]
    source: str
    leases: Leases | None  # the management network's, read when planning started (None: not read, no mgmt:)

    def machine(self, host: str, sysctls: dict[str, str] | None = None) -> None: ...
    def host_of(self, node: str) -> str: ...
    def attach_point(self, link: LinkSpec) -> tuple[str | None, str | None]: ...
    def later(self, join: Callable[[], None]) -> None: ...
    def links_of(self, mode: str) -> list[LinkSpec]: ...
    def fail(self, message: str) -> NoReturn: ...
    def underlay(self, a: str, b: str) -> tuple[tuple[tuple[str, str, str], ...], int]: ...
    def wire_of(self, host: str, nic: str) -> tuple[LinkObj, EndObj] | None: ...
    def host_addresses(self) -> dict[Any, Any]: ...
    def nic_mtu(self, host: str, nic: str) -> int | None: ...
    def nic_address(self, host: str, nic: str) -> str | None: ...


class Applying(Protocol):
    """The Applier, while it makes one lab's kernel objects; requests to a namespace are batched until :meth:`flush`."""

    CHUNK: int  # most namespace fds one batch should name
    lab: str
    alias: str  # the owner marker every interface of the lab carries
    nodes: dict[str, NodeObj]
    progress: Callable[[str, int, int], None]  # (phase, done, total)

    @property
    def tree(self) -> Tree: ...
    def path(self, node: str | None) -> str: ...
    def fd(self, node: str | None) -> int: ...
    def queue(self, node: str | None, *reqs: Request) -> int: ...
    def flush(self) -> dict[str | None, list[int]]: ...
    def run(self, node: str | None, *reqs: Request) -> list[int]: ...
    def run_quiet(self, node: str | None, req: Request, quiet: bool) -> None: ...
    def address(
        self, ends: list[EndObj], routes: dict[str, str] | None = None, up: Sequence[EndObj] = (), nodad: bool = False
    ) -> None: ...
    def bridge(self, node: str) -> int | None: ...
    def popen(self, node: str, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]: ...


class Keys(Mapping[str, tuple[Any, dict[str, Any]]]):
    """A plug-in's keys (name -> (annotation, pydantic Field's arguments)) read from ``table()`` when first asked: for
    keys whose types are pydantic models, which a topology's check loads and a look at a running lab does not."""

    def __init__(self, table: Callable[[], Mapping[str, tuple[Any, dict[str, Any]]]]) -> None:
        self._table = table

    def __getitem__(self, key: str) -> tuple[Any, dict[str, Any]]:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


@dataclass(frozen=True)
class KernelFeature:
    """What ``nestlab doctor`` probes in a scratch namespace: a link kind (pyroute2 ``link add`` keywords,
    ``"link": "parent"`` for a device on a parent), or a sysctl that must exist once ``module`` is loaded."""

    config: str
    link: dict[str, Any] | None = None
    sysctl: str | None = None
    module: str | None = None


class Remote(Protocol):
    """Where commands of one share of a lab run, as a local process standing for each: an SSH server
    (``backends.remote.ssh.Remote``) or a pod (``backends.remote.pod.PodRemote``)."""

    name: str

    def nestlab_cmd(self, *args: str) -> list[str]: ...
    def popen(self, args: Sequence[str], tty: bool = False, stream: bool = False, **kwargs: Any) -> subprocess.Popen[Any]: ...
    def run(
        self, args: Sequence[str], stdin: str | None = None, timeout: float = 600, tty: bool = False
    ) -> subprocess.CompletedProcess[Any]: ...
    def close(self) -> None: ...

"""What a site is (:class:`Site`), what it is handed (a :class:`~nestlab.plan.blueprint.Blueprint`) and what it
answers (:class:`Deployed`, :class:`Report`): the seam every place to run labs implements (nestlab/sites).

It lives beside the sites rather than in nestlab/plugins.py because it names the blueprint, which the planner
(below the seams) makes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, TypedDict

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Changes, Step
    from ..plan.objects import Plan
    from ..plan.partition import Partition
    from ..plugins import ExecReport, Progress, Remote

Json = str | int | float | bool | None | list["Json"] | dict[str, "Json"]  # what JSON holds


@dataclass(frozen=True)
class Deployed:
    """What a site's deploy did: on this machine, what was changed (``changes``); on servers or pods, where
    each node went (``partition``); ``notes``: what it left out (cgroup limits in rootless mode); ``blueprint``:
    the lab as it was made (handed out to this machine and planned), when the site planned it."""

    changes: Changes | None = None
    partition: Partition | None = None
    notes: tuple[str, ...] = ()
    blueprint: Blueprint | None = None


@dataclass(frozen=True)
class Done:
    """What a command on a running lab did at its site: its exit code, and a line saying what was done on this
    machine (None when the shares' own output said it)."""

    code: int = 0
    said: str | None = None


Say = Callable[[str], None]  # a line for the person at the command (what is starting, ...)
Value = str | int | float  # a link setting's value (rate "10mbit", mtu 1400, ...)


class Report(TypedDict):
    """A lab as ``inspect`` shows it: each node (and host, switch) with its interfaces, as JSON data."""

    lab: str
    source: str | None
    nodes: list[dict[str, Json]]


class Site(Protocol):
    """Where one lab runs (nestlab/sites): this machine, SSH servers or Kubernetes; read from the lab's record
    (engine/where.py).  Every command on a lab goes through its site, the same way on each."""

    lab: str  # the lab's name
    data: dict[str, Any]  # what its record holds of it (engine/where.py): the servers, the pods, ...

    @property
    def name(self) -> str: ...  # the site's word in the record (local, ssh, k8s)
    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed: ...
    def check(self, blueprint: Blueprint, machine: bool = True) -> Blueprint: ...
    def preview(self, blueprint: Blueprint) -> list[Step]: ...
    def remove(self, folder_too: bool = False) -> int: ...
    def where(self) -> str: ...
    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report: ...
    def remote(self, ref: str) -> Remote | None: ...
    def popen(self, plan: Plan, node: str, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]: ...
    def shares(self) -> dict[str, Remote]: ...
    def removal(self, count: int) -> str: ...
    def states(self, blueprint: Blueprint) -> dict[str, str]: ...
    def capture(
        self,
        ends: list[tuple[str, str]],
        into: str,
        bpf: str | None,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done: ...
    def events(
        self,
        out: IO[bytes],
        fmt: str,
        since: str | None,
        follow: bool,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done: ...
    def link_set(
        self, blueprint: Blueprint, a: str, b: str, params: dict[str, Value], direction: str, out: IO[bytes]
    ) -> Done: ...
    def power(
        self,
        blueprint: Blueprint,
        action: str,
        refs: list[str],
        exec_too: bool,
        out: IO[bytes],
        on_exec: ExecReport | None,
    ) -> Done: ...

"""A lab to be made, as one value: what the Python API (``nestlab.lab.Lab``) hands a site to deploy.

A :class:`Blueprint` holds the lab's name, the file it came from, its document (the checked topology
as data, as the lab's state record holds it), the notices about it and where each of its keys came
from; its checked :attr:`~Blueprint.topology` and its :attr:`~Blueprint.plan` are worked out once,
when first asked for (a running lab's blueprint carries the plan it was deployed with and checks its
document again only if something asks for the topology).  A lab with a management network is planned
against that network's :attr:`~Blueprint.leases` and for the :attr:`~Blueprint.machine` it is made on
(plan/machine.py), which whoever hands the blueprint out to be planned reads (``nestlab.lab.Lab``):
planning reads no file.  Nothing in it changes once it is made: a changed
lab is a new blueprint.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from ..model.errors import Problem, TopologyError
from .machine import ROOT, Machine

if TYPE_CHECKING:
    from ..model.load import Loaded
    from ..model.schema import Topology
    from ..model.yamlsource import Located
    from .mgmt import Leases
    from .objects import Plan


class Record(Protocol):
    """What a lab's record on this machine holds of it (``engine.state.LabState``)."""

    source: str | None
    topology: dict[str, Any]
    plan: Plan


@dataclass(frozen=True, eq=False)
class Blueprint:
    """One lab to be made (or as it was made): read it, do not change it."""

    name: str
    source: str  # the file it came from, or "<python>", "<text>", ...
    document: dict[str, Any]  # the topology as data, groups and components applied (the state record's)
    notices: tuple[Problem, ...] = ()  # keys accepted but ignored, ...
    located: Located | None = None  # where each key came from: planning's problems get file:line:col
    checked: Topology | None = None  # the topology, when it is already checked
    planned: Plan | None = None  # the plan, when it is known (a running lab's, live changes included)
    leases: Leases | None = None  # its management network's, as read when it was handed out to be planned
    machine: Machine = ROOT  # what the machine lets it be (rootless mode's limits), read where it was handed out
    author: int | None = None  # the uid owning the file it was read from: the lab directory is theirs in their folder

    @classmethod
    def of(cls, loaded: Loaded) -> Blueprint:
        """The lab a loaded (checked) topology describes, with its notices and where each key came from."""
        document: dict[str, Any] = loaded.topology.model_dump(mode="json")
        notices = tuple(loaded.notices)
        return cls(
            document["name"], loaded.source, document, notices, loaded.located, checked=loaded.topology, author=loaded.author
        )

    @classmethod
    def recorded(cls, state: Record) -> Blueprint:
        """The lab as its record on this machine says it was deployed: its plan is what runs (live changes
        included); its document is checked again only if something asks for the topology."""
        return cls(state.topology["name"], state.source or "<python>", state.topology, planned=state.plan)

    @cached_property
    def topology(self) -> Topology:
        """The checked topology (checked again from :attr:`document` when it was not given)."""
        if self.checked is not None:
            return self.checked
        from ..model.load import load_data

        return load_data(copy.deepcopy(self.document), self.source).topology

    @cached_property
    def plan(self) -> Plan:
        """The kernel objects the lab asks for (kinds resolved, addresses assigned)."""
        if self.planned is not None:
            return self.planned
        from .desired import desired

        try:
            return desired(self.topology, self.source, self.leases, self.machine)
        except TopologyError as exc:  # planning knows what is wrong; the file knows where
            if self.located is None:
                raise
            raise TopologyError(
                exc.source, [p if p.line is not None else self.located.problem(p.path, p.message) for p in exc.problems]
            ) from None

    @property
    def network(self) -> str | None:
        """The management network it names (``mgmt:``), from its document: None without one."""
        mgmt = self.document.get("mgmt")
        return str(mgmt["network"]) if isinstance(mgmt, dict) and mgmt.get("network") else None

    def handed(self, machine: Machine, leases: Leases | None) -> Blueprint:
        """The same lab handed out to be planned: on ``machine``, against ``leases`` (its management network's, as
        read now); its topology is not checked again."""
        return replace(self, machine=machine, leases=leases, checked=self.topology if self.was_checked else None)

    @property
    def was_checked(self) -> bool:
        """Whether its topology is at hand without checking the document again."""
        return self.checked is not None or "topology" in self.__dict__

    def problem(self, path: tuple[str | int, ...], message: str) -> Problem:
        """A problem at ``path`` of the lab's file, with its line and column where the file is known."""
        return self.located.problem(path, message) if self.located is not None else Problem(path, message)

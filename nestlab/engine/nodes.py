"""A process inside a node of a lab on this machine: the node's runtime starts it in the node's namespaces
(and its cgroup), with the node's ``env``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .. import names
from ..backends.kernel import cgroups
from ..errors import LabError
from ..plan.objects import Plan
from ..registry import RUNTIMES

if TYPE_CHECKING:
    from ..runtimes.base import Runtime


class LabView(Protocol):
    """What a node or a link needs of its lab: a :class:`~nestlab.plan.blueprint.Blueprint`, or the Python API's
    ``Lab``."""

    @property
    def name(self) -> str: ...

    @property
    def plan(self) -> Plan: ...


def popen(lab: str, plan: Plan, node: str, args: Sequence[str] | str, **kwargs: Any) -> subprocess.Popen[Any]:
    """Start ``args`` (``subprocess.Popen`` arguments; a string runs via ``sh -c``) inside ``node`` of ``lab``, planned
    as ``plan`` says; its ``env`` first, then ``kwargs["env"]``."""
    if isinstance(args, str):
        args = ["sh", "-c", args]
    obj = plan.nodes[node]
    kwargs["env"] = {**dict(obj.env), **(kwargs.get("env") or {})}
    if not os.path.exists(names.netns_path(lab, node)):
        raise LabError(f"node {node} of lab {lab} is not running (deploy the lab first)")
    files: list[str] = []
    if obj.cgroup:
        tree = cgroups.Tree(lab)
        files = tree.procs_files(tree.leaf(node, any(n.startswith(node + "/") for n in plan.nodes)))
    runtime: Runtime = RUNTIMES.get(obj.runtime)
    return runtime.popen(lab, obj, files, args, **kwargs)

"""The interface every node runtime implements; each runtime module registers one (``nestlab.registry.RUNTIMES``).

A runtime says how a node's namespaces come to exist (made by nestlab, or by a container
engine and adopted), what runs in them, and how a command enters the node.  The applier
(seen as :class:`nestlab.plugins.Applying`) calls :meth:`Runtime.start` and :meth:`Runtime.stop`;
``Node.popen`` calls :meth:`Runtime.popen`.  Kernel code is imported in the hooks that use it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import names
from ..errors import LabError
from ..plan.objects import NodeObj
from ..plugins import Applying
from ..registry import RUNTIMES

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..model.schema.nodes import NodeSpec


class Runtime:
    """A node runtime.  Subclasses set the class attributes and override the hooks that differ."""

    name: str = ""
    summary: str = ""  # one line for `nestlab modes` and the docs
    selectable: bool = True  # may be named by runtime: (False: chosen by nestlab itself)
    needs_image: str | None = None  # when set, the message for a node of this runtime without image:
    own_cgroup: bool = False  # the runtime puts its processes in a cgroup of its own below the node's
    machine_root: str | None = None  # why its nodes need the machine's root (rootless mode refuses them), if they do

    def check(self, spec: NodeSpec) -> str | None:
        """A problem with a node spec that names this runtime, or None."""
        return self.needs_image if self.needs_image and not spec.image else None

    def start(self, ap: Applying, node: NodeObj, sysctls: dict[str, str]) -> tuple[int, Netlink]:
        """Make (or adopt) the node's network and UTS namespaces and start what runs in them; returns
        an fd on the network namespace and a netlink socket inside it (``ap.path(node)``, ``ap.lab``, ``ap.tree``)."""
        from ..backends.kernel import namespaces, views

        share = ap.path(node.shares) if node.shares else None
        uts = names.uts_path(ap.lab, node.name)
        handles = namespaces.create(node.name, ap.path(node.name), uts, hostname(node), sysctls, share_net=share)
        if node.view:
            owners = {path: views.owner(user) for path, user in node.run_dirs}
            views.create(names.view_path(ap.lab, node.name), ap.path(node.name), uts, node.binds, owners, node.own_root)
        return handles

    def stop(self, lab: str, node: NodeObj) -> None:
        """Release what :meth:`start` started beyond the namespaces (which the caller unpins)."""

    def holders(self, lab: str, node: NodeObj) -> set[int]:
        """Processes that hold the node's namespaces: a stopped node keeps them (its PID 1)."""
        return set()

    def popen(
        self, lab: str, node: NodeObj, cgroup_files: Sequence[str], args: Sequence[str], **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """Start a process inside the node (in ``cgroup_files``, the node's own cgroup if it has one)."""
        from ..backends.kernel import containers

        view = names.view_path(lab, node.name) if node.view else None
        return containers.popen_in(
            names.netns_path(lab, node.name), names.uts_path(lab, node.name), cgroup_files, args, view=view, **kwargs
        )

    def remove_leftovers(self, lab: str) -> None:
        """Cleanup by marker: remove whatever of ``lab``'s this runtime keeps outside the lab's folder."""


class WithInit(Runtime):
    """A runtime whose nodes have their own PID and mount namespaces: commands enter through the node's init."""

    def popen(
        self, lab: str, node: NodeObj, cgroup_files: Sequence[str], args: Sequence[str], **kwargs: Any
    ) -> subprocess.Popen[Any]:
        from ..backends.kernel import cgroups, containers

        pid = containers.init_pid(lab, node.name)
        if pid is None:
            raise LabError(f"node {node.name} of lab {lab} has no running init (redeploy the lab)")
        return containers.spawn(pid, cgroups.files_of(pid), args, **kwargs)

    def holders(self, lab: str, node: NodeObj) -> set[int]:
        from ..backends.kernel import containers

        init = containers.init_pid(lab, node.name)
        return set() if init is None else {init}

    def stop(self, lab: str, node: NodeObj) -> None:
        from ..backends.kernel import containers

        containers.forget(lab, node.name)


def hostname(node: NodeObj) -> str:
    return node.name.replace("/", "-")


def register(runtime: Runtime) -> Runtime:
    """Each runtime module calls this for its runtime."""
    RUNTIMES.register(runtime)
    return runtime

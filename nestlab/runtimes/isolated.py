"""isolated: a nested component's container: PID, mount and IPC namespaces of its own on top of nestlab's
network and UTS ones.  PID 1 is ``tini`` (reaps orphans) keeping a sleep alive, with ``/proc`` remounted
for the new PID namespace: no daemon, two small processes.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import names
from ..errors import LabError
from .base import WithInit, register

if TYPE_CHECKING:
    from ..backends.kernel.netlink import Netlink
    from ..plan.objects import NodeObj
    from ..plugins import Applying


def init_command(cgroup_files: Sequence[str]) -> str:
    """PID 1 of a component: joins its cgroup, mounts its /proc, then tini (reaps orphans) keeps a
    sleep alive.  Static builds when present (about 50 KiB less private memory each).  Joining from
    the shell, whose mount namespace still shows the cgroup filesystem, lets Python start it with
    vfork rather than fork (a ``preexec_fn`` forces fork: ~25 ms per component instead of ~3)."""
    tini = "tini-static" if shutil.which("tini-static") else "tini"
    sleep = "busybox sleep" if shutil.which("busybox") else "sleep"
    join = "".join(f"echo 0 > {f} && " for f in cgroup_files)
    return f"{join}mount -t proc proc /proc && exec {tini} -s -- {sleep} infinity"


class Isolated(WithInit):
    name = "isolated"
    summary = "+ PID, mount and IPC namespaces, tini as PID 1 (chosen for nested components)"
    selectable = False

    def start(self, ap: Applying, node: NodeObj, sysctls: dict[str, str]) -> tuple[int, Netlink]:
        from ..backends.kernel import containers, detached, libc, namespaces

        if not shutil.which("tini"):
            raise LabError("components need tini as their PID 1: install the Debian package tini")
        handles = super().start(ap, node, sysctls)
        command = init_command(ap.tree.procs_files(node.name) if node.cgroup else [])

        def work() -> subprocess.Popen[Any]:
            with namespaces.entered(names.netns_path(ap.lab, node.name), names.uts_path(ap.lab, node.name)):
                libc.unshare(libc.CLONE_NEWPID | libc.CLONE_NEWNS | libc.CLONE_NEWIPC)  # NEWNS implies our own fs state
                libc.mount("", "/", libc.MS_REC | libc.MS_PRIVATE, "none")  # nothing mounted inside leaks out
                return subprocess.Popen(["sh", "-c", command], **detached.options())

        containers.record_init(ap.lab, node.name, containers.in_thread(work).pid)
        return handles

    def holders(self, lab: str, node: NodeObj) -> set[int]:
        """tini and the sleep it keeps alive (its first child: orphans it adopts come later)."""
        from ..backends.kernel import procs

        held = super().holders(lab, node)
        for init in list(held):
            born = {pid: procs.start_time(pid) for pid in procs.children(init)}
            if first := min((pid for pid, t in born.items() if t is not None), key=lambda p: (born[p], p), default=None):
                held.add(first)
        return held


register(Isolated())

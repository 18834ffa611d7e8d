"""Nodes and interfaces of a deployed lab: run commands inside (its site runs them: in its namespaces here, on the
node's server or pod elsewhere), look at interfaces."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import names
from ..engine import running, state
from ..engine.nodes import LabView
from ..errors import LabError
from ..model.errors import Problem, TopologyError
from ..plan.objects import NodeObj

if TYPE_CHECKING:
    from ..sites.seam import Site


class Placed(LabView, Protocol):
    """What a node needs of its lab: its name, its plan and where it runs (the Python API's ``Lab``)."""

    def site(self) -> Site: ...


@dataclass(frozen=True)
class Interface:
    """One end of a link, as planned: ``node``, ``name``, its addresses and the far end."""

    node: Node
    name: str
    ipv4: tuple[str, ...]
    ipv6: tuple[str, ...]
    peer: str

    @property
    def ip(self) -> str | None:
        """The first IPv4 address without its prefix length (handy for ping targets)."""
        return self.ipv4[0].split("/")[0] if self.ipv4 else None


class Node:
    """A node of a lab: its own network and UTS namespace (hostname = node name).

    >>> lab = Lab.from_file("examples/quickstart.yml")      # doctest: +SKIP
    >>> with lab.deployed():                                # doctest: +SKIP
    ...     h1 = lab.nodes["h1"]
    ...     print(h1.cmd("ping -c1 " + lab.nodes["h2"].intf("eth1").ip))
    """

    def __init__(self, placed: Placed, name: str):
        self.lab = placed
        self.name = name

    @property
    def obj(self) -> NodeObj:
        return self.lab.plan.nodes[self.name]

    @property
    def kind(self) -> str:
        return self.obj.kind

    def __repr__(self) -> str:
        return f"<Node {self.lab.name}/{self.name} kind={self.kind}>"

    @property
    def netns(self) -> str:
        """The namespace name, usable with ``ip netns exec``."""
        return names.netns_name(self.lab.name, self.name)

    def intf(self, name: str) -> Interface:
        """The interface ``name`` of this node (KeyError listing the node's interfaces if none)."""
        for iface in self.intfs():
            if iface.name == name:
                return iface
        have = ", ".join(i.name for i in self.intfs()) or "none"
        raise KeyError(f"{self.name} has no interface '{name}' (it has: {have})")

    def intfs(self) -> list[Interface]:
        """Every link and attachment interface of the node, in topology order."""
        plan = self.lab.plan
        linked = [
            Interface(self, end.iface, end.ipv4, end.ipv6, other.ref)
            for link in plan.links.values()
            for end, other in ((link.a, link.b), (link.b, link.a))
            if end.node == self.name
        ]
        attached = [
            Interface(
                self,
                a.end.iface,
                a.end.ipv4,
                a.end.ipv6,
                f"{a.mode} on {a.host or 'this machine'}:{a.parent or a.option('bridge')}",
            )
            for a in plan.attachments.values()
            if a.end.node == self.name
        ]
        return linked + attached

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The node's ``env`` and then ``extra`` (on top of what a node keeps of ours: containers.node_env)."""
        return {**dict(self.obj.env), **(extra or {})}

    def popen(self, args: Sequence[str] | str, **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process inside the node (``subprocess.Popen`` arguments); a string runs via ``sh -c``."""
        if isinstance(args, str):
            args = ["sh", "-c", args]
        return self.lab.site().popen(self.lab.plan, self.name, args, **kwargs)  # here, or by the share that runs it

    @property
    def components(self) -> dict[str, Node]:
        """The node's components, by their short name (``lab.nodes["n1"].components["gnab"]``)."""
        prefix = self.name + "/"
        return {n[len(prefix) :]: Node(self.lab, n) for n in self.lab.plan.nodes if n.startswith(prefix)}

    def set(self, **resources: Any) -> dict[str, str]:
        """Change cgroup limits live (``cpus=0.5``, ``memory="128m"``, ``"none"`` lifts one); returns the limits in force."""
        from pydantic import ValidationError

        from ..model.schema.nodes import Resources

        if not self.obj.cgroup:
            raise LabError(f"node {self.name} has no cgroup: declare resources: (even empty, {{}}) to limit it live")
        try:
            checked = Resources.model_validate({k: v for k, v in resources.items() if v != "none"})
        except ValidationError as exc:
            raise TopologyError(
                "<node set>", [Problem(tuple(e["loc"]), e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
            ) from None
        values = {**checked.model_dump(exclude_none=True), **{k: "none" for k, v in resources.items() if v == "none"}}
        running.set_limits(self.lab.name, self.name, {k: str(v) for k, v in values.items()})

        state.write_resources(self.lab.name, self.name, values)
        return self.limits()

    def limits(self) -> dict[str, str]:
        """The cgroup limits in force (cpus, memory bytes, pids), read back from the kernel."""
        return running.limits(self.lab.name, self.name) if self.obj.cgroup else {}

    def usage(self) -> dict[str, float]:
        """CPU seconds and memory bytes used by the node (its components included); empty without a cgroup."""
        return running.usage(self.lab.name, self.name) if self.obj.cgroup else {}

    def pause(self, scheduled: float | None = None) -> float:
        """Freeze the node's processes (SIGSTOP) and take its link interfaces down, at once (a schedule's
        ``action: stop``; ``nestlab node stop`` ends the processes instead); returns ms spent."""
        return self._pause(True, scheduled)

    def resume(self, scheduled: float | None = None) -> float:
        """Undo :meth:`pause`: interfaces up, processes continued (SIGCONT); returns ms spent."""
        return self._pause(False, scheduled)

    def _pause(self, stop: bool, scheduled: float | None) -> float:
        ifaces = [iface.name for iface in self.intfs()]
        return running.paused(self.lab.name, self.name, ifaces, not self.obj.shares, stop, scheduled)

    def cmd(self, command: Sequence[str] | str, *, timeout: float | None = 60, check: bool = False) -> str:
        """Run a command inside the node and return its output (stdout and stderr).

        ``check=True`` raises :class:`subprocess.CalledProcessError` on a non-zero exit.
        """
        proc = self.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        if check and proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, command, out)
        return str(out)

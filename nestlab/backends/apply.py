"""Carry out a :class:`~nestlab.plan.diff.Changes` against the kernel, batched per namespace.

Order: delete links, delete nodes, create nodes (namespaces, bridges), create
veths (from the bridge side, so each port is enslaved as it is born, the peer
created directly in the other node's namespace), bring peers up, add addresses.
Requests for one namespace travel in one ``sendmsg`` per phase.  If anything
fails, everything this call created is removed again before the error is raised.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from .. import names
from ..plan.desired import LinkObj, NodeObj
from ..plan.diff import Changes
from . import namespaces, netlink
from .netlink import Netlink, Request

Progress = Callable[[str, int, int], None]

# Bridge namespaces need no IPv6 on their ports, and no bridged traffic through iptables.
_BRIDGE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
_BRIDGE_NF = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.bridge.bridge-nf-call-arptables")


class Applier:
    """Applies changes to one lab; holds one netlink socket per namespace it touches."""

    def __init__(self, lab: str, kinds: dict[str, str], progress: Progress | None = None):
        self.lab = lab
        self.kinds = kinds  # node name -> kind, for nodes that exist after the change
        self.progress = progress or (lambda phase, done, total: None)
        self.handles: dict[str, tuple[int, Netlink]] = {}
        self.queues: dict[str, list[Request]] = {}
        self.bridge_index: dict[str, int] = {}

    # -- sockets and batches -------------------------------------------------
    def _handle(self, node: str) -> tuple[int, Netlink]:
        if node not in self.handles:
            self.handles[node] = namespaces.open_netlink(names.netns_path(self.lab, node))
        return self.handles[node]

    def _queue(self, node: str, *reqs: Request) -> int:
        """Add requests to the node's next batch; returns the position of the first one."""
        queue = self.queues.setdefault(node, [])
        queue.extend(reqs)
        return len(queue) - len(reqs)

    def _flush(self) -> dict[str, list[int]]:
        answers = {}
        queues, self.queues = self.queues, {}
        for node, reqs in queues.items():
            answers[node] = self._handle(node)[1].run(*reqs)
        return answers

    def close(self) -> None:
        for fd, nl in self.handles.values():
            nl.close()
            os.close(fd)
        self.handles.clear()

    # -- the whole change ------------------------------------------------------
    def apply(self, changes: Changes) -> None:
        made_nodes: list[NodeObj] = []
        made_links: list[LinkObj] = []
        try:
            for link in changes.del_links:
                self._delete_link(link)
            for node in changes.del_nodes:
                self.delete_node(node.name)
            self._create_nodes(changes.add_nodes, made_nodes)
            self._create_links(changes.add_links, made_links)
        except BaseException:
            self.queues.clear()
            for link in made_links:
                if link.a.node not in {n.name for n in made_nodes}:
                    self._delete_link(link, quiet=True)
            for node in made_nodes:
                self.delete_node(node.name)
            raise
        finally:
            self.close()

    def _create_nodes(self, nodes: list[NodeObj], made: list[NodeObj]) -> None:
        namespaces.prepare(names.uts_dir(self.lab))
        ordered = sorted(nodes, key=lambda n: n.kind != "bridge")
        for i, node in enumerate(ordered, 1):
            sysctls = dict(node.sysctls)
            if node.kind == "bridge":
                sysctls = {**_BRIDGE_SYSCTLS, **_present(_BRIDGE_NF, "0"), **sysctls}
            fd, nl = namespaces.create(
                names.netns_path(self.lab, node.name), names.uts_path(self.lab, node.name), node.name, sysctls
            )
            self.handles[node.name] = (fd, nl)
            made.append(node)
            if node.kind == "bridge":
                _, _, self.bridge_index[node.name] = nl.run(
                    netlink.set_up("lo"), netlink.new_bridge(node.name, names.alias(self.lab)), netlink.get_link(node.name)
                )
            else:
                self._queue(node.name, netlink.set_up("lo"))
            if i % 32 == 0 or i == len(ordered):
                self.progress("nodes", i, len(ordered))

    def _bridge(self, node: str) -> int | None:
        if self.kinds[node] != "bridge":
            return None
        if node not in self.bridge_index:
            (self.bridge_index[node],) = self._handle(node)[1].run(netlink.get_link(node))
        return self.bridge_index[node]

    def _create_links(self, links: list[LinkObj], made: list[LinkObj]) -> None:
        alias = names.alias(self.lab)
        # Create each veth from its bridge side (if any) so the port is enslaved at birth.
        oriented = [(ln.b, ln.a) if self._bridge(ln.b.node) and not self._bridge(ln.a.node) else (ln.a, ln.b) for ln in links]
        for link, (a, b) in zip(links, oriented):
            peer_fd = self._handle(b.node)[0]
            self._queue(a.node, netlink.new_veth(a.iface, b.iface, peer_fd, alias=alias, mtu=link.mtu, master=self._bridge(a.node)))
            made.append(link)
        self._flush()
        self.progress("links", len(links) // 3, len(links))
        lookups = []  # (endpoint, position of its RTM_GETLINK in the node's batch)
        for a, b in oriented:
            master = self._bridge(b.node)
            self._queue(b.node, netlink.set_master(b.iface, master) if master else netlink.set_up(b.iface))
            for end in (a, b):
                if end.ipv4 or end.ipv6:
                    lookups.append((end, self._queue(end.node, netlink.get_link(end.iface))))
        answers = self._flush()
        self.progress("links", 2 * len(links) // 3, len(links))
        for end, slot in lookups:
            index = answers[end.node][slot]
            self._queue(end.node, *(netlink.new_addr(index, cidr, end.ref) for cidr in end.ipv4 + end.ipv6))
        self._flush()
        self.progress("links", len(links), len(links))

    # -- deletion ----------------------------------------------------------------
    def _delete_link(self, link: LinkObj, quiet: bool = False) -> None:
        if not os.path.exists(names.netns_path(self.lab, link.a.node)):
            return
        try:
            self._handle(link.a.node)[1].run(netlink.del_link(link.a.iface))
        except netlink.NetlinkError:
            if not quiet:
                raise

    def delete_node(self, node: str) -> None:
        if node in self.handles:
            fd, nl = self.handles.pop(node)
            nl.close()
            os.close(fd)
        remove_pinned([names.netns_path(self.lab, node), names.uts_path(self.lab, node)])


def _present(keys: tuple[str, ...], value: str) -> dict[str, str]:
    return {k: value for k in keys if os.path.exists("/proc/sys/" + k.replace(".", "/"))}


def remove_pinned(paths: list[str]) -> None:
    """Stop every process inside the pinned namespaces at ``paths``, then unpin them."""
    kill_inside({ino for p in paths if (ino := namespaces.inode(p))})
    for path in paths:
        namespaces.unpin(path)


def kill_inside(inodes: set[int], grace: float = 1.0) -> None:
    """SIGTERM the processes in those namespaces, SIGKILL whatever is left after ``grace`` seconds."""
    pids = namespaces.pids_in(inodes) if inodes else []
    if not pids:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.01)
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False

"""Carry out a :class:`~nestlab.plan.diff.Changes` against the kernel, batched per namespace.

Order: delete attachments, links and nodes; create namespaces (hosts first, then switches,
then nodes; each by its runtime, OVS daemons with their switch); then links and attachments
mode by mode in their stage's order (veth pairs, attachments to hosts, overlays, tunnel
daemons), each mode's requests for one namespace travelling in one ``sendmsg`` per phase;
then hosts' routes, OVS ports and flows, MPTCP endpoints and link shaping.  If anything
fails, everything this call created is removed again before the error is raised.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .. import kinds, links, names
from ..backends.kernel import cgroups, files, mptcp, namespaces, netlink, shaping, spares, sysctl, views
from ..backends.kernel.netlink import Netlink, Request
from ..backends.services import traceplay
from ..errors import LabError
from ..links import Stage
from ..plan.diff import Changes
from ..plan.objects import AttachObj, EndObj, LinkObj, NodeObj
from ..registry import LINK_MODES, RUNTIMES
from ..runtimes.base import Runtime

Progress = Callable[[str, int, int], None]
REAL = None  # the namespace key of this machine's own network stack (real interfaces)
_REAL_NETNS = "/proc/self/ns/net"  # this machine: where nestlab itself runs (PID 1 may be out of reach in a sandbox)


class Applier:
    """Applies changes to one lab; holds one netlink socket per namespace it touches.

    Node kinds, link modes and runtimes see it as :class:`nestlab.plugins.Applying`.
    """

    CHUNK = 1024  # most namespace fds one batch should name (see fd())

    def __init__(self, lab: str, nodes: dict[str, NodeObj], progress: Progress | None = None):
        self.lab = lab
        self.alias = names.alias(lab)
        self.nodes = nodes  # every node that exists after the change (and those being removed)
        self.progress = progress or (lambda phase, done, total: None)
        self.sockets: dict[str | None, Netlink] = {}  # one per namespace touched
        self.fds: dict[str | None, int] = {}  # namespace fds named by queued requests, closed after each flush
        self.queues: dict[str | None, list[Request]] = {}
        self.bridge_index: dict[str, int | None] = {}
        self._addressing: list[tuple[list[EndObj], dict[str, str], list[EndObj], bool]] = []  # see address()
        self._tree: cgroups.Tree | None = None

    @property
    def tree(self) -> cgroups.Tree:
        if self._tree is None:
            self._tree = cgroups.Tree(self.lab)
        return self._tree

    def _has_children(self, node: NodeObj) -> bool:
        """Whether the node's cgroup gets children (components, or a runtime's own cgroup)."""
        return RUNTIMES.get(node.runtime).own_cgroup or any(n.parent == node.name for n in self.nodes.values())

    # -- sockets and batches -------------------------------------------------
    def path(self, node: str | None) -> str:
        return _REAL_NETNS if node is REAL else names.netns_path(self.lab, node)

    def adopt(self, node: str | None, handles: tuple[int, Netlink]) -> None:
        """Keep the netlink socket a runtime opened in a new namespace (its fd is reopened when needed)."""
        fd, self.sockets[node] = handles
        os.close(fd)

    def _socket(self, node: str | None) -> Netlink:
        if node not in self.sockets:
            self.adopt(node, namespaces.open_netlink(self.path(node)))
        return self.sockets[node]

    def fd(self, node: str | None) -> int:
        """An fd on the node's network namespace (to create an interface directly inside it), valid until
        the next flush: holding one per namespace for a whole deploy would pass the open-file limit."""
        if node not in self.fds:
            self.fds[node] = os.open(self.path(node), os.O_RDONLY | os.O_CLOEXEC)
        return self.fds[node]

    def run(self, node: str | None, *reqs: Request) -> list[int]:
        """Send requests to the node's namespace now (not batched)."""
        return self._socket(node).run(*reqs)

    def queue(self, node: str | None, *reqs: Request) -> int:
        """Add requests to the node's next batch; returns the position of the first one."""
        queue = self.queues.setdefault(node, [])
        queue.extend(reqs)
        return len(queue) - len(reqs)

    def flush(self) -> dict[str | None, list[int]]:
        """Send every namespace its batch; returns each namespace's answers (see :meth:`Netlink.run`)."""
        answers = {}
        queues, self.queues = self.queues, {}
        try:
            for node, reqs in queues.items():
                answers[node] = self.run(node, *reqs)
        finally:
            self._close_fds()
        return answers

    def _close_fds(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def close(self) -> None:
        for nl in self.sockets.values():
            nl.close()
        self.sockets.clear()
        self._close_fds()

    def bridge(self, node: str) -> int | None:
        """The ifindex of the bridge whose ports links ending in ``node`` become (its kind's); None: none."""
        if node not in self.bridge_index:  # None too: asked for every end of every link
            obj = self.nodes[node]
            name = kinds.of(obj).bridge(obj)
            self.bridge_index[node] = None if name is None else self.run(node, netlink.get_link(name))[0]
        return self.bridge_index[node]

    def popen(self, node: str, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process inside a node (through its runtime, in its cgroup)."""
        obj = self.nodes[node]
        files = self.tree.procs_files(self.tree.leaf(node, self._has_children(obj))) if obj.cgroup else []
        runtime: Runtime = RUNTIMES.get(obj.runtime)
        return runtime.popen(self.lab, obj, files, args, **kwargs)

    # -- the whole change ------------------------------------------------------
    def apply(self, changes: Changes) -> None:
        _enough_files(len(self.nodes) + self.CHUNK + 256)  # a netlink socket per namespace, namespace fds per batch
        made_nodes: list[NodeObj] = []
        made: list[LinkObj | AttachObj] = []
        try:
            for obj in changes.del_attachments + changes.del_links:
                self._delete(obj, quiet=True)
            for node in sorted(changes.del_nodes, key=lambda n: -n.name.count("/")):  # components before their node
                self.delete_node(node)
            self._create_nodes(changes.add_nodes, made_nodes)
            for mode, objs in links.by_stage([*changes.add_links, *changes.add_attachments]):
                if mode.stage >= Stage.OVERLAY:  # tunnels and daemons need their hosts' addresses in place
                    self._settle()
                mode.create(self, objs, made, changes)
            self._settle()
            self._finish(changes)
        except BaseException:
            self.queues.clear()
            gone = {n.name for n in made_nodes}
            for obj in reversed(made):
                if not obj.deps <= gone:
                    self._delete(obj, quiet=True)
            for node in sorted(reversed(made_nodes), key=lambda n: -n.name.count("/")):
                self.delete_node(node)
            raise
        finally:
            self.close()

    def _create_nodes(self, nodes: list[NodeObj], made: list[NodeObj]) -> None:
        namespaces.prepare(names.uts_dir(self.lab))
        if any(n.view for n in nodes):
            views.prepare(names.view_dir(self.lab))
        ordered = sorted(nodes, key=lambda n: (kinds.of(n).order, n.shares is not None))
        started = {}
        if not spares.coming():  # spares need only pinning: threads would only wait for each other
            pool = _makers()
            started = {n.name: pool.submit(RUNTIMES.get(n.runtime).start, self, n, _sysctls(n)) for n in ordered if _ahead(n)}
        try:
            self._start_nodes(ordered, started, made)
        finally:
            for name, future in started.items():  # rolled back with the rest: made, or released
                if future.cancel() or name in self.sockets:
                    continue
                if future.exception() is None:
                    made.append(next(n for n in ordered if n.name == name))
                    self.adopt(name, future.result())

    def _start_nodes(self, ordered: list[NodeObj], started: dict[str, Future[tuple[int, Netlink]]], made: list[NodeObj]) -> None:
        for i, node in enumerate(ordered, 1):
            made.append(node)
            if node.name in started:
                self.adopt(node.name, started[node.name].result())
            else:
                kinds.of(node).prepare(self, node)
                if node.cgroup:
                    self.tree.create(node.name, dict(node.resources), self._has_children(node))
                self.adopt(node.name, RUNTIMES.get(node.runtime).start(self, node, _sysctls(node)))
            kinds.of(node).started(self, node, self.sockets[node.name])
            if i % 32 == 0 or i == len(ordered):
                self.progress("nodes", i, len(ordered))

    def address(
        self, ends: list[EndObj], routes: dict[str, str] | None = None, up: Sequence[EndObj] = (), nodad: bool = False
    ) -> None:
        """Add the ends' addresses, then bring ``up`` up, then add ``routes`` (node -> default gateway), then
        wait for each end to carry traffic: one batch per namespace, in that order.  Deferred until the
        cables and attachments of every mode are made (:meth:`_settle`): a node's data links and its
        management interface are addressed in one round per namespace, not one round per mode.

        Up comes after the wiring so a lab's first packets (IPv6 DAD, MLD reports, which a bridge floods
        to every port) start when the lab is wired, not while the rest is still being made; in a quiet lab's
        hosts (model/ipv6.py) there are none.  ``nodad``: IPv6 addresses are usable at once, unprobed (each
        probe is a multicast every other port of a shared bridge gets).
        """
        self._addressing.append((list(ends), dict(routes or {}), list(up), nodad))

    def _settle(self) -> None:
        """Carry out every :meth:`address` asked for so far, together."""
        work, self._addressing = self._addressing, []
        if not work:
            return
        ends = [end for group, _, _, _ in work for end in group]
        up = [end for _, _, ups, _ in work for end in ups]
        lookups = [
            (end, nodad, self.queue(end.node, netlink.get_link(end.iface)))
            for group, _, _, nodad in work
            for end in group
            if end.ipv4 or end.ipv6
        ]
        answers = self.flush()  # what the modes queued, then the lookups
        for end, nodad, slot in lookups:
            index = answers[end.node][slot]
            flags = netlink.IFA_F_NODAD if nodad else 0
            self.queue(
                end.node,
                *(netlink.new_addr(index, cidr, end.ref) for cidr in end.ipv4),
                *(netlink.new_addr(index, cidr, end.ref, flags) for cidr in end.ipv6),
            )
        quiet = {n for n in {end.node for end in up} if n in self.nodes and not self.nodes[n].link_local}
        for end in up:
            if end.node in quiet:  # before it is up: the address would be made (and announced) at once
                self.queue(end.node, netlink.no_link_local(end.iface))
            self.queue(end.node, netlink.set_up(end.iface))
        for _, routes, _, _ in work:
            for node, gateway in routes.items():
                self.queue(node, netlink.route(gateway))
        if up:
            # Asking for a link makes the kernel finish its carrier change now (rtnl_getlink runs the
            # link watch for it): until then the interface has no queue and drops what it is given.
            for end in ends:
                self.queue(end.node, netlink.get_link(end.iface))
        self.flush()

    def _finish(self, changes: Changes) -> None:
        """Hosts' routes, ports handed to the kinds that take them, late sysctls, each kind's finish and retune, port forwards,
        MPTCP endpoints, link shaping and trace players: one pass each, in that order."""
        for finishing in (
            self._routes,
            self._ports,
            self._late_sysctls,
            self._kinds_finished,
            self._retuned,
            self._forwards,
            self._mptcp,
            self._shaped,
        ):
            finishing(changes)
        self.play_traces(changes.add_links)

    def _routes(self, changes: Changes) -> None:
        for host in changes.add_nodes:
            if host.routes:
                self.queue(host.name, *(netlink.route(via, dst) for dst, via in host.routes))
        self.flush()

    def _ports(self, changes: Changes) -> None:
        """Interfaces made inside nodes whose kind takes them as ports, handed to the kind."""
        ports: dict[str, list[str]] = {}
        for link in changes.add_links:
            for end in link.ends:
                if kinds.of(self.nodes[end.node]).takes_ports:
                    ports.setdefault(end.node, []).append(end.iface)
        for att in changes.add_attachments:
            if kinds.of(self.nodes[att.end.node]).takes_ports and LINK_MODES.get(att.mode).switch_port:
                ports.setdefault(att.end.node, []).append(att.end.iface)
        for node, ifaces in ports.items():
            kinds.of(self.nodes[node]).ports(self, self.nodes[node], ifaces)

    def _late_sysctls(self, changes: Changes) -> None:
        for node in changes.add_nodes:
            if late := _sysctls(node, late=True):
                with namespaces.entered(self.path(node.name)):
                    for key, value in late.items():
                        sysctl.write(key, value)

    def _kinds_finished(self, changes: Changes) -> None:
        for kind, nodes in kinds.grouped(changes.add_nodes):
            kind.finish(self, nodes)

    def _retuned(self, changes: Changes) -> None:
        for kind, nodes in kinds.grouped(changes.retune):
            kind.retuned(self, nodes)

    def _forwards(self, changes: Changes) -> None:
        for node in changes.add_nodes:
            if node.ports:  # asyncio, for the forwarder's own process: 15 ms no other deploy needs
                from ..backends.services import portfwd

                portfwd.start(self.path(node.name), names.uts_path(self.lab, node.name), node.name, node.ports)

    def _mptcp(self, changes: Changes) -> None:
        for node in changes.add_nodes:
            if node.mptcp:
                mptcp.configure(self.path(node.name), *node.mptcp, list(node.mptcp_endpoints))

    def _shaped(self, changes: Changes) -> None:
        shaper = shaping.Shaper()
        try:
            for link in changes.add_links:
                if link.shape_a or link.shape_b or link.state == "down":
                    shape_link(shaper, self.lab, link)
            for link in changes.reshape:
                shape_link(shaper, self.lab, link, reset=True)
            for att in changes.add_attachments:
                if att.shape:
                    shaper.apply(self.path(att.end.node), att.end.iface, dict(att.shape))
        finally:
            shaper.close()

    def play_traces(self, links: list[LinkObj], senders: set[str] | None = None) -> None:
        """A player for each direction of ``links`` that follows a delivery trace (it runs in the sending node;
        ``senders``: only where those nodes send)."""
        for link in links:
            for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
                if (trace := dict(shape).get("trace")) and (senders is None or end.node in senders):
                    traceplay.start(self.lab, end.node, end.iface, trace, int(dict(shape).get("queue", 1000)))

    # -- deletion ----------------------------------------------------------------
    def run_quiet(self, node: str | None, req: Request, quiet: bool) -> None:
        """Send one request now; with ``quiet``, an object already gone is fine (so is a namespace already gone)."""
        if node is not REAL and not os.path.exists(self.path(node)):
            return
        try:
            self.run(node, req)
        except netlink.NetlinkError as exc:
            if not (quiet and exc.errno in (errno.ENODEV, errno.ENOENT, errno.EINVAL)):
                raise

    def _delete(self, obj: LinkObj | AttachObj, quiet: bool = False) -> None:
        LINK_MODES.get(obj.mode).delete(self, obj, quiet)
        for end in obj.ends if isinstance(obj, LinkObj) else ():
            node = self.nodes.get(end.node)
            if node and kinds.of(node).takes_ports and os.path.exists(self.path(end.node)):
                kinds.of(node).port_removed(self, node, end.iface)

    def delete_node(self, node: NodeObj) -> None:
        if node.name in self.sockets:
            self.sockets.pop(node.name).close()
        RUNTIMES.get(node.runtime).stop(self.lab, node)
        paths = [self.path(node.name), names.uts_path(self.lab, node.name)]
        # A node sharing its host's stack is told apart from the host by its UTS namespace only.
        namespaces.remove_pinned(paths, kill_by=paths[1:] if node.shares else paths)
        if node.view:
            namespaces.unpin(names.view_path(self.lab, node.name))
            files.remove_tree(names.node_dir(self.lab, node.name))  # its daemons may have written links there
        if node.cgroup:
            self.tree.remove(node.name)
        kinds.of(node).removed(self.lab, node)


_POOL: list[ThreadPoolExecutor] = []


def _makers() -> ThreadPoolExecutor:
    """Two threads that make plain namespaces while the caller makes the rest: the kernel makes namespaces
    in parallel.  Kept for the process's life, as each thread holds fds on its own namespaces."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(2, thread_name_prefix="nestlab-netns"))
    return _POOL[0]


def _ahead(node: NodeObj) -> bool:
    """A node that is only its namespaces (its kind says): made ahead, in parallel."""
    return kinds.of(node).made_ahead(node)


def _sysctls(node: NodeObj, late: bool = False) -> dict[str, str]:
    """A node's sysctls: its own over those its kind gets; those of one interface (``net.ipv6.conf.eth0.*``)
    apart (``late``), as the interface exists only once the links are made."""
    return {k: v for k, v in {**kinds.of(node).sysctls(), **dict(node.sysctls)}.items() if bool(_ONE_INTERFACE.match(k)) == late}


_ONE_INTERFACE = re.compile(r"^net\.ipv[46]\.(conf|neigh)\.(?!(all|default|lo)\.)[^.]+\.")


def shape_link(shaper: shaping.Shaper, lab: str, link: LinkObj, reset: bool = False) -> None:
    """Apply a link's per-direction shapes and state (``reset``: also clear directions left unshaped)."""
    for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
        path = names.netns_path(lab, end.node)
        if shape or reset:
            shaper.apply(path, end.iface, dict(shape))
        if link.state or reset:
            shaper.set_state(path, end.iface, link.state != "down")


def _enough_files(count: int) -> None:
    """Raise this process's open-file limit to ``count`` if it is lower (root may, up to fs.nr_open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= count:
        return
    try:
        with open("/proc/sys/fs/nr_open") as fh:
            ceiling = int(fh.read())
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(count, ceiling), max(hard, min(count, ceiling))))
    except (OSError, ValueError) as exc:
        raise LabError(
            f"this lab needs {count} open files and the limit is {soft} ({exc}); raise it with `ulimit -n {count}`"
        ) from None

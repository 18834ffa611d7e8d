"""Carry out a :class:`~nestlab.plan.diff.Changes` against the kernel, batched per namespace.

Order: delete attachments, links and nodes; create namespaces (hosts first,
then switches, then nodes; OVS daemons start with their switch); create veths
(from the bridge side, so each port is enslaved as it is born, the peer
created directly in the other namespace) and address them; hosts' bridges;
attachments (bridge, macvlan, ipvlan, phys); VXLAN ends; then NAT rules, OVS
ports and flows, link shaping.  Requests for one namespace travel in one
``sendmsg`` per phase.  If anything fails, everything this call created is
removed again before the error is raised.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import time
import zlib
from collections.abc import Callable

from .. import names
from ..plan.desired import AttachObj, EndObj, LinkObj, NodeObj
from ..plan.diff import Changes
from . import cgroups, containers, mpt, mptcp, namespaces, nat, netlink, ovs, rootfs, shaping
from .netlink import Netlink, Request

Progress = Callable[[str, int, int], None]
REAL = None  # the namespace key of this machine's own network stack (real interfaces)
_REAL_NETNS = "/proc/1/ns/net"

# Switch namespaces need no IPv6 on their ports; no namespace of ours sends bridged traffic through iptables.
_BRIDGE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
_BRIDGE_NF = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.bridge.bridge-nf-call-arptables")
_ORDER = {"machine": 0, "bridge": 1, "ovs": 1, "linux": 2}


def host_veth_name(attachment_key: str) -> str:
    """The host-side name of a bridge-mode veth (``veth`` + 8 hex digits, stable per attachment)."""
    return f"veth{zlib.crc32(attachment_key.encode()):08x}"


class Applier:
    """Applies changes to one lab; holds one netlink socket per namespace it touches."""

    def __init__(self, lab: str, nodes: dict[str, NodeObj], progress: Progress | None = None):
        self.lab = lab
        self.nodes = nodes  # every node that exists after the change (and those being removed)
        self.progress = progress or (lambda phase, done, total: None)
        self.handles: dict[str | None, tuple[int, Netlink]] = {}
        self.queues: dict[str | None, list[Request]] = {}
        self.bridge_index: dict[str, int] = {}
        self._tree: cgroups.Tree | None = None

    @property
    def tree(self) -> cgroups.Tree:
        if self._tree is None:
            self._tree = cgroups.Tree(self.lab)
        return self._tree

    def _has_children(self, node: NodeObj) -> bool:
        """Whether the node's cgroup gets children (components, or a runtime's own cgroup)."""
        return node.runtime in ("runc", "docker") or any(n.parent == node.name for n in self.nodes.values())

    # -- sockets and batches -------------------------------------------------
    def _path(self, node: str | None) -> str:
        return _REAL_NETNS if node is REAL else names.netns_path(self.lab, node)

    def _handle(self, node: str | None) -> tuple[int, Netlink]:
        if node not in self.handles:
            self.handles[node] = namespaces.open_netlink(self._path(node))
        return self.handles[node]

    def _queue(self, node: str | None, *reqs: Request) -> int:
        """Add requests to the node's next batch; returns the position of the first one."""
        queue = self.queues.setdefault(node, [])
        queue.extend(reqs)
        return len(queue) - len(reqs)

    def _flush(self) -> dict[str | None, list[int]]:
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
        made_attachments: list[AttachObj] = []
        try:
            for attachment in changes.del_attachments:
                self._delete_attachment(attachment, quiet=True)
            for link in changes.del_links:
                self._delete_link(link, quiet=True)
            for node in sorted(changes.del_nodes, key=lambda n: -n.name.count("/")):  # components before their node
                self.delete_node(node)
            self._create_nodes(changes.add_nodes, made_nodes)
            self._create_links([x for x in changes.add_links if x.mode not in ("vxlan", "mpt")], made_links)
            self._host_bridges([n for n in changes.add_nodes if n.bridges])
            self._create_attachments(changes.add_attachments, made_attachments)
            self._create_vxlans([x for x in changes.add_links if x.mode == "vxlan"], made_links)
            self._finish(changes)
        except BaseException:
            self.queues.clear()
            made = {n.name for n in made_nodes}
            for attachment in made_attachments:
                if attachment.end.node not in made:
                    self._delete_attachment(attachment, quiet=True)
            for link in made_links:
                if not link.deps <= made:
                    self._delete_link(link, quiet=True)
            for node in sorted(reversed(made_nodes), key=lambda n: -n.name.count("/")):
                self.delete_node(node)
            raise
        finally:
            self.close()

    def _create_nodes(self, nodes: list[NodeObj], made: list[NodeObj]) -> None:
        namespaces.prepare(names.uts_dir(self.lab))
        ordered = sorted(nodes, key=lambda n: (_ORDER.get(n.kind, 2), n.shares is not None))
        for i, node in enumerate(ordered, 1):
            sysctls = dict(node.sysctls)
            if node.kind in ("bridge", "ovs"):
                sysctls = {**_BRIDGE_SYSCTLS, **sysctls}
            if node.kind in ("bridge", "ovs", "machine"):
                sysctls = {**_present(_BRIDGE_NF, "0"), **sysctls}
            share = self._path(node.shares) if node.shares else None
            hostname = node.name.replace("/", "-")
            made.append(node)
            if node.cgroup:
                self.tree.create(node.name, dict(node.resources), self._has_children(node))
            if node.runtime == "docker":
                pid = containers.start_docker(self.lab, node.name, node.image, f"nestlab.{self.lab}/{node.name}", hostname, dict(node.env))
                fd, nl = namespaces.adopt(pid, self._path(node.name), names.uts_path(self.lab, node.name), sysctls)
            else:
                fd, nl = namespaces.create(self._path(node.name), names.uts_path(self.lab, node.name), hostname, sysctls, share_net=share)
            self.handles[node.name] = (fd, nl)
            if node.runtime == "isolated":
                containers.start_isolated(self.lab, node.name, self.tree.procs_files(node.name) if node.cgroup else [])
            elif node.runtime == "runc":
                rel = f"nestlab.{self.lab}/{node.name}/runc"
                containers.start_runc(self.lab, node.name, rootfs.resolve(node.image), rel, hostname, dict(node.env))
            if node.kind == "bridge":
                _, _, self.bridge_index[node.name] = nl.run(
                    netlink.set_up("lo"), netlink.new_bridge(node.name, names.alias(self.lab)), netlink.get_link(node.name)
                )
            elif not node.shares:
                self._queue(node.name, netlink.set_up("lo"))
            if node.kind == "ovs":
                ovs.Switch(self.lab, node.name).start(node.datapath or "auto", node.controller)
            if i % 32 == 0 or i == len(ordered):
                self.progress("nodes", i, len(ordered))

    def _bridge(self, node: str) -> int | None:
        if self.nodes[node].kind != "bridge":
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
        for a, b in oriented:
            master = self._bridge(b.node)
            self._queue(b.node, netlink.set_master(b.iface, master) if master else netlink.set_up(b.iface))
        self._address([end for a, b in oriented for end in (a, b)])
        self.progress("links", len(links), len(links))

    def _address(self, ends: list[EndObj], routes: dict[str, str] | None = None) -> None:
        """Add the ends' addresses (after flushing whatever is queued); ``routes``: node -> default gateway."""
        lookups = [(end, self._queue(end.node, netlink.get_link(end.iface))) for end in ends if end.ipv4 or end.ipv6]
        answers = self._flush()
        for end, slot in lookups:
            index = answers[end.node][slot]
            self._queue(end.node, *(netlink.new_addr(index, cidr, end.ref) for cidr in end.ipv4 + end.ipv6))
        for node, gateway in (routes or {}).items():
            self._queue(node, netlink.route(gateway))
        self._flush()

    # -- hosts' bridges, attachments, VXLAN ---------------------------------------------
    def _host_bridges(self, hosts: list[NodeObj]) -> None:
        """Bridges in hosts' namespaces: created up, uplink NIC enslaved, the host's address on the bridge."""
        alias = names.alias(self.lab)
        slots = [(host, br, self._queue(host.name, netlink.new_bridge(br.name, alias), netlink.get_link(br.name)) + 1) for host in hosts for br in host.bridges]
        answers = self._flush()
        for host, br, slot in slots:
            if br.uplink:
                self._queue(host.name, netlink.set_master(br.uplink, answers[host.name][slot]))
        self._address([_split(EndObj(host.name, br.name), br.addresses) for host, br, _ in slots])

    def _create_attachments(self, attachments: list[AttachObj], made: list[AttachObj]) -> None:
        if not attachments:
            return
        alias = names.alias(self.lab)
        lookups = []
        for att in attachments:
            under = att.options_dict.get("bridge") if att.mode == "bridge" else att.parent
            lookups.append(self._queue(att.host, netlink.get_link(under)))
        answers = self._flush()
        for att, slot in zip(attachments, lookups):
            parent = answers[att.host][slot]
            node_fd = self._handle(att.end.node)[0]
            opts = att.options_dict
            if att.mode == "macvlan":
                req = netlink.new_macvlan(att.end.iface, parent, node_fd, opts["mode"], alias=alias, mtu=att.mtu)
            elif att.mode == "ipvlan":
                req = netlink.new_ipvlan(att.end.iface, parent, node_fd, opts["mode"], opts["flag"], alias=alias, mtu=att.mtu)
            elif att.mode == "bridge":
                req = netlink.new_veth(host_veth_name(att.key), att.end.iface, node_fd, alias=alias, mtu=att.mtu, master=parent)
            else:  # phys: a real interface of this machine moves into the node
                req = netlink.move(parent, node_fd, att.end.iface)
            self._queue(att.host, req)
            made.append(att)
        self._flush()
        for att in attachments:
            self._queue(att.end.node, netlink.set_up(att.end.iface))
        self._address([att.end for att in attachments], {att.end.node: att.gateway for att in attachments if att.gateway})

    def _create_vxlans(self, links: list[LinkObj], made: list[LinkObj]) -> None:
        alias = names.alias(self.lab)
        for link in links:
            for end, (host, local, remote) in zip((link.a, link.b), link.underlay):
                node_fd = self._handle(end.node)[0]
                self._queue(host, netlink.new_vxlan(end.iface, node_fd, link.vni, local, remote, link.port, alias=alias, mtu=link.mtu))
            made.append(link)
        self._flush()
        for link in links:
            for end in (link.a, link.b):
                self._queue(end.node, netlink.set_up(end.iface))
        self._address([end for link in links for end in (link.a, link.b)])

    def _finish(self, changes: Changes) -> None:
        """Hosts' routes, NAT rules, OVS ports and flows, link shaping."""
        for host in changes.add_nodes:
            if host.routes:
                self._queue(host.name, *(netlink.route(via, dst) for dst, via in host.routes))
        self._flush()
        for host in changes.add_nodes:
            if any(br.nat for br in host.bridges):
                nat.apply(self._path(host.name), list(host.bridges))
        ports: dict[str, list[str]] = {}
        for link in changes.add_links:
            for end in (link.a, link.b):
                if self.nodes[end.node].kind == "ovs":
                    ports.setdefault(end.node, []).append(end.iface)
        for switch, names_ in ports.items():
            ovs.Switch(self.lab, switch).add_ports(names_)
        for node in changes.add_nodes:
            if node.kind == "ovs" and node.flows:
                ovs.Switch(self.lab, node.name).add_flows(list(node.flows))
        for node in changes.add_nodes:
            if node.mptcp:
                mptcp.configure(self._path(node.name), *node.mptcp, list(node.mptcp_endpoints))
        shaper = shaping.Shaper()
        try:
            for link in changes.add_links:
                if link.shape_a or link.shape_b or link.state == "down":
                    shape_link(shaper, self.lab, link)
            for link in changes.reshape:
                shape_link(shaper, self.lab, link, reset=True)
        finally:
            shaper.close()

    # -- deletion ----------------------------------------------------------------
    def _run_quiet(self, node: str | None, req: Request, quiet: bool) -> None:
        if node is not REAL and not os.path.exists(self._path(node)):
            return
        try:
            self._handle(node)[1].run(req)
        except netlink.NetlinkError as exc:
            if not (quiet and exc.errno in (errno.ENODEV, errno.ENOENT, errno.EINVAL)):
                raise

    def _delete_link(self, link: LinkObj, quiet: bool = False) -> None:
        if link.mode == "mpt":  # a daemon's tun device: it goes with the daemon
            mpt.stop(self.lab, link)
            return
        ends = (link.a, link.b) if link.mode == "vxlan" else (link.a,)
        for end in ends:
            self._run_quiet(end.node, netlink.del_link(end.iface), quiet)
        for end in (link.a, link.b):
            node = self.nodes.get(end.node)
            if node and node.kind == "ovs" and os.path.exists(self._path(end.node)):
                ovs.Switch(self.lab, end.node).del_port(end.iface)

    def _delete_attachment(self, att: AttachObj, quiet: bool = False) -> None:
        if att.mode == "phys":  # a real interface goes home under its own name
            fd = self._handle(REAL)[0]
            try:
                (index,) = self._handle(att.end.node)[1].run(netlink.get_link(att.end.iface))
            except (netlink.NetlinkError, FileNotFoundError):
                return
            self._run_quiet(att.end.node, netlink.move(index, fd, att.parent), quiet)
            return
        self._run_quiet(att.end.node, netlink.del_link(att.end.iface), quiet)

    def delete_node(self, node: NodeObj) -> None:
        if node.name in self.handles:
            fd, nl = self.handles.pop(node.name)
            nl.close()
            os.close(fd)
        if node.runtime == "docker":
            containers.stop_docker(self.lab, node.name)
        paths = [self._path(node.name), names.uts_path(self.lab, node.name)]
        # A node sharing its host's stack is told apart from the host by its UTS namespace only.
        remove_pinned(paths, kill_by=paths[1:] if node.shares else paths)
        if node.runtime == "runc":
            containers.stop_runc(self.lab, node.name)
        containers.forget(self.lab, node.name)
        if node.cgroup:
            self.tree.remove(node.name)
        if node.kind == "ovs":
            shutil.rmtree(ovs.run_dir(self.lab, node.name), ignore_errors=True)


def shape_link(shaper: shaping.Shaper, lab: str, link: LinkObj, reset: bool = False) -> None:
    """Apply a link's per-direction shapes and state (``reset``: also clear directions left unshaped)."""
    for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
        path = names.netns_path(lab, end.node)
        if shape or reset:
            shaper.apply(path, end.iface, dict(shape))
        if link.state or reset:
            shaper.set_state(path, end.iface, link.state != "down")


def _split(end: EndObj, addresses: tuple[str, ...]) -> EndObj:
    return EndObj(end.node, end.iface, tuple(a for a in addresses if ":" not in a), tuple(a for a in addresses if ":" in a))


def _present(keys: tuple[str, ...], value: str) -> dict[str, str]:
    return {k: value for k in keys if os.path.exists("/proc/sys/" + k.replace(".", "/"))}


def remove_pinned(paths: list[str], kill_by: list[str] | None = None) -> None:
    """Stop every process inside the pinned namespaces at ``kill_by`` (default ``paths``), then unpin ``paths``."""
    kill_inside({ino for p in (paths if kill_by is None else kill_by) if (ino := namespaces.inode(p))})
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
    except (FileNotFoundError, ProcessLookupError, IndexError):  # it exited between open and read
        return False

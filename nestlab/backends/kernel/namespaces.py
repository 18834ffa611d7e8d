"""Network + UTS namespaces made in-process: unshare in the calling thread, bind-mount, return.

A node's network namespace is mounted at ``/run/netns/nestlab.LAB.NODE`` (so
``ip netns exec`` works on it too) and its UTS namespace at
``/run/nestlab/LAB/uts/NODE``.  Creating one costs ~1 ms (no fork, unlike
``ip netns add`` or pyroute2's ``netns.create``).  Namespaces are per thread, so
entering one for a moment never disturbs other threads.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ... import names
from . import libc, locks, mounts, netlink, procs, spares, sysctl
from .netlink import Netlink

if TYPE_CHECKING:
    from pyroute2 import IPRoute

_SELF = "/proc/thread-self/ns/"


def _fstype(path: str) -> str:
    """The filesystem type of the mount that holds ``path``."""
    mount = mounts.holding(path)
    return mount.fstype if mount else ""


_DISKS = ("ext4", "ext3", "ext2", "xfs", "btrfs", "f2fs")


def in_memory(path: str) -> None:
    """Make ``path`` a tmpfs when it is an empty folder on a disk (some machines keep /run on disk).

    Pin files are created per namespace: ~1 ms each on ext4, ~20 µs on tmpfs.  A folder that
    already holds something is left where it is; a lock of nestlab's own keeps two processes from
    stacking two tmpfs on one folder.
    """
    if _fstype(path) not in _DISKS:
        return
    with locks.held("in-memory"):  # not the parent folder's flock: any user who can open a folder can hold that
        os.makedirs(path, exist_ok=True)
        if _fstype(path) in _DISKS and not os.listdir(path):
            try:
                libc.mount("nestlab", path, 0, "tmpfs", "mode=0755")
            except OSError:  # e.g. a root filesystem shared into a VM: stay where we are, only slower
                pass


def _ensure_shared_dir(path: str) -> None:
    """Make ``path`` a shared mount point, the way iproute2 prepares /run/netns (a tmpfs if it was on disk)."""
    in_memory(path)
    os.makedirs(path, exist_ok=True)
    try:
        libc.mount("", path, libc.MS_SHARED | libc.MS_REC, "none")
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        libc.mount(path, path, libc.MS_BIND | libc.MS_REC)
        libc.mount("", path, libc.MS_SHARED | libc.MS_REC, "none")


def prepare(uts_dir: str) -> None:
    """Create the mount points a lab's namespaces are pinned on."""
    _ensure_shared_dir(names.NETNS_DIR)
    os.makedirs(uts_dir, exist_ok=True)


def _pin(source: str, target: str) -> None:
    """Bind-mount the namespace file ``source`` on a new file ``target`` (an existing one is an error)."""
    os.mknod(target, 0o444 | stat.S_IFREG)  # one call, where open and close are two
    try:
        libc.mount(source, target, libc.MS_BIND)
    except OSError:
        os.unlink(target)
        raise


def unpin(path: str) -> None:
    """Unmount and remove a pinned namespace file (missing is fine)."""
    libc.umount(path)
    try:
        os.unlink(path)
    except (FileNotFoundError, IsADirectoryError):  # a directory mount point (an overlay) goes with its folder
        pass


class _Home:
    """A thread's own network and UTS namespaces, open while the thread lives (closed with its
    thread-local storage when it ends)."""

    def __init__(self) -> None:
        self.net = os.open(_SELF + "net", os.O_RDONLY | os.O_CLOEXEC)
        self.uts = os.open(_SELF + "uts", os.O_RDONLY | os.O_CLOEXEC)

    def __del__(self) -> None:
        os.close(self.net)
        os.close(self.uts)


_local = threading.local()


@contextmanager
def _returning() -> Iterator[None]:
    """Run the block, then put the calling thread back in the namespaces it started in.

    The thread's own namespaces are opened once per thread (opening /proc/thread-self
    files costs ~0.15 ms, which adds up over hundreds of nodes).
    """
    if not hasattr(_local, "home"):
        _local.home = _Home()
    home = _local.home
    try:
        yield
    finally:
        libc.setns(home.net, libc.CLONE_NEWNET)
        libc.setns(home.uts, libc.CLONE_NEWUTS)


def create(
    node: str, net_path: str, uts_path: str, hostname: str, sysctls: dict[str, str], share_net: str | None = None
) -> tuple[int, Netlink]:
    """Create and pin ``node``'s network + UTS namespace (only UTS when ``share_net`` names a namespace to join).

    Returns an fd on the network namespace and a netlink socket inside it; the loopback is up and
    ``sysctls`` are applied before returning.  The node's spare made ahead (:mod:`.spares`) is used when there is one.
    """
    spare = None if share_net else spares.take(node)
    with _returning():
        if share_net:
            fd = os.open(share_net, os.O_RDONLY)
            try:
                libc.setns(fd, libc.CLONE_NEWNET)
            finally:
                os.close(fd)
            libc.unshare(libc.CLONE_NEWUTS)
        elif spare:
            try:
                libc.setns(spare.net, libc.CLONE_NEWNET)
                libc.setns(spare.uts, libc.CLONE_NEWUTS)
            finally:
                os.close(spare.net)
                os.close(spare.uts)
        else:
            libc.unshare(libc.CLONE_NEWNET | libc.CLONE_NEWUTS)
        libc.sethostname(hostname)
        _pin(_SELF + "net", net_path)
        try:
            _pin(_SELF + "uts", uts_path)
            for key, value in sysctls.items():
                sysctl.write(key, value)
            if spare:
                nl = Netlink(sock=spare.sock)
            else:
                nl = Netlink()
                if not share_net:
                    nl.run(netlink.set_up("lo"))
            fd = os.open(_SELF + "net", os.O_RDONLY)
        except BaseException:
            unpin(uts_path)
            unpin(net_path)
            raise
    return fd, nl


def adopt(pid: int, net_path: str, uts_path: str, sysctls: dict[str, str]) -> tuple[int, Netlink]:
    """Pin the network and UTS namespaces of a process started elsewhere (a Docker container) as a node's,
    its loopback up."""
    pinned = []
    try:
        for kind, target in (("net", net_path), ("uts", uts_path)):
            _pin(f"/proc/{pid}/ns/{kind}", target)
            pinned.append(target)
        with entered(net_path):
            for key, value in sysctls.items():
                sysctl.write(key, value)
        fd, nl = open_netlink(net_path)
        try:
            nl.run(netlink.set_up("lo"))
        except BaseException:
            os.close(fd)
            nl.close()
            raise
        return fd, nl
    except BaseException:
        for target in pinned:
            unpin(target)
        raise


@contextmanager
def entered(net_path: str, uts_path: str | None = None) -> Iterator[None]:
    """Put the calling thread inside a node's namespaces for the block.

    Sockets opened and processes started inside the block live in the node.
    """
    net = os.open(net_path, os.O_RDONLY)
    uts = os.open(uts_path, os.O_RDONLY) if uts_path else -1
    try:
        with _returning():
            libc.setns(net, libc.CLONE_NEWNET)
            if uts >= 0:
                libc.setns(uts, libc.CLONE_NEWUTS)
            yield
    finally:
        os.close(net)
        if uts >= 0:
            os.close(uts)


def open_netlink(net_path: str) -> tuple[int, Netlink]:
    """An fd on an existing pinned namespace and a netlink socket inside it."""
    with entered(net_path):
        return os.open(_SELF + "net", os.O_RDONLY), Netlink()


def iproute(net_path: str) -> IPRoute:
    """pyroute2's IPRoute socket inside an existing pinned namespace (pyroute2 loads here: 0.2 s, only when used)."""
    from pyroute2 import IPRoute

    with entered(net_path):
        return IPRoute()


def inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def pids_in(inodes: set[int]) -> list[int]:
    """Processes whose network or UTS namespace is one of ``inodes``."""
    return procs.in_namespaces(inodes)


def remove_pinned(paths: list[str], kill_by: list[str] | None = None) -> None:
    """Stop every process inside the pinned namespaces at ``kill_by`` (default ``paths``), then unpin ``paths``.

    The network namespaces among them are held open until all are unpinned, so that the kernel dismantles
    them together.  Let go one at a time, each was dismantled while the others still lived: the kernel's
    cleanup walks every living namespace for each one that dies, and each unmount waited behind that
    work for an RCU grace period (0.4 ms an unmount at 10 000 nodes, 9 µs on an idle kernel).
    """
    kill_inside({ino for p in (paths if kill_by is None else kill_by) if (ino := inode(p))})
    nets = []
    for path in paths:  # the rest first, before any network namespace dies
        if os.path.dirname(path) == names.NETNS_DIR:
            nets.append(path)
        else:
            unpin(path)
    room = max(64, libc.most_files() - len(os.listdir("/proc/self/fd")) - 64)  # files this process may still open
    for start in range(0, len(nets), room):  # a lab larger than the open-file limit: a batch per limit's worth
        held = []
        try:
            for path in nets[start : start + room]:
                try:
                    held.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                except OSError:  # not pinned (any more): nothing to hold
                    pass
                unpin(path)
        finally:
            for fd in held:
                os.close(fd)


def kill_inside(inodes: set[int], grace: float = 1.0, keep: frozenset[int] = frozenset()) -> None:
    """SIGTERM the processes in those namespaces (but ``keep``), SIGKILL whatever is left after ``grace`` seconds."""
    pids = [pid for pid in pids_in(inodes) if pid not in keep] if inodes else []
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
            pids = [p for p in pids if procs.alive(p)]
            time.sleep(0.01)
        if not pids:
            return


def join(net_path: str, uts_path: str, view: str | None = None) -> None:
    """Move the calling thread, for good, into a node's namespaces (and view): call it in a thread
    of its own (``containers.in_thread``)."""
    libc.unshare(libc.CLONE_FS)
    for path, flag in ((net_path, libc.CLONE_NEWNET), (uts_path, libc.CLONE_NEWUTS), (view, libc.CLONE_NEWNS)):
        if path:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                libc.setns(fd, flag)
            finally:
                os.close(fd)

"""Namespaces made by a helper process while the deploying one plans the lab.

Making a lab's namespaces is kernel work that needs nothing of the checked plan.  :func:`start` forks a
helper that, on the other CPU, does that work from what a deploy says it wants (:class:`Wanted`, from a
glance at the file: model/glance.py): it unshares an anonymous network + UTS namespace per node, brings
its loopback up (a plain bridge node also gets its sysctls and its bridge), and hands each over through a
socket pair (fds on the namespaces and a netlink socket inside).
:func:`~nestlab.backends.kernel.namespaces.create` takes a node's spare instead of unsharing.

A spare is nothing until it is pinned: no name and no mount.  The kernel frees it with its last fd, so a
refused file, a crash or a kill leaves nothing; spares not taken are freed by :func:`stop`.  The helper
dies with its parent (PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from . import libc, netlink, sysctl

_PR_SET_PDEATHSIG = 1
_SO_SNDBUFFORCE = 32
_HUNG = 10.0  # seconds without a message: the helper is stuck, stop waiting for it
_RECV = 1 << 12  # a message: its kind and a node's name


class Wanted(NamedTuple):
    """What to make ahead: namespaces for ``nodes`` (plus ``extra`` unnamed ones), and a bridge marked with
    ``alias`` in each of ``bridges`` (with ``bridge_sysctls``)."""

    alias: str
    nodes: Sequence[str]
    extra: int = 0
    bridges: Sequence[str] = ()
    bridge_sysctls: Sequence[tuple[str, str]] = ()  # what a bridge node's kind sets in its namespace


class Spare(NamedTuple):
    net: int  # fd on the network namespace
    uts: int  # fd on the UTS namespace
    sock: socket.socket  # a bound NETLINK_ROUTE socket made inside it


class _Helper(NamedTuple):
    channel: socket.socket
    pid: int


_lock = threading.Lock()
_helper: _Helper | None = None
_named: dict[str, Spare] = {}  # received, not taken yet
_unnamed: list[Spare] = []
_ended = True  # the helper has sent everything it will send
_count: int | None = None  # how many spares the helper said it makes


def start(ahead: Callable[[], Wanted]) -> None:
    """Fork the helper; it calls ``ahead()`` (say, to glance at the topology file) and makes what it says.

    Call it before loading anything heavy: the fork then copies little, and the helper's work
    overlaps the caller's.  ``ahead`` should need no import the caller has not done (another thread
    may hold an import lock at the fork).  A second call while a helper runs does nothing.
    """
    global _helper, _ended, _count
    if _helper is not None:
        return
    # Datagrams keep the messages apart; a pair's sender is bounded only by its buffer: room for a large lab.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        theirs.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, 64 << 20)
    except PermissionError:
        pass
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the helper: never returns
        try:
            ours.close()
            _make(theirs, ahead, parent)
        finally:
            os._exit(0)
    theirs.close()
    ours.settimeout(_HUNG)
    _helper, _ended, _count = _Helper(ours, pid), False, None
    _named.clear()
    _unnamed.clear()


def _make(channel: socket.socket, ahead: Callable[[], Wanted], parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C is the parent's to handle; it then stops the helper
    want = ahead()
    bridges = set(want.bridges)
    order = [n for n in want.nodes if n in bridges] + [n for n in want.nodes if n not in bridges] + [""] * want.extra
    order = order[: libc.most_files()]  # no more than a deploy could pin: it makes the rest itself
    try:
        channel.send(b"count\0%d" % len(order))
    except OSError:
        return
    for name in order:
        try:
            libc.unshare(libc.CLONE_NEWNET | libc.CLONE_NEWUTS)
            net, uts = os.open("/proc/self/ns/net", os.O_RDONLY), os.open("/proc/self/ns/uts", os.O_RDONLY)
            nl = netlink.Netlink()
            nl.run(netlink.set_up("lo"))  # every node's loopback is up
            if name in bridges:  # before its first port: no IPv6 on ports, as the applier sets for a switch
                for key, value in want.bridge_sysctls:
                    sysctl.write(key, value)
                nl.run(netlink.new_bridge(name, want.alias, snooping=False))
            socket.send_fds(channel, [b"spare\0" + name.encode()], [net, uts, nl.sock.fileno()])
        except Exception:  # the namespace limit, a parent that is done: the parent makes the rest itself
            return
        for fd in (net, uts):
            os.close(fd)
        nl.close()  # the parent's now: the helper must not read answers meant for it
    try:
        channel.send(b"end\0")
    except OSError:  # the parent is gone
        return


def coming() -> bool:
    """Whether a helper runs and makes spares (it says how many as soon as it knows what it makes)."""
    with _lock:
        while _helper is not None and _count is None and not _ended and _receive():
            pass
        return _helper is not None and bool(_count)


def take(node: str) -> Spare | None:
    """The spare made for ``node`` (or an unnamed one), waiting for the helper to make it; None when there is none."""
    with _lock:
        while True:
            if node in _named:
                return _named.pop(node)
            if _unnamed:  # they come after every named one: none is coming for this node
                return _unnamed.pop()
            if _ended or not _receive():
                return None


def _receive() -> bool:
    """Read one message of the helper's; False once it has nothing more (or is gone, or hung: then it is stopped)."""
    global _ended, _count
    try:
        assert _helper is not None  # started before anything is asked of it
        message, fds, _, _ = socket.recv_fds(_helper.channel, _RECV, 3)
    except OSError:
        message, fds = b"", []
    kind, _, rest = message.partition(b"\0")
    if kind == b"count":
        _count = int(rest)
        return True
    if kind == b"spare" and len(fds) == 3:
        spare = Spare(fds[0], fds[1], socket.socket(fileno=fds[2]))
        if rest:
            _named[rest.decode()] = spare
        else:
            _unnamed.append(spare)
        return True
    for fd in fds:
        os.close(fd)
    _ended = True
    if kind != b"end":  # gone or hung
        _stop()
    return False


def stop() -> None:
    """Free the spares not taken (they die with the helper and the channel) and reap the helper."""
    with _lock:
        _stop()


def _stop() -> None:
    global _helper, _ended
    if _helper is None:
        return
    os.kill(_helper.pid, signal.SIGKILL)
    os.waitpid(_helper.pid, 0)
    _helper.channel.close()
    _helper, _ended = None, True
    for spare in [*_named.values(), *_unnamed]:
        os.close(spare.net)
        os.close(spare.uts)
        spare.sock.close()
    _named.clear()
    _unnamed.clear()

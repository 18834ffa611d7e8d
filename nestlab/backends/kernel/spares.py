"""Namespaces and cables made by a helper process while the deploying one is still loading the topology.

``nestlab deploy`` spends its first ~0.3 s importing and checking the file on one CPU; making the
namespaces and veth pairs is kernel work of about the same length.  :func:`start` forks a helper
that, on the other CPU, does that work from a glance at the file (model/glance.py): it unshares an
anonymous network + UTS namespace per node, brings its loopback up (a plain bridge node also gets
its sysctls and its bridge), hands each over through a socket pair (fds on the namespaces and a
netlink socket inside), and then wires the plain cables between them as the veth mode would.
:func:`~nestlab.backends.kernel.namespaces.create` takes a node's spare instead of unsharing; the applier
keeps the cables the checked plan wants (:func:`wired`) and removes the others.

A spare is nothing until it is pinned: no name and no mount.  The kernel frees it, and what is
wired inside it, with its last fd, so a refused file, a crash or a kill leaves nothing; spares not
taken are freed by :func:`stop`.  The helper dies with its parent (PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import json
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
_CHUNK = 50  # cables per batch and per message (~25 ms of kernel work; a message must fit _RECV)
_RECV = 1 << 15


class Wanted(NamedTuple):
    """What to make ahead: namespaces for ``nodes`` (plus ``extra`` unnamed ones), a bridge in each of
    ``bridges`` (with ``bridge_sysctls``), and veth ``cables`` (node, interface, node, interface) marked with ``alias``."""

    alias: str
    nodes: Sequence[str]
    extra: int = 0
    bridges: Sequence[str] = ()
    cables: Sequence[tuple[str, str, str, str]] = ()
    bridge_sysctls: Sequence[tuple[str, str]] = ()  # what a bridge node's kind sets in its namespace


class Spare(NamedTuple):
    net: int  # fd on the network namespace
    uts: int  # fd on the UTS namespace
    sock: socket.socket  # a bound NETLINK_ROUTE socket made inside it


class Cable(NamedTuple):
    """A veth pair the helper made from its ``main`` end (the bridge side, ``enslaved`` at birth when the
    helper made that bridge) with its ``peer`` end in another namespace."""

    main: str
    main_if: str
    peer: str
    peer_if: str
    enslaved: bool


class _Helper(NamedTuple):
    channel: socket.socket
    pid: int


_lock = threading.Lock()
_helper: _Helper | None = None
_named: dict[str, Spare] = {}  # received, not taken yet
_unnamed: list[Spare] = []
_taken: set[str] = set()
_wired: list[Cable] = []
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
    _taken.clear()
    _wired.clear()


def _make(channel: socket.socket, ahead: Callable[[], Wanted], parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C is the parent's to handle; it then stops the helper
    want = ahead()
    limit = libc.most_files()  # each cabled node's namespace stays open here until the cables are made
    bridges, cabled = set(want.bridges), {n for c in want.cables for n in (c[0], c[2])}
    order = ([n for n in want.nodes if n in bridges] + [n for n in want.nodes if n not in bridges] + [""] * want.extra)[:limit]
    held: dict[str, int] = {}  # cabled node -> fd on its namespace
    masters: dict[str, int] = {}
    try:
        channel.send(b"count\0%d" % len(order))
    except OSError:
        return
    for name in order:  # no more than a deploy could pin
        try:
            libc.unshare(libc.CLONE_NEWNET | libc.CLONE_NEWUTS)
            net, uts = os.open("/proc/self/ns/net", os.O_RDONLY), os.open("/proc/self/ns/uts", os.O_RDONLY)
            nl = netlink.Netlink()
            nl.run(netlink.set_up("lo"))  # every node's loopback is up
            if name in bridges:  # before its first port: no IPv6 on ports, as the applier sets for a switch
                for key, value in want.bridge_sysctls:
                    sysctl.write(key, value)
                _, masters[name] = nl.run(netlink.new_bridge(name, want.alias, snooping=False), netlink.get_link(name))
            socket.send_fds(channel, [b"spare\0" + name.encode()], [net, uts, nl.sock.fileno()])
        except Exception:  # the namespace limit, a parent that is done: the parent makes the rest itself
            return
        os.close(uts)
        nl.close()  # the parent's now: the helper must not read answers meant for it
        if name in cabled:
            held[name] = net
        else:
            os.close(net)
    try:
        _wire(channel, want, held, masters)
        channel.send(b"end\0")
    except OSError:  # the parent is gone
        return


def _wire(channel: socket.socket, want: Wanted, held: dict[str, int], masters: dict[str, int]) -> None:
    """Make the cables, _CHUNK at a time in the namespace of their main ends (through a netlink socket of
    the helper's own there), saying after each chunk what it made; stop when the parent says so (it
    makes the rest itself rather than wait).  A chunk the kernel refuses in part is removed."""
    batches: dict[str, list[Cable]] = {}
    for a, ia, b, ib in want.cables:
        if a in held and b in held:
            cable = Cable(b, ib, a, ia, True) if b in masters and a not in masters else Cable(a, ia, b, ib, a in masters)
            batches.setdefault(cable.main, []).append(cable)
    for main, cables in batches.items():
        libc.setns(held[main], libc.CLONE_NEWNET)
        nl = netlink.Netlink()
        try:
            for start_at in range(0, len(cables), _CHUNK):
                try:
                    if channel.recv(8, socket.MSG_DONTWAIT) == b"stop":
                        return
                except BlockingIOError:
                    pass
                chunk = cables[start_at : start_at + _CHUNK]
                try:
                    nl.run(
                        *(
                            netlink.new_veth(c.main_if, c.peer_if, held[c.peer], alias=want.alias, master=masters.get(main))
                            for c in chunk
                        )
                    )
                except OSError:
                    for c in chunk:
                        try:
                            nl.run(netlink.del_link(c.main_if))
                        except OSError:
                            pass
                    continue
                channel.send(b"wired\0" + json.dumps(chunk).encode())
        finally:
            nl.close()


def coming() -> bool:
    """Whether a helper runs and makes spares (it says how many as soon as it has glanced at the file)."""
    with _lock:
        while _helper is not None and _count is None and not _ended and _receive():
            pass
        return _helper is not None and bool(_count)


def take(node: str) -> Spare | None:
    """The spare made for ``node`` (or an unnamed one), waiting for the helper to make it; None when there is none."""
    with _lock:
        while True:
            if node in _named:
                _taken.add(node)
                return _named.pop(node)
            if _unnamed:  # they come after every named one: none is coming for this node
                return _unnamed.pop()
            if _ended or not _receive():
                return None


def wired() -> list[tuple[Cable, bool, bool]]:
    """Every cable the helper made, after telling it to stop wiring, with whether its main and its peer
    node were taken (a cable between two taken spares is in place; one with an end not taken has to go)."""
    with _lock:
        if not _ended:
            try:
                _helper.channel.send(b"stop")
            except OSError:
                pass
        while not _ended and _receive():
            pass
        return [(c, c.main in _taken, c.peer in _taken) for c in _wired]


def _receive() -> bool:
    """Read one message of the helper's; False once it has nothing more (or is gone, or hung: then it is stopped)."""
    global _ended, _count
    try:
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
    if kind == b"wired":
        _wired.extend(Cable(*c) for c in json.loads(rest))
        return True
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

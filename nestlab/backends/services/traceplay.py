"""Replay a Mahimahi delivery trace on one interface, as Mahimahi's LinkQueue does: what the interface sends
waits in a queue and leaves at the trace's delivery opportunities (1500 bytes each, shared by small packets,
a large one spanning several), the period being the last line's time; a silence holds packets.

How: a u32 filter on the interface's HTB root redirects (mirred) everything it sends to a tap device the
player reads; the player queues it (droptail, ``queue`` packets) and writes each packet, at its opportunity,
to a packet socket on the interface with ``SO_PRIORITY`` 1:1, which HTB sends straight into class 1:1
(unlimited, then the leaf: netem or pfifo) without running the filter.  Started inside the node's network
namespace (``python -m nestlab.backends.services.traceplay IFACE TRACE QUEUE STATUS``), it ends with the
node; the tap goes with it, so a dead player leaves a link that carries nothing.  Its status file (start of
the trace's clock, heartbeat, lateness) tells :func:`health` whether it keeps up."""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

from ... import names
from ...model.trace import PACKET_BYTES, read
from ..kernel import containers, detached, files, namespaces, procs

if TYPE_CHECKING:
    from pyroute2 import IPRoute

TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000
CLASS = 0x10001  # HTB sends a packet whose priority is a leaf's handle straight to that leaf
FILTER_PRIO, FILTER_HANDLE = 1, 0x80000800  # the redirect's one u32 filter (800::800): a new player replaces it
BEAT_S = 1  # the player writes its status at least this often, silences included
ETH_HEADER, ETH_P_ALL = 14, 0x0003
LATE_MS = 20  # an opportunity served later than this is a lag (Mahimahi's clock is in whole ms)
STALE_S = 3  # a status older than this: the player is stopped or starved


def status_path(lab: str, node: str, iface: str) -> str:
    return os.path.join(names.lab_dir(lab), "traces", f"{names.netns_name(lab, node)}.{iface}.json")


def start(lab: str, node: str, iface: str, trace: str, queue: int) -> None:
    """The player of ``trace`` on ``node``'s ``iface``; returns once it carries the link (LabError if it died)."""
    status = status_path(lab, node, iface)
    files.make_dirs(os.path.dirname(status), 0o700)
    log = status[: -len(".json")] + ".log"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(status)
    with files.output(log) as err:
        proc = containers.popen_in(
            names.netns_path(lab, node),
            names.uts_path(lab, node),
            [],
            [*names.python_module(__name__), iface, trace, str(queue), status],
            **detached.options(stderr=err),
        )
    detached.ready(proc, status, log, f"the trace player of {node}:{iface}", 10)


def stop(lab: str, node: str, iface: str) -> None:
    """End the player of ``iface`` in that node, if one runs, and its redirect (before another starts or the trace
    is dropped)."""
    net_path = names.netns_path(lab, node)
    inode = namespaces.inode(net_path)
    if inode is None:
        return
    mine = [__name__.encode(), iface.encode()]
    for pid in procs.in_namespaces({inode}, ("net",)):
        if procs.cmdline(pid).split(b"\0")[1:5] == [b"-P", b"-m", *mine]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    from pyroute2.netlink.exceptions import NetlinkError

    ipr = namespaces.iproute(net_path)
    try:
        index = ipr.link_lookup(ifname=iface)
        if index:
            try:  # every filter at the redirect's priority (a stale one of an older nestlab too)
                ipr.tc("del-filter", index=index[0], parent=0x10000, prio=FILTER_PRIO, protocol=ETH_P_ALL)
            except NetlinkError as exc:
                if exc.code not in (errno.ENOENT, errno.EINVAL):  # no HTB root, or no filter: nothing to remove
                    raise
    finally:
        ipr.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(status_path(lab, node, iface))


def health(lab: str, node: str, iface: str) -> dict[str, Any]:
    """``{"player": "playing" | "lagging" | "dead", ...}`` from the player's status file and its process."""
    try:
        with open(status_path(lab, node, iface)) as fh:
            status = json.load(fh)
    except (OSError, ValueError):
        return {"player": "dead", "why": "no status: the player never started or its lab was redeployed"}
    alive = os.path.exists(f"/proc/{status['pid']}") and procs.cmdline(status["pid"]).split(b"\0")[1:4] == [
        b"-P",
        b"-m",
        __name__.encode(),
    ]
    out = {k: status[k] for k in ("pid", "start", "late_ms", "worst_ms", "lagged_s", "dropped")}
    out |= {k: status[k] for k in ("queue",) if k in status}
    if not alive:
        return {"player": "dead", "why": "its process is gone: the link carries nothing", **out}
    if (wrong := _misrouted(lab, node, iface, status.get("tap"))) is not None:
        return {"player": "dead", "why": wrong, **out}
    if time.time() - status["beat"] > STALE_S:
        return {"player": "lagging", "why": f"silent for {time.time() - status['beat']:.0f} s", **out}
    if status["late_ms"] > LATE_MS:
        return {"player": "lagging", "why": f"{status['late_ms']:.0f} ms behind the trace in its last second", **out}
    return {"player": "playing", **out}


def redirects(ipr: IPRoute, index: int) -> list[int]:
    """The interfaces the filters on ``index``'s HTB root redirect to, in order."""
    out = []
    for found in ipr.get_filters(index=index, parent=0x10000):
        acts = found.get_nested("TCA_OPTIONS", "TCA_U32_ACT")
        for _, act in acts["attrs"] if acts else ():
            if act.get_attr("TCA_ACT_KIND") == "mirred":
                out.append(act.get_nested("TCA_ACT_OPTIONS", "TCA_MIRRED_PARMS")["ifindex"])
    return out


def _misrouted(lab: str, node: str, iface: str, tap: int | None) -> str | None:
    """Why what ``iface`` sends does not reach its player's tap (None: it does)."""
    try:
        ipr = namespaces.iproute(names.netns_path(lab, node))
    except OSError:
        return "its node's namespace is gone"
    try:
        index = ipr.link_lookup(ifname=iface)
        found = redirects(ipr, index[0]) if index else []
    finally:
        ipr.close()
    if found == [tap]:
        return None
    if not found:
        return f"{iface} redirects nothing to the player: the link is not shaped by the trace"
    return f"{iface} redirects to interface(s) {found}, not the player's tap ({tap}): the link may carry nothing"


def _tap(index: int) -> tuple[int, str]:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    name = f"tq{index}"
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    with contextlib.suppress(OSError):
        files.in_place(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "1")  # nothing of the tap's own may enter the queue
    return fd, name


def _redirect(ipr: IPRoute, iface_index: int, tap_index: int) -> None:
    """The tap at the interface's MTU and up, and everything the interface sends redirected to it."""
    mtu = ipr.get_links(iface_index)[0].get_attr("IFLA_MTU")
    ipr.link("set", index=tap_index, mtu=mtu, state="up")
    ipr.tc(
        "replace-filter", "u32", iface_index, parent=0x10000, prio=FILTER_PRIO, handle=FILTER_HANDLE, protocol=ETH_P_ALL,
        keys=["0x0/0x0+0"], target=CLASS,
        action=[{"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": tap_index}],
    )  # fmt: skip


class LinkQueue:
    """Mahimahi's LinkQueue: packets wait, droptail at ``limit``; each opportunity carries :data:`PACKET_BYTES`."""

    def __init__(self, times: list[int], limit: int, origin: float) -> None:
        self.times, self.period, self.limit = times, times[-1], limit
        self.base, self.next = origin, 0  # the current loop's start (monotonic s); the next opportunity's line
        self.queue: collections.deque[bytes] = collections.deque()
        self.left = 0  # bytes of the queue's head still to carry
        self.dropped = 0

    def due(self) -> float:
        return self.base + self.times[self.next] / 1000

    def enqueue(self, frame: bytes) -> None:
        if len(self.queue) >= self.limit:
            self.dropped += 1
        else:
            self.queue.append(frame)

    def advance(self, now: float) -> list[bytes]:
        """Use every opportunity up to ``now``; the packets they complete."""
        out = []
        while self.due() <= now:
            budget = PACKET_BYTES
            self.next += 1
            if self.next == len(self.times):
                self.next, self.base = 0, self.base + self.period / 1000
            while budget > 0 and self.queue:
                if not self.left:
                    self.left = max(1, len(self.queue[0]) - ETH_HEADER)
                used = min(budget, self.left)
                self.left -= used
                budget -= used
                if not self.left:
                    out.append(self.queue.popleft())
        return out


def play(iface: str, trace: str, limit: int, status: str) -> None:
    from pyroute2 import IPRoute

    times = read(trace)
    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=iface)
        fd, tap = _tap(index)
        tap_index = ipr.link_lookup(ifname=tap)[0]
        _redirect(ipr, index, tap_index)
    out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    out.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, CLASS)
    out.bind((iface, 0))
    origin = time.monotonic()
    wall = time.time() - (time.monotonic() - origin)
    link = LinkQueue(times, limit, origin)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    late, worst, lagged, beat = 0.0, 0.0, 0.0, origin

    def report() -> None:
        state = {"pid": os.getpid(), "tap": tap_index, "start": wall, "beat": time.time(), "late_ms": round(late, 1)}
        state |= {"queue": limit, "queued": len(link.queue)}
        state |= {"worst_ms": round(worst, 1), "lagged_s": round(lagged, 1), "dropped": link.dropped}
        files.write(status, json.dumps(state), 0o600, sync=False)

    report()  # the link is carried from here
    while True:
        due = link.due()
        wait = min(due - time.monotonic(), BEAT_S)  # a trace's silence still beats
        poller.poll(int(wait * 1000) + 1 if wait > 0 else 0)
        now = time.monotonic()
        if due <= now and link.queue:
            late = max(late, (now - due) * 1000)
        for frame in link.advance(now):
            with contextlib.suppress(OSError):  # e.g. the interface is down: the packet is lost, as on a wire
                out.send(frame)
        while True:
            try:
                link.enqueue(os.read(fd, 65536))
            except BlockingIOError:
                break
        if now - beat >= BEAT_S:
            worst, lagged = max(worst, late), lagged + (now - beat if late > LATE_MS else 0)
            report()
            late, beat = 0.0, now


if __name__ == "__main__":
    try:
        os.nice(-5)  # on time, before the traffic it shapes
    except OSError:
        pass
    play(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])

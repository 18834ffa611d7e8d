"""Link shaping: HTB (64-bit rates) with a netem or fifo child.

Every shaped interface gets the same tree, so any later change is a ``replace``
of an existing object and never leaves a moment without shaping::

    root 1: htb (default 1) -> class 1:1 (rate, burst) -> qdisc 10: netem | pfifo (queue)
    root 1: tbf (rate, burst)                   -> qdisc 10: netem | pfifo     (with qdisc: tbf)

No rate means the class runs at 400gbit, i.e. unlimited.  Sockets are kept per
namespace, so a change costs one or two netlink round trips.  The HTB tree (root, class, fifo),
up/down and a netem with a distribution are hand-packed (``netlink.py``): through pyroute2 each took
~3 ms here, hand-packed ~0.1 ms, and a shell's ``nestlab link set --rate`` does not import pyroute2
(~150 ms).  TBF, a uniform netem and removing the tree go through pyroute2's tc support.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import LabError
from ...model.units import parse_gemodel, parse_percent, parse_rate, parse_size, parse_time
from . import namespaces, netlink, rtdump, tcstats

if TYPE_CHECKING:
    from pyroute2 import IPRoute

NETEM_KEYS = ("delay", "jitter", "distribution", "loss", "loss_correlation", "corrupt", "duplicate", "reorder", "gemodel")


def burst_for(bits: int, mtu: int = 1500) -> int:
    """HTB/TBF burst in bytes: 20 ms worth of the rate, at least one 64 KB GSO packet plus an MTU.

    While a vCPU is stolen the shaper cannot send, and on waking it may catch up only by its burst;
    the rest of the stall is lost.  Measured here at 1 Gbit/s, TCP, 5 s runs interleaved, 4-27 %
    of the CPU stolen: a 4 ms burst carried 912-941 Mbit/s, 20 ms 948-958 (the most TCP can carry
    is 956); 1 ms carried 670-820.  The price: after an idle spell a flow may send 20 ms worth at
    once; set ``burst`` per link for short-flow experiments.
    """
    return max(bits // 8 // 50, 65536 + mtu)


DIST_DIRS = ("/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc", "/usr/share/tc")


def distribution_table(name: str) -> list[int]:
    """The delay distribution table iproute2 ships as ``NAME.dist`` (normal, pareto, paretonormal)."""
    for folder in DIST_DIRS:
        path = os.path.join(folder, f"{name}.dist")
        if os.path.exists(path):
            with open(path) as fh:
                return [int(x) for line in fh if not line.startswith("#") for x in line.split()]
    raise LabError(f"no {name}.dist table found (looked in {', '.join(DIST_DIRS)}); it comes with Debian's iproute2")


def netem_options(shape: dict[str, Any]) -> dict[str, Any]:
    """pyroute2 netem arguments (times in µs, shares in %) from a shape."""
    opts: dict[str, Any] = {}
    if "delay" in shape:
        opts["delay"] = parse_time(shape["delay"])
    if "jitter" in shape:
        opts["jitter"] = parse_time(shape["jitter"])
    pairs = (
        ("loss", "loss"),
        ("loss_correlation", "loss_corr"),
        ("duplicate", "duplicate"),
        ("reorder", "prob_reorder"),
        ("corrupt", "prob_corrupt"),
    )
    for key, arg in pairs:
        if key in shape:
            opts[arg] = parse_percent(shape[key])
    if "gemodel" in shape:
        opts["gemodel"] = parse_gemodel(shape["gemodel"])
    return opts


@dataclass(frozen=True)
class Qdisc:
    handle: int
    parent: int
    kind: str
    options: bytes

    def u32(self, offset: int) -> int:
        """A 32-bit field of the options struct."""
        value: int = struct.unpack_from("=I", self.options, offset)[0]
        return value


def _refused(exc: BaseException) -> bool:
    """A kernel refusal, through nestlab's netlink or pyroute2's (which is imported only when a change needs it)."""
    pyroute2 = sys.modules.get("pyroute2.netlink.exceptions")
    return isinstance(exc, netlink.NetlinkError) or (pyroute2 is not None and isinstance(exc, pyroute2.NetlinkError))


def _refusal(ifname: str, shape: dict[str, Any], exc: Exception) -> LabError:
    """What the kernel's refusal of ``shape`` on ``ifname`` means, for the person who asked."""
    code = getattr(exc, "code", 0)
    if "delay" in shape or code == errno.ENOENT:
        return LabError(
            f"shaping {ifname}: {exc.args[-1] if exc.args else exc} - delay/jitter/loss need netem "
            "(CONFIG_NET_SCH_NETEM) and rates need HTB (CONFIG_NET_SCH_HTB); see `nestlab doctor`"
        )
    given = ", ".join(f"{k}={v}" for k, v in sorted(shape.items()))
    return LabError(f"shaping {ifname}: the kernel refused {given} ({os.strerror(code)})")


class Shaper:
    """Applies shapes and link states inside a lab's namespaces, reusing one pyroute2 socket per namespace."""

    def __init__(self) -> None:
        self._sockets: dict[str, IPRoute] = {}
        self._index: dict[tuple[str, str], int] = {}
        self._root: dict[tuple[str, str], str] = {}  # kind of the root qdisc ("" = none), as last seen
        self._child: dict[tuple[str, str], tuple[object, ...]] = {}  # last known leaf qdisc, to skip replacing it unchanged
        self._netlink: dict[str, tuple[int, netlink.Netlink]] = {}  # hand-packed fast path: rate changes and up/down
        self._states: dict[str, dict[int, str]] = {}  # operational states by ifindex, per namespace, for show()
        self._shown: dict[str, dict[int, list[Qdisc]]] = {}  # qdiscs by ifindex, per namespace, for show()

    def _ipr(self, path: str) -> IPRoute:
        if path not in self._sockets:
            self._sockets[path] = namespaces.iproute(path)
        return self._sockets[path]

    def _fast(self, path: str) -> netlink.Netlink:
        if path not in self._netlink:
            self._netlink[path] = namespaces.open_netlink(path)
        return self._netlink[path][1]

    def qdiscs(self, path: str, index: int) -> list[Qdisc]:
        """The qdiscs on interface ``index``."""
        return self._qdisc_table(path, index).get(index, [])

    def _qdisc_table(self, path: str, index: int | None = None) -> dict[int, list[Qdisc]]:
        """A namespace's qdiscs by interface index (only ``index``'s if given).  The kernel dumps them
        whole: only the headers are read to pick one interface's (a switch namespace may hold thousands)."""
        found: dict[int, list[Qdisc]] = {}
        for _type, body in self._fast(path).dump(netlink.RTM_GETQDISC, tcstats.TCMSG.pack(0, 0, 0, 0, 0)):
            _family, ifindex, handle, parent, _info = tcstats.TCMSG.unpack_from(body)
            if index is None or ifindex == index:
                a = netlink.attrs(body, tcstats.TCMSG.size)
                found.setdefault(ifindex, []).append(
                    Qdisc(handle, parent, a.get(tcstats.TCA_KIND, b"").rstrip(b"\0").decode(), a.get(tcstats.TCA_OPTIONS, b""))
                )
        return found

    def index(self, path: str, ifname: str) -> int:
        key = (path, ifname)
        if key not in self._index:
            try:
                (self._index[key],) = self._fast(path).run(netlink.get_link(ifname))
            except netlink.NetlinkError:
                raise LabError(f"interface {ifname} does not exist in {path}") from None
        return self._index[key]

    def prepare(self, path: str, ifname: str) -> None:
        """Open the namespace's socket, look the interface up and note an existing HTB root (before timed work)."""
        index = self.index(path, ifname)
        self._root[(path, ifname)] = ""
        for q in self.qdiscs(path, index):
            if q.handle == 0x10000:
                self._root[(path, ifname)] = q.kind
            elif q.handle == 0x100000 and q.kind == "pfifo":
                self._child[(path, ifname)] = ("pfifo", q.u32(0))

    def apply(self, path: str, ifname: str, shape: dict[str, Any]) -> None:
        """Make ``ifname``'s egress follow ``shape`` (an empty shape removes all shaping)."""
        index, key = self.index(path, ifname), (path, ifname)
        if not shape:
            self._unshaped(path, index, key)
            return
        bits = (
            parse_rate(shape["rate"]) if "rate" in shape else (tcstats.UNLIMITED if shape.get("qdisc") != "tbf" else 34 * 10**9)
        )
        if "trace" in shape:  # the trace's player (services/traceplay.py) holds and releases packets; 1:1 is unlimited
            bits, shape = tcstats.UNLIMITED, {k: v for k, v in shape.items() if k not in ("queue", "qdisc")}
        burst = parse_size(shape["burst"]) if "burst" in shape else burst_for(bits)
        try:
            self._rooted(path, index, key, shape.get("qdisc", "htb"), bits, burst)
            self._queued(path, index, key, shape)
        except Exception as exc:  # noqa: BLE001 - ours or pyroute2's NetlinkError, imported only when needed
            if not _refused(exc):
                raise
            self._root.pop(key, None)
            self._child.pop(key, None)
            raise _refusal(ifname, shape, exc) from None

    def _unshaped(self, path: str, index: int, key: tuple[str, str]) -> None:
        try:
            self._ipr(path).tc("del", index=index, handle="1:", root=True)
        except Exception as exc:  # noqa: BLE001 - pyroute2's NetlinkError, imported only when needed
            if not _refused(exc) or getattr(exc, "code", None) not in (errno.ENOENT, errno.EINVAL):
                raise
        self._root[key] = ""
        self._child.pop(key, None)

    def _rooted(self, path: str, index: int, key: tuple[str, str], want: str, bits: int, burst: int) -> None:
        """The root qdisc ``want`` (htb or tbf) at ``bits`` per second, replaced in place where it can be."""
        if self._root.get(key) is None:
            self._root[key] = next((q.kind for q in self.qdiscs(path, index) if q.handle == 0x10000), "")
        if self._root[key] not in (want, ""):  # switching htb <-> tbf cannot be done in place
            self._ipr(path).tc("del", index=index, handle="1:", root=True)
            self._child.pop(key, None)
        if want == "tbf":  # TBF root (32-bit rates in pyroute2), replaced in place
            self._ipr(path).tc("replace", "tbf", index=index, handle="1:", rate=f"{bits}bit", burst=burst, latency="50ms")
        else:
            if self._root[key] != "htb":
                self._fast(path).run(netlink.htb_root(index))
            self._fast(path).run(netlink.htb_class(index, 0x10001, 0x10000, bits, burst))
        self._root[key] = want

    def _queued(self, path: str, index: int, key: tuple[str, str], shape: dict[str, Any]) -> None:
        """The child qdisc under 1:1: netem with the shape's impairments, else a plain FIFO of its queue's length."""
        netem = netem_options(shape)
        limit = int(shape.get("queue", 1000))
        child = ("netem", tuple(sorted(netem.items())), limit, shape.get("distribution")) if netem else ("pfifo", limit)
        if self._child.get(key) == child:
            return
        if netem and (shape.get("distribution", "uniform") != "uniform" or "gemodel" in netem):  # pyroute2 sends neither
            spread = shape.get("distribution", "uniform")
            table = distribution_table(spread) if spread != "uniform" else None
            self._fast(path).run(netlink.netem(index, 0x100000, 0x10001, limit=limit, table=table, **netem))
        elif netem:
            self._ipr(path).tc("replace", "netem", index=index, parent="1:1", handle="10:", limit=limit, **netem)
        else:
            self._fast(path).run(netlink.pfifo(index, 0x100000, 0x10001, limit))
        self._child[key] = child

    def delete(self, path: str, ifname: str) -> None:
        self._fast(path).run(netlink.del_link(ifname))

    def forget(self, path: str, ifname: str) -> None:
        """Drop what is cached about an interface that was deleted (it may come back with a new index)."""
        for cache in (self._index, self._root, self._child):
            cache.pop((path, ifname), None)

    def set_mtu(self, path: str, ifname: str, mtu: int) -> None:
        self._fast(path).run(netlink.set_mtu(self.index(path, ifname), mtu))

    def set_state(self, path: str, ifname: str, up: bool) -> None:
        self._fast(path).run(netlink.set_state(self.index(path, ifname), up))

    def show(self, path: str, ifname: str) -> dict[str, Any]:
        """The shaping in force on ``ifname``, read back from the kernel (each namespace's interfaces
        and qdiscs are dumped once per Shaper: use a fresh one for a fresh reading)."""
        index, nl = self.index(path, ifname), self._fast(path)
        if path not in self._states:
            self._states[path] = {i.index: i.state for i in rtdump.interfaces(nl, counters=False)}
            self._shown[path] = self._qdisc_table(path)
        out: dict[str, Any] = {"state": self._states[path].get(index, "missing").lower()}
        rate = tcstats.htb_rate(nl, index)
        if rate is not None:
            out["rate_bps"] = rate
        for q in self._shown[path].get(index, []):
            if q.kind == "netem":  # struct tc_netem_qopt: latency, limit, loss, gap, duplicate, jitter
                out["netem"] = {"limit": q.u32(4), "loss_u32": q.u32(8), "duplicate_u32": q.u32(16)}
            elif q.kind == "pfifo" and q.parent == 0x10001:
                out["queue"] = q.u32(0)
        return out

    def close(self) -> None:
        for ipr in self._sockets.values():
            ipr.close()
        self._sockets.clear()
        for fd, nl in self._netlink.values():
            nl.close()
            os.close(fd)
        self._netlink.clear()

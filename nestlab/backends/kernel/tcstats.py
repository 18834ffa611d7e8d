"""What a namespace's shapers are doing: per interface, the rate in force and the counters of its
root qdisc (bytes sent, drops, overlimits, backlog) and of its netem (settings, queue, drops).

One qdisc dump per namespace, plus one class dump per HTB-shaped interface (the kernel answers class
dumps for one interface at a time); parsed by hand as in ``rtdump``.  The layout is the one
``shaping.Shaper`` builds: root ``1:`` (htb with class ``1:1``, or tbf), child ``10:`` (netem or pfifo).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .netlink import RTM_GETQDISC, Netlink, attrs

TCMSG = struct.Struct("=BxxxiIII")  # struct tcmsg: family, ifindex, handle, parent, info
_RTM_GETTCLASS = 42
TCA_KIND, TCA_OPTIONS, TCA_STATS2 = 1, 2, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE = 1, 3
_BASIC = struct.Struct("=QI")  # struct gnet_stats_basic: bytes, packets
_QUEUE = struct.Struct("=5I")  # struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
TCA_HTB_PARMS, TCA_HTB_RATE64 = 1, 6
TCA_TBF_PARMS, TCA_TBF_RATE64 = 1, 4
_NETEM = struct.Struct("=6I")  # struct tc_netem_qopt: latency (ticks), limit, loss, gap, duplicate, jitter (ticks)
TCA_NETEM_CORR, TCA_NETEM_LOSS, TCA_NETEM_LATENCY64, TCA_NETEM_JITTER64 = 1, 5, 10, 11
NETEM_LOSS_GE = 2
PSCHED_SHIFT = 6  # a psched tick is 64 ns
ROOT, CLASS, CHILD = 0x10000, 0x10001, 0x100000
UNLIMITED = 400 * 10**9  # the rate an HTB class gets when the link has none


@dataclass(frozen=True)
class Counters:
    """A qdisc's statistics at one moment."""

    bytes: int = 0
    packets: int = 0
    qlen: int = 0
    backlog: int = 0
    drops: int = 0
    overlimits: int = 0


@dataclass(frozen=True)
class Netem:
    delay_ns: int
    jitter_ns: int
    loss: float  # 0..1, the long-run share (of a Gilbert-Elliott model: its stationary loss)
    counters: Counters
    bursty: bool = False  # correlated or Gilbert-Elliott loss: drops come in runs


@dataclass(frozen=True)
class Shaped:
    """An interface with nestlab's shaping tree: its rate (None: unlimited), root counters and netem."""

    index: int
    rate_bps: int | None
    root: Counters
    netem: Netem | None


def _counters(a: dict[int, bytes]) -> Counters:
    if TCA_STATS2 not in a:
        return Counters()
    s = attrs(a[TCA_STATS2], 0)
    sent, packets = _BASIC.unpack_from(s[TCA_STATS_BASIC]) if TCA_STATS_BASIC in s else (0, 0)
    qlen, backlog, drops, _requeues, overlimits = _QUEUE.unpack_from(s[TCA_STATS_QUEUE]) if TCA_STATS_QUEUE in s else (0,) * 5
    return Counters(sent, packets, qlen, backlog, drops, overlimits)


def _netem(options: bytes, counters: Counters) -> Netem:
    latency, _limit, loss, _gap, _duplicate, jitter = _NETEM.unpack_from(options)
    extra = attrs(options, _NETEM.size)
    delay = struct.unpack("=q", extra[TCA_NETEM_LATENCY64])[0] if TCA_NETEM_LATENCY64 in extra else latency << PSCHED_SHIFT
    spread = struct.unpack("=q", extra[TCA_NETEM_JITTER64])[0] if TCA_NETEM_JITTER64 in extra else jitter << PSCHED_SHIFT
    share, bursty = loss / 0xFFFFFFFF, TCA_NETEM_CORR in extra and any(struct.unpack_from("=3I", extra[TCA_NETEM_CORR]))
    models = attrs(extra[TCA_NETEM_LOSS], 0) if TCA_NETEM_LOSS in extra else {}
    if NETEM_LOSS_GE in models:
        p, r, h, k1 = (x / 0xFFFFFFFF for x in struct.unpack_from("=4I", models[NETEM_LOSS_GE]))
        share, bursty = (p * (1 - h) + r * k1) / (p + r) if p + r else k1, True
    return Netem(delay, spread, share, counters, bursty)


def htb_rate(nl: Netlink, index: int) -> int | None:
    """The rate of class 1:1 on interface ``index`` in bit/s (UNLIMITED for an unshaped rate; None: no HTB class)."""
    for _type, body in nl.dump(_RTM_GETTCLASS, TCMSG.pack(0, index, 0, 0, 0)):
        a = attrs(body, TCMSG.size)
        if TCMSG.unpack_from(body)[2] == CLASS and a.get(TCA_KIND, b"").rstrip(b"\0") == b"htb":
            return _rate(a[TCA_OPTIONS], TCA_HTB_RATE64, TCA_HTB_PARMS)
    return None


def _rate(options: bytes, rate64: int, parms: int) -> int:
    """An HTB class's or TBF's rate in bit/s: its 64-bit attribute when the rate passes 32 bits, else the
    tc_ratespec at the head of its parameters (the rate at byte 8)."""
    opts = attrs(options, 0)
    rate = struct.unpack("=Q", opts[rate64])[0] if rate64 in opts else struct.unpack_from("=I", opts[parms], 8)[0]
    bits: int = rate * 8
    return bits


def read(nl: Netlink) -> dict[int, Shaped]:
    """The shaped interfaces of ``nl``'s namespace by index."""
    roots: dict[int, tuple[str, bytes, Counters]] = {}
    netems: dict[int, Netem] = {}
    for _type, body in nl.dump(RTM_GETQDISC, TCMSG.pack(0, 0, 0, 0, 0)):
        _family, index, handle, _parent, _info = TCMSG.unpack_from(body)
        a = attrs(body, TCMSG.size)
        kind = a.get(TCA_KIND, b"").rstrip(b"\0").decode()
        if handle == ROOT and kind in ("htb", "tbf"):
            roots[index] = (kind, a.get(TCA_OPTIONS, b""), _counters(a))
        elif handle == CHILD and kind == "netem":
            netems[index] = _netem(a.get(TCA_OPTIONS, b""), _counters(a))
    shaped = {}
    for index, (kind, options, counters) in roots.items():
        rate = htb_rate(nl, index) if kind == "htb" else _rate(options, TCA_TBF_RATE64, TCA_TBF_PARMS)
        shaped[index] = Shaped(index, rate if rate and rate < UNLIMITED else None, counters, netems.get(index))
    return shaped

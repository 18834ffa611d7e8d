"""One wireless channel's airtime and reception, as 802.11's DCF and a receiver share them (pure: the medium
feeds it frames and time, in integer nanoseconds, so a slot is a slot exactly).

Access (802.11-2016 10.3): each station queues its frames as mac80211 does (``Sender``: fq_codel per
destination, airtime fairness between destinations).  Its next frame waits until the air is idle
*as that station hears it* for DIFS (EIFS after a frame it sensed but could not read, NAV after a unicast
frame it read: the ACK's time), then counts down a random backoff of whole slots (contention window CWmin,
doubled on each retry); a frame it senses starting freezes the count (the slots already counted stay
counted), which resumes after the next idle DIFS.  Two stations whose counts end in the same slot, or within
a slot of each other (too soon to sense), both send.  After its frame a station draws a new backoff.

Reception: every frame on the air adds its power (mW) at every station to the noise (unless under 1 % of it); a receiver locks on
a frame whose preamble it senses with SINR of 4 dB or more (ns-3's threshold preamble detection), or on a
later one 5 dB stronger than the one it follows (frame capture), and decodes it with each stretch of it
lost by the SINR over that stretch against the rate's threshold (the standard's sensitivity over the noise
floor it assumes).  A unicast frame is acknowledged (SIFS + ACK, heard by the receiver's neighbours) or
retried up to 7 times; broadcast goes once at the basic rate, with no ACK.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...model import fading as fades
from ...model import radio
from .ratecontrol import CONTROLS

if TYPE_CHECKING:
    import numpy as np

    from ...model.wireless import Fading, Propagation

RETRY_LIMIT = 7  # attempts after the first (the usual dot11LongRetryLimit)
CW_MAX = 1023
PREAMBLE_DB = 4.0  # SINR a preamble needs to be detected (ns-3's ThresholdPreambleDetectionModel)
NEGLIGIBLE = 0.01  # a frame under 1 % of the noise floor at a receiver (-20 dB) adds nothing there that counts
CAPTURE_DB = 5.0  # a later frame this much stronger takes the receiver over (ns-3's SimpleFrameCaptureModel margin)
NS = 1000  # nanoseconds a microsecond
_OUT = (0, 1.0, 1.0)  # a pair out of range: sent at the basic rate, never received


def _ns(us: float) -> int:
    return round(us * NS)


@dataclass(eq=False)
class Tx:
    """One attempt on the air (times in ns): one frame, or an A-MPDU of several to one destination."""

    sender: int
    frames: list[bytes]
    dst: int  # -1: broadcast (or an address the medium has not seen)
    rate: int  # index into the standard's rates
    start: int
    end: int  # the PPDU's end; its ACK (or block ACK) follows SIFS later
    heard_by: list[int]  # the stations in range of its sender as it started: they sense it
    spans: list[tuple[int, int, int]]  # each frame's (start, end, octets on the air): decoded on its own
    overlaps: list[Tx] = field(default_factory=list)  # every frame on the air at some time during it
    fades: dict[int, float] = field(default_factory=dict)  # its fading's power gain at each station, drawn when first needed


# -- queues, as Linux's mac80211 keeps them -----------------------------------------------------------------
TARGET = 5_000_000  # CoDel's target sojourn (RFC 8289): 5 ms, in ns
INTERVAL = 100_000_000  # CoDel's interval: 100 ms
QUANTUM = 1514  # bytes a flow sends each round (fq_codel's quantum: one full frame, RFC 8290)
BUCKETS = 1024  # flows per destination (fq_codel's default)
AIRTIME_QUANTUM = 256_000  # ns a destination's turn adds (mac80211's IEEE80211_DEFAULT_AIRTIME_WEIGHT, 256 µs)


@dataclass(eq=False)
class Flow:
    """One flow's frames (enqueued at, frame) and its CoDel state (RFC 8289)."""

    key: int
    frames: deque[tuple[int, bytes]] = field(default_factory=deque)
    deficit: int = QUANTUM
    first_above: int = 0
    dropping: bool = False
    count: int = 0
    lastcount: int = 0
    drop_next: int = 0


def flow_key(frame: bytes) -> int:
    """A frame's flow bucket: its IPv4 or IPv6 5-tuple (protocol, addresses, ports), else its MAC addresses and type."""
    kind = frame[12:14]
    if kind == b"\x08\x00" and len(frame) >= 34:
        ports = 14 + 4 * (frame[14] & 15)
        key = frame[23:24] + frame[26:34] + frame[ports : ports + 4]
    elif kind == b"\x86\xdd" and len(frame) >= 54:
        key = frame[20:21] + frame[22:58]
    else:
        key = frame[:14]
    return zlib.crc32(key) % BUCKETS


class Txq:
    """The frames one station has for one destination: fq_codel (RFC 8290), flows served by deficit round
    robin, new flows first, each flow's sojourn held near TARGET by CoDel."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender
        self.flows: dict[int, Flow] = {}
        self.new: deque[Flow] = deque()
        self.old: deque[Flow] = deque()

    def enqueue(self, frame: bytes, now: int) -> None:
        key = flow_key(frame)
        flow = self.flows.get(key)
        if flow is None:  # a flow is kept only while on the new or old list: a station spraying flows holds no more
            flow = self.flows[key] = Flow(key)
            self.new.append(flow)
        flow.frames.append((now, frame))

    def dequeue(self, now: int) -> bytes | None:
        """The next frame to send (None: nothing left), CoDel's drops made on the way."""
        while self.new or self.old:
            fresh = bool(self.new)
            flow = self.new[0] if fresh else self.old[0]
            if flow.deficit <= 0:
                flow.deficit += QUANTUM
                (self.new if fresh else self.old).popleft()
                self.old.append(flow)
                continue
            frame = self._codel(flow, now)
            if frame is None:  # empty: a new flow goes once to the old list (RFC 8290 4.2), an old one leaves
                (self.new if fresh else self.old).popleft()
                if fresh and self.old:
                    self.old.append(flow)
                else:
                    del self.flows[flow.key]
                continue
            flow.deficit -= len(frame)
            return frame
        return None

    def _pop(self, flow: Flow, now: int) -> tuple[bytes | None, bool]:
        """The flow's head frame and whether CoDel may drop it (its sojourn above TARGET for an INTERVAL)."""
        if not flow.frames:
            flow.first_above = 0
            return None, False
        at, frame = flow.frames.popleft()
        self.sender.backlog -= len(frame)
        self.sender.count -= 1
        if now - at < TARGET or self.sender.backlog <= self.sender.mtu:
            flow.first_above = 0
            return frame, False
        if not flow.first_above:
            flow.first_above = now + INTERVAL
            return frame, False
        return frame, now >= flow.first_above

    def _codel(self, flow: Flow, now: int) -> bytes | None:
        """CoDel's dequeue (RFC 8289 5.5): drops at INTERVAL / sqrt(count) while the sojourn stays high."""
        frame, ok = self._pop(flow, now)
        if flow.dropping:
            flow.dropping = ok
            while flow.dropping and now >= flow.drop_next:
                self.sender.counts["dropped"] += 1
                flow.count += 1
                frame, flow.dropping = self._pop(flow, now)
                if flow.dropping:
                    flow.drop_next += int(INTERVAL / math.sqrt(flow.count))
        elif ok:
            self.sender.counts["dropped"] += 1
            frame, _ = self._pop(flow, now)
            flow.dropping = True
            delta = flow.count - flow.lastcount
            flow.count = delta if delta > 1 and now - flow.drop_next < 16 * INTERVAL else 1
            flow.drop_next = now + int(INTERVAL / math.sqrt(flow.count))
            flow.lastcount = flow.count
        return frame

    def fattest(self) -> Flow:
        return max(self.flows.values(), key=lambda f: len(f.frames))


class Sender:
    """One station's frames: a Txq per destination (mac80211's per-station queues), served by airtime deficit
    round robin (mac80211's airtime fairness): a destination whose deficit is spent waits for the others' turns,
    so each gets about the same airtime whatever its rate."""

    def __init__(self, limit: int, counts: dict[str, int]) -> None:
        self.limit, self.counts = limit, counts  # counts["dropped"]: over the limit or by CoDel
        self.txqs: dict[int, Txq] = {}
        self.deficit: dict[int, int] = {}
        self.active: deque[int] = deque()  # destinations with frames, in turn
        self.count = self.backlog = 0
        self.mtu = 0  # the largest frame seen: CoDel never drops the last one queued

    def enqueue(self, frame: bytes, dst: int, now: int) -> None:
        """Queue ``frame``; over the limit, the head of the longest flow goes (fq_codel's overflow drop)."""
        txq = self.txqs.get(dst)
        if txq is None:  # a destination's queue is kept only while in turn: none for every peer ever sent to
            txq = self.txqs[dst] = Txq(self)
            self.deficit[dst] = AIRTIME_QUANTUM
            self.active.append(dst)
        txq.enqueue(frame, now)
        self.count += 1
        self.backlog += len(frame)
        self.mtu = max(self.mtu, len(frame))
        if self.count > self.limit:
            _, dropped = max((t.fattest() for t in self.txqs.values()), key=lambda f: len(f.frames)).frames.popleft()
            self.count -= 1
            self.backlog -= len(dropped)
            self.counts["dropped"] += 1

    def dequeue(self, now: int) -> tuple[bytes, int]:
        """The next (frame, destination) of a station with frames queued: the first destination in turn whose
        airtime deficit is not spent."""
        while True:
            dst = self.active[0]
            if self.deficit[dst] < 0:
                self.deficit[dst] += AIRTIME_QUANTUM
                self.active.rotate(-1)
                continue
            frame = self.txqs[dst].dequeue(now)
            if frame is not None:
                return frame, dst
            self.active.popleft()
            del self.txqs[dst], self.deficit[dst]

    def charge(self, dst: int, airtime: int) -> None:
        """An attempt to ``dst`` held the air ``airtime`` ns."""
        self.deficit[dst] -= airtime


class Channel:
    """The airtime of every station on one medium, and what each receives when."""

    def __init__(
        self,
        phy: radio.Phy,
        prop: Propagation,
        freq: float,
        noise_floor: float,
        pos: np.ndarray,
        tx: np.ndarray,
        gain: np.ndarray,
        queue: int = 100,
        seed: int | None = None,
        keys: np.ndarray | None = None,
        rate_control: str = "ideal",
        fading: Fading | None = None,
    ) -> None:
        self.phy, self.prop, self.freq, self.noise_floor = phy, prop, freq, noise_floor
        self.pos, self.tx, self.gain, self.keys = pos, tx, gain, keys  # keys: radio.station_keys of their names
        self.noise_mw = 10 ** (noise_floor / 10)
        self.needs = [sensitivity - radio.DEFAULT_NOISE_FLOOR for _, sensitivity in phy.rates]  # SINR each rate needs
        self.slot, self.sifs = _ns(phy.slot), _ns(phy.sifs)
        self.difs, self.eifs = _ns(radio.difs(phy)), _ns(radio.eifs(phy))
        self.ack = _ns(radio.block_ack_us(phy) if phy.aggregate else phy.ack_us)  # a block ACK answers an A-MPDU
        self.limit = queue
        n = len(pos)
        # the frames being sent (and retried) to one receiver: [frame, attempts failed] each (several: an A-MPDU's)
        self.current: list[tuple[int, list[list[Any]]] | None] = [None] * n
        self.backoff = [-1] * n  # slots left before the head frame goes (-1: nothing to send)
        self.retry = [0] * n
        self.origin = [0] * n  # when the current countdown started counting (after DIFS or EIFS)
        self.due_at = [-1] * n  # when its start is due (-1: none pending: frozen, sensing or idle)
        self.token = [0] * n  # the pending start's number (a frozen count makes it stale)
        self.sending: list[Tx | None] = [None] * n
        self.sensing = [0] * n  # frames on the air it senses now
        self.quiet = [0] * n  # when the air is free again as it hears it, NAV included
        self.ifs = [self.difs] * n  # DIFS, or EIFS after a frame it could not read
        self.locked: list[Tx | None] = [None] * n  # the frame its receiver follows
        self.airborne: list[Tx] = []
        self.events: list[tuple[int, int, int, Tx | None]] = []  # (ns, order, station, Tx: an end; None: a start)
        self.seq = itertools.count()
        self.rng = random.Random(seed)
        self.counts = {
            "frames": 0, "delivered": 0, "dropped": 0, "attempts": 0, "collisions": 0, "lost": 0, "retries": 0,
        }  # fmt: skip
        self.queues = [Sender(queue, self.counts) for _ in range(n)]
        self.control = CONTROLS[rate_control](self)  # each attempt's rate (ratecontrol.py)
        self.fade = fades.drawer(fading)  # a frame's fading gain on one link (None: none)
        self.place(pos)

    def resize(self, pos: np.ndarray, tx: np.ndarray, gain: np.ndarray, keys: np.ndarray | None) -> None:
        """The stations as they are now: the first ones as before (their frames and counts kept), then new ones."""
        added = len(pos) - len(self.pos)
        grown: tuple[tuple[list[Any], Any], ...] = (
            (self.current, None), (self.backoff, -1), (self.retry, 0), (self.origin, 0), (self.due_at, -1),
            (self.token, 0), (self.sending, None), (self.sensing, 0), (self.quiet, 0), (self.ifs, self.difs),
            (self.locked, None),
        )  # fmt: skip
        for values, fill in grown:
            values.extend([fill] * added)
        self.queues.extend(Sender(self.limit, self.counts) for _ in range(added))
        self.tx, self.gain, self.keys = tx, gain, keys
        self.place(pos)

    # -- geometry ----------------------------------------------------------------------------------
    def place(self, pos: np.ndarray) -> None:
        """New positions (N x 3): every pair's signal, rate, loss and who hears whom."""
        self.pos = pos
        floor = self.phy.rates[0][1] + self.noise_floor - radio.DEFAULT_NOISE_FLOOR + radio.EDGE_MARGIN  # heard at all
        rx = radio.received(self.prop, self.freq, pos, self.tx, self.gain, self.keys, floor)
        self.links = found = radio.links(self.phy, rx, self.noise_floor)
        self.mw = 10 ** (rx / 10)  # mW at j of what i sends
        # pairs[i][j] = (rate index, loss, basic rate's loss) for each j in range of i
        self.pairs: list[dict[int, tuple[int, float, float]]] = [{} for _ in range(len(pos))]
        for i, j, r, p, b in zip(*(a.tolist() for a in (found.i, found.j, found.rate, found.per, found.basic_per))):
            self.pairs[i][j] = (r, p, b)
        self.hears = [list(row) for row in self.pairs]  # hears[i]: who senses i

    # -- the medium's calls ------------------------------------------------------------------------
    def arrive(self, i: int, frame: bytes, dst: int, now: int) -> None:
        """Station ``i`` sends ``frame`` to ``dst`` (-1: everyone in range) at ``now`` (ns)."""
        self.counts["frames"] += 1
        self.queues[i].enqueue(frame, dst, now)
        if self.backoff[i] < 0:
            self.backoff[i] = self._draw(i)
            self._resume(i, now + self.difs)

    def queued(self, i: int) -> int:
        """Frames station ``i`` holds: queued, and the one it is sending."""
        current = self.current[i]
        return self.queues[i].count + (len(current[1]) if current else 0)

    def due(self) -> int | None:
        """When (ns) the next event falls (None: nothing on the air or queued)."""
        return self.events[0][0] if self.events else None

    def run(self, now: int) -> list[tuple[int, bytes]]:
        """Every event up to ``now`` (ns): the frames to hand to each receiver, in order."""
        out: list[tuple[int, bytes]] = []
        while self.events and self.events[0][0] <= now:
            at, order, i, tx = heapq.heappop(self.events)
            if tx is not None:
                self._end(tx, out)
            elif order == self.token[i]:
                self._start(i, at)
        return out

    # -- access ------------------------------------------------------------------------------------
    def _draw(self, i: int) -> int:
        return self.rng.randint(0, min((self.phy.cw_min + 1) * 2 ** self.retry[i] - 1, CW_MAX))

    def _resume(self, i: int, earliest: int) -> None:
        """Count ``i``'s backoff down from when the air it hears is idle again, if it has a frame and hears none."""
        if self.backoff[i] < 0 or self.sending[i] is not None or self.sensing[i] or self.due_at[i] >= 0:
            return
        self.origin[i] = max(earliest, self.quiet[i] + self.ifs[i])
        self.due_at[i] = at = self.origin[i] + self.backoff[i] * self.slot
        self.token[i] = order = next(self.seq)
        heapq.heappush(self.events, (at, order, i, None))

    def _freeze(self, k: int, busy: int) -> None:
        """The air ``k`` hears goes busy at ``busy``: its count stops, keeping the slots counted, unless its
        start falls within a slot of that (too soon to sense: it sends)."""
        if self.due_at[k] >= 0 and self.due_at[k] - busy >= self.slot:
            self.backoff[k] -= max(0, (busy - self.origin[k]) // self.slot)
            self.due_at[k] = -1
            self.token[k] = -1

    def _start(self, i: int, at: int) -> None:
        self.due_at[i] = -1
        if self.current[i] is None:
            frame, dst = self.queues[i].dequeue(at)
            self.current[i] = (dst, [[frame, 0]])
        dst, mpdus = self.current[i]  # type: ignore[misc]
        tried = max(m[1] for m in mpdus)  # the oldest frame's failed attempts: its place in the rate chain
        rate = self.control.rate(i, dst, tried, at) if dst >= 0 else 0
        if self.phy.aggregate and dst >= 0:
            spans = self._aggregate(i, dst, mpdus, self.phy.rates[rate][0], at)
        else:
            octets = len(mpdus[0][0]) + radio.MAC_OVERHEAD
            spans = [(at, at + _ns(radio.frame_us(self.phy, self.phy.rates[rate][0], len(mpdus[0][0]))), octets)]
        end = spans[-1][1]
        tx = Tx(i, [m[0] for m in mpdus[: len(spans)]], dst, rate, at, end, self.hears[i], spans)
        self.counts["attempts"] += int(dst >= 0)
        self.sending[i], self.locked[i] = tx, None
        for other in self.airborne:
            other.overlaps.append(tx)
            tx.overlaps.append(other)
        self.airborne.append(tx)
        power = self._power
        for k in tx.heard_by:
            self.sensing[k] += 1
            self._freeze(k, at)
            if self.sending[k] is not None:
                continue  # half duplex: it receives nothing while it sends
            following = self.locked[k]
            if following is not None and following.end > at:
                if power(tx, k) >= power(following, k) * 10 ** (CAPTURE_DB / 10):
                    self.locked[k] = tx
            elif power(tx, k) >= (self.noise_mw + self._heard(k, tx)) * 10 ** (PREAMBLE_DB / 10):
                self.locked[k] = tx
        heapq.heappush(self.events, (end, next(self.seq), i, tx))

    def _aggregate(self, i: int, dst: int, mpdus: list[list[Any]], rate: float, at: int) -> list[tuple[int, int, int]]:
        """The A-MPDU ``i`` sends ``dst`` at ``at``: the frames waiting a retry, then more from its queue for ``dst``,
        while the standard's limits hold (MPDUs, octets, the PPDU's time); each frame's stretch of the air.  A
        frame taken that does not fit waits for the next."""
        phy, limit = self.phy, self.phy.aggregate
        assert limit is not None
        sizes: list[int] = []
        padded = 0
        while len(sizes) < limit.frames:
            if len(sizes) == len(mpdus):
                txq = self.queues[i].txqs.get(dst)
                frame = txq.dequeue(at) if txq is not None else None
                if frame is None:
                    break
                mpdus.append([frame, 0])
            mpdu = radio.DELIMITER + len(mpdus[len(sizes)][0]) + radio.MAC_OVERHEAD + radio.QOS_BYTES
            if sizes and (padded + mpdu > limit.octets or radio.ppdu_us(phy, rate, padded + mpdu) > limit.max_us):
                break
            sizes.append(mpdu)
            padded += mpdu + (-mpdu % 4)
        total = padded - (-sizes[-1] % 4)
        data, end = at + _ns(phy.preamble), at + _ns(radio.ppdu_us(phy, rate, total))
        spans, done = [], 0
        for octets in sizes:  # each subframe's share of the data symbols
            spans.append((data + (end - data) * done // total, data + (end - data) * (done + octets) // total, octets))
            done += octets + (-octets % 4)
        spans[-1] = (spans[-1][0], end, sizes[-1])
        return spans

    def _end(self, tx: Tx, out: list[tuple[int, bytes]]) -> None:
        i, dst, end = tx.sender, tx.dst, tx.end
        self.airborne.remove(tx)
        self.sending[i] = None
        decoded = [k for k, span in enumerate(tx.spans) if self._received(tx, dst, span)] if dst >= 0 else []
        acked = bool(decoded)
        got = {dst} if acked else {j for j in tx.heard_by if self._received(tx, j, tx.spans[0])} if dst < 0 else set()
        out.extend((dst, tx.frames[k]) for k in decoded)
        out.extend((j, tx.frames[0]) for j in got if dst < 0)
        self.counts["delivered"] += len(decoded) if dst >= 0 else len(got)
        ack_end = end + self.sifs + self.ack
        for k in tx.heard_by:  # DIFS after the ACK (NAV) for a frame read, EIFS after its end for one that was not
            self.sensing[k] -= 1
            if k in got or (dst >= 0 and k != dst and self.locked[k] is tx and self._success(tx, k, tx.spans[0]) > 0.5):
                self.quiet[k], self.ifs[k] = max(self.quiet[k], ack_end if dst >= 0 else end), self.difs
            else:
                self.quiet[k], self.ifs[k] = max(self.quiet[k], end), self.eifs
            if self.locked[k] is tx:
                self.locked[k] = None
            self._resume(k, end)
        if acked:  # the ACK keeps the receiver's neighbours that did not sense the frame busy too
            heard = set(tx.heard_by)
            for k in self.hears[dst]:
                if k != i and k not in heard:
                    self._freeze(k, end + self.sifs)
                    self.quiet[k] = max(self.quiet[k], ack_end)
                    self._resume(k, end)
        collided = bool(tx.overlaps)
        tx.overlaps = []
        self._after(tx, set(decoded), collided, ack_end)

    def _after(self, tx: Tx, decoded: set[int], collided: bool, ack_end: int) -> None:
        """The sender's next step: the frames not acknowledged again (each up to the retry limit), then the next."""
        i = tx.sender
        self.queues[i].charge(tx.dst, tx.end - tx.start)
        dst, mpdus = self.current[i]  # type: ignore[misc]
        kept = []
        for k in range(len(tx.frames)) if dst >= 0 else ():
            self.control.report(i, dst, tx.rate, k in decoded)  # Minstrel counts each MPDU's attempt
        for k, mpdu in enumerate(mpdus[: len(tx.frames)] if dst >= 0 else ()):
            mpdu[1] += k not in decoded
            if k not in decoded and mpdu[1] <= RETRY_LIMIT:
                kept.append(mpdu)
        self.counts["retries"] += len(kept)
        self.counts["lost"] += len(tx.frames) - len(decoded) - len(kept) if dst >= 0 else 0
        mpdus[:] = kept + mpdus[len(tx.frames) :]
        if decoded or dst < 0:
            self.quiet[i], self.ifs[i] = max(self.quiet[i], ack_end if decoded else tx.end), self.difs
        else:  # no ACK: its ACK timeout, then as after a frame it could not read
            self.quiet[i], self.ifs[i] = max(self.quiet[i], tx.end), self.eifs
            self.counts["collisions"] += collided
        # the contention window: reset by an ACK or once the frames are given up, else doubled
        self.retry[i] = min(self.retry[i] + 1, RETRY_LIMIT) if mpdus and not decoded else 0
        if not mpdus:
            self.current[i] = None
        self.backoff[i] = self._draw(i) if mpdus or self.queues[i].count else -1
        self._resume(i, tx.end)

    # -- reception ---------------------------------------------------------------------------------
    def _power(self, tx: Tx, k: int) -> float:
        """mW at ``k`` of ``tx``: the pair's mean, times the frame's fading there (drawn once per frame and station)."""
        mean = float(self.mw[tx.sender, k])
        if self.fade is None:
            return mean
        gain = tx.fades.get(k)
        if gain is None:
            gain = tx.fades[k] = self.fade()
        return mean * gain

    def _heard(self, k: int, tx: Tx) -> float:
        """mW at ``k`` now of the frames on the air other than ``tx``."""
        return sum(self._power(o, k) for o in self.airborne if o is not tx and o.end > tx.start)

    def _received(self, tx: Tx, k: int, span: tuple[int, int, int]) -> bool:
        """Whether ``k`` receives the frame of ``tx`` on ``span``: it followed ``tx`` to its end, and every stretch
        of the frame decoded."""
        return self.locked[k] is tx and self.rng.random() < self._success(tx, k, span)

    def _success(self, tx: Tx, k: int, span: tuple[int, int, int]) -> float:
        """The chance ``k`` decodes the frame of ``tx`` on ``span`` (start, end, octets): the product over each
        stretch between other frames' starts and ends of (1 - loss of a REFERENCE_BYTES frame at that stretch's
        SINR) to the power of the stretch's share of the frame's octets in REFERENCE_BYTES blocks (the
        frame-length-scaled error model: 1 - (1 - PER)^(L / 1000))."""
        floor = self.noise_mw * NEGLIGIBLE
        start, end, octets = span
        others = [
            (o.start, o.end, p)
            for o in tx.overlaps
            if o.sender != k and o.end > start and o.start < end and (p := self._power(o, k)) > floor
        ]
        needs = self.needs[tx.rate]
        signal = self._power(tx, k)
        blocks = octets / radio.REFERENCE_BYTES  # loss scales with the frame's length
        if not others:
            return float((1.0 - radio.loss_one(10 * math.log10(signal / self.noise_mw) - needs)) ** blocks)
        cuts = sorted({start, end, *(t for s, e, _ in others for t in (s, e) if start < t < end)})
        chance, length = 1.0, end - start
        for a, b in itertools.pairwise(cuts):
            noise = self.noise_mw + sum(p for s, e, p in others if s < b and e > a)
            chance *= (1.0 - radio.loss_one(10 * math.log10(signal / noise) - needs)) ** (blocks * (b - a) / length)
        return chance

    # -- what it shows -----------------------------------------------------------------------------
    def rate(self, i: int, j: int) -> float:
        """Mbit/s i sends to j at (0: out of range)."""
        return self.phy.rates[self.control.shown(i, j)][0] if j in self.pairs[i] else 0.0

    def loss(self, i: int, j: int) -> float:
        """The frame loss from i to j at its rate with no other frame on the air (1: out of range)."""
        return self.pairs[i].get(j, _OUT)[1]

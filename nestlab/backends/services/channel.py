"""One wireless channel's airtime and reception, as 802.11's DCF and a receiver share them (pure: the medium
feeds it frames and time, in integer nanoseconds, so a slot is a slot exactly).

Access (802.11-2016 10.3): each station has a drop-tail queue.  Its head frame waits until the air is idle
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
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...model import radio

if TYPE_CHECKING:
    import numpy as np

    from ...model.wireless import Propagation

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
    """One attempt on the air (times in ns)."""

    sender: int
    frame: bytes
    dst: int  # -1: broadcast (or an address the medium has not seen)
    rate: int  # index into the standard's rates
    start: int
    end: int  # the frame's end; its ACK follows SIFS later
    heard_by: list[int]  # the stations in range of its sender as it started: they sense it
    overlaps: list[Tx] = field(default_factory=list)  # every frame on the air at some time during it


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
    ) -> None:
        self.phy, self.prop, self.freq, self.noise_floor = phy, prop, freq, noise_floor
        self.pos, self.tx, self.gain, self.limit = pos, tx, gain, queue
        self.noise_mw = 10 ** (noise_floor / 10)
        self.needs = [sensitivity - radio.DEFAULT_NOISE_FLOOR for _, sensitivity in phy.rates]  # SINR each rate needs
        self.slot, self.sifs = _ns(phy.slot), _ns(phy.sifs)
        self.difs, self.eifs, self.ack = _ns(radio.difs(phy)), _ns(radio.eifs(phy)), _ns(phy.ack_us)
        n = len(pos)
        self.queues: list[deque[tuple[bytes, int]]] = [deque() for _ in range(n)]  # (frame, receiver)
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
        self.place(pos)

    # -- geometry ----------------------------------------------------------------------------------
    def place(self, pos: np.ndarray) -> None:
        """New positions (N x 3): every pair's signal, rate, loss and who hears whom."""
        self.pos = pos
        rx = radio.received(self.prop, self.freq, pos, self.tx, self.gain)
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
        if len(self.queues[i]) >= self.limit:
            self.counts["dropped"] += 1
            return
        self.queues[i].append((frame, dst))
        if self.backoff[i] < 0:
            self.backoff[i] = self._draw(i)
            self._resume(i, now + self.difs)

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
        frame, dst = self.queues[i][0]
        rate = self.pairs[i].get(dst, _OUT)[0] if dst >= 0 else 0
        end = at + _ns(radio.frame_us(self.phy, self.phy.rates[rate][0], len(frame)))
        tx = Tx(i, frame, dst, rate, at, end, self.hears[i])
        self.counts["attempts"] += int(dst >= 0)
        self.sending[i], self.locked[i] = tx, None
        for other in self.airborne:
            other.overlaps.append(tx)
            tx.overlaps.append(other)
        self.airborne.append(tx)
        mw = self.mw
        for k in tx.heard_by:
            self.sensing[k] += 1
            self._freeze(k, at)
            if self.sending[k] is not None:
                continue  # half duplex: it receives nothing while it sends
            following = self.locked[k]
            if following is not None and following.end > at:
                if mw[i, k] >= mw[following.sender, k] * 10 ** (CAPTURE_DB / 10):
                    self.locked[k] = tx
            elif mw[i, k] >= (self.noise_mw + self._heard(k, tx)) * 10 ** (PREAMBLE_DB / 10):
                self.locked[k] = tx
        heapq.heappush(self.events, (end, next(self.seq), i, tx))

    def _end(self, tx: Tx, out: list[tuple[int, bytes]]) -> None:
        i, dst, end = tx.sender, tx.dst, tx.end
        self.airborne.remove(tx)
        self.sending[i] = None
        acked = dst >= 0 and self._received(tx, dst)
        got = {dst} if acked else {j for j in tx.heard_by if self._received(tx, j)} if dst < 0 else set()
        for j in got:
            out.append((j, tx.frame))
        self.counts["delivered"] += len(got)
        ack_end = end + self.sifs + self.ack
        for k in tx.heard_by:  # DIFS after the ACK (NAV) for a frame read, EIFS after its end for one that was not
            self.sensing[k] -= 1
            if k in got or (dst >= 0 and k != dst and self.locked[k] is tx and self._success(tx, k) > 0.5):
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
        self._after(tx, acked, collided, ack_end)

    def _after(self, tx: Tx, acked: bool, collided: bool, ack_end: int) -> None:
        """The sender's next step: the next frame, or this one again after a failed attempt."""
        i = tx.sender
        if acked or tx.dst < 0:
            self.quiet[i], self.ifs[i] = max(self.quiet[i], ack_end if acked else tx.end), self.difs
        else:  # no ACK: its ACK timeout, then as after a frame it could not read
            self.quiet[i], self.ifs[i] = max(self.quiet[i], tx.end), self.eifs
            self.counts["collisions"] += collided
            if self.retry[i] < RETRY_LIMIT:
                self.retry[i] += 1
                self.counts["retries"] += 1
                self.backoff[i] = self._draw(i)
                self._resume(i, tx.end)
                return
            self.counts["lost"] += 1
        self.queues[i].popleft()
        self.retry[i] = 0
        self.backoff[i] = self._draw(i) if self.queues[i] else -1
        self._resume(i, tx.end)

    # -- reception ---------------------------------------------------------------------------------
    def _heard(self, k: int, tx: Tx) -> float:
        """mW at ``k`` now of the frames on the air other than ``tx``."""
        return sum(float(self.mw[o.sender, k]) for o in self.airborne if o is not tx and o.end > tx.start)

    def _received(self, tx: Tx, k: int) -> bool:
        """Whether ``k`` receives ``tx``: it followed it to its end, and every stretch decoded."""
        return self.locked[k] is tx and self.rng.random() < self._success(tx, k)

    def _success(self, tx: Tx, k: int) -> float:
        """The chance ``k`` decodes ``tx``: the product over each stretch between other frames' starts and ends
        of (1 - loss at that stretch's SINR) to the power of the stretch's share of the frame."""
        mw = self.mw
        floor = self.noise_mw * NEGLIGIBLE
        others = [
            (o.start, o.end, p) for o in tx.overlaps if o.sender != k and o.end > tx.start and (p := mw[o.sender, k]) > floor
        ]
        needs = self.needs[tx.rate]
        signal = mw[tx.sender, k]
        if not others:
            return 1.0 - radio.loss_one(10 * math.log10(signal / self.noise_mw) - needs)
        cuts = sorted({tx.start, tx.end, *(t for s, e, _ in others for t in (s, e) if tx.start < t < tx.end)})
        chance, length = 1.0, tx.end - tx.start
        for a, b in itertools.pairwise(cuts):
            noise = self.noise_mw + sum(p for s, e, p in others if s < b and e > a)
            chance *= (1.0 - radio.loss_one(10 * math.log10(signal / noise) - needs)) ** ((b - a) / length)
        return chance

    # -- what it shows -----------------------------------------------------------------------------
    def rate(self, i: int, j: int) -> float:
        """Mbit/s i sends to j at (0: out of range)."""
        return self.phy.rates[self.pairs[i][j][0]][0] if j in self.pairs[i] else 0.0

    def loss(self, i: int, j: int) -> float:
        """The frame loss from i to j at its rate with no other frame on the air (1: out of range)."""
        return self.pairs[i].get(j, _OUT)[1]

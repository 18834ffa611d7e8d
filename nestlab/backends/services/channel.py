"""One wireless channel's airtime, as 802.11's DCF shares it (pure: the medium feeds it frames and time).

Each station has a drop-tail queue.  Its head frame starts after DIFS and a random backoff of whole slots
(contention window CWmin, doubled on each retry) once the channel is idle *as that station hears it*:
a transmission makes every station in range of its sender busy until it ends, so stations in range take
turns; two whose backoffs end in the same slot collide.  A receiver hearing two transmissions at once
(from senders hidden from each other, or a collision) loses both.  A unicast frame is lost with the
pair's loss at its rate and retried (up to 7 times) at the next turn; broadcast goes once at the basic
rate, with no ACK, to every station in range, each with its own loss.  Times are in seconds.
"""

from __future__ import annotations

import heapq
import itertools
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
_OUT = (0, 1.0, 1.0)  # a pair out of range: sent at the basic rate, never received


@dataclass(eq=False)
class Tx:
    """One attempt on the air."""

    sender: int
    frame: bytes
    dst: int  # -1: broadcast (or an address the medium has not seen)
    start: float
    end: float
    garbled: set[int] = field(default_factory=set)  # stations that heard it collide


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
        n = len(pos)
        self.queues: list[deque[tuple[bytes, int]]] = [deque() for _ in range(n)]  # (frame, receiver)
        self.busy = [0.0] * n  # when the channel goes idle as each station hears it
        self.idle = [True] * n  # no start pending for its queue
        self.retry = [0] * n
        self.on_air: list[list[Tx]] = [[] for _ in range(n)]  # transmissions each station hears now
        self.events: list[tuple[float, int, str, int | Tx]] = []
        self.seq = itertools.count()
        self.rng = random.Random(seed)
        self.counts = {"frames": 0, "delivered": 0, "dropped": 0, "collisions": 0, "lost": 0, "retries": 0}
        self.place(pos)

    # -- geometry ----------------------------------------------------------------------------------
    def place(self, pos: np.ndarray) -> None:
        """New positions (N x 3): every pair's rate, loss and who hears whom."""
        self.pos = pos
        rx = radio.received(self.prop, self.freq, pos, self.tx, self.gain)
        self.links = found = radio.links(self.phy, rx, self.noise_floor)
        # pairs[i][j] = (rate index, loss, basic rate's loss) for each j in range of i
        self.pairs: list[dict[int, tuple[int, float, float]]] = [{} for _ in range(len(pos))]
        for i, j, r, p, b in zip(*(a.tolist() for a in (found.i, found.j, found.rate, found.per, found.basic_per))):
            self.pairs[i][j] = (r, p, b)
        self.hears = [list(row) for row in self.pairs]  # hears[i]: who hears i

    # -- the medium's calls ------------------------------------------------------------------------
    def arrive(self, i: int, frame: bytes, dst: int, now: float) -> None:
        """Station ``i`` sends ``frame`` to ``dst`` (-1: everyone in range) at ``now``."""
        self.counts["frames"] += 1
        if len(self.queues[i]) >= self.limit:
            self.counts["dropped"] += 1
            return
        self.queues[i].append((frame, dst))
        if self.idle[i]:
            self.idle[i] = False
            self._contend(i, now)

    def due(self) -> float | None:
        """When the next event falls (None: nothing on the air or queued)."""
        return self.events[0][0] if self.events else None

    def run(self, now: float) -> list[tuple[int, bytes]]:
        """Every event up to ``now``: the frames to hand to each receiver, in order."""
        out: list[tuple[int, bytes]] = []
        while self.events and self.events[0][0] <= now:
            at, _, what, arg = heapq.heappop(self.events)
            if what == "start":
                assert isinstance(arg, int)
                self._start(arg, at)
            else:
                assert isinstance(arg, Tx)
                self._end(arg, out)
        return out

    # -- DCF ---------------------------------------------------------------------------------------
    def _push(self, at: float, what: str, arg: int | Tx) -> None:
        heapq.heappush(self.events, (at, next(self.seq), what, arg))

    def _contend(self, i: int, after: float) -> None:
        cw = min((self.phy.cw_min + 1) * 2 ** self.retry[i] - 1, CW_MAX)
        wait = radio.difs(self.phy) + self.rng.randint(0, cw) * self.phy.slot
        self._push(max(after, self.busy[i]) + wait * 1e-6, "start", i)

    def _start(self, i: int, at: float) -> None:
        slot = self.phy.slot * 1e-6
        if any(o.end > at and at - o.start >= slot for o in self.on_air[i]):
            self._contend(i, self.busy[i])  # a frame it has heard for a slot or more holds the air: defer
            return
        frame, dst = self.queues[i][0]
        index = self.pairs[i].get(dst, _OUT)[0] if dst >= 0 else 0
        rate = self.phy.rates[index][0]
        end = at + radio.exchange_us(self.phy, rate, len(frame), dst >= 0) * 1e-6
        tx = Tx(i, frame, dst, at, end)
        for k in (i, *self.hears[i]):
            if self.busy[k] < end:
                self.busy[k] = end
            live = [other for other in self.on_air[k] if other.end > at]
            for other in live:
                other.garbled.add(k)
                tx.garbled.add(k)
            live.append(tx)
            self.on_air[k] = live
        if len(tx.garbled) > 0:
            self.counts["collisions"] += 1
        self._push(end, "end", tx)

    def _end(self, tx: Tx, out: list[tuple[int, bytes]]) -> None:
        i, dst = tx.sender, tx.dst
        if dst >= 0:
            ok = dst not in tx.garbled and self.rng.random() >= self.pairs[i].get(dst, _OUT)[1]
            if ok:
                out.append((dst, tx.frame))
                self.counts["delivered"] += 1
            elif self.retry[i] < RETRY_LIMIT:
                self.retry[i] += 1
                self.counts["retries"] += 1
                self._contend(i, tx.end)
                return
            else:
                self.counts["lost"] += 1
        else:
            for j in self.hears[i]:
                if j not in tx.garbled and self.rng.random() >= self.pairs[i][j][2]:
                    out.append((j, tx.frame))
                    self.counts["delivered"] += 1
        self.queues[i].popleft()
        self.retry[i] = 0
        if self.queues[i]:
            self._contend(i, tx.end)
        else:
            self.idle[i] = True

    # -- what it shows -----------------------------------------------------------------------------
    def rate(self, i: int, j: int) -> float:
        """Mbit/s i sends to j at (0: out of range)."""
        return self.phy.rates[self.pairs[i][j][0]][0] if j in self.pairs[i] else 0.0

    def loss(self, i: int, j: int) -> float:
        """The frame loss from i to j at its rate (1: out of range)."""
        return self.pairs[i].get(j, _OUT)[1]

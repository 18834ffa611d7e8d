"""How a station picks the rate of each attempt (``rate_control:`` on the medium, docs/wireless.md), by name.

* ``ideal``: the rate that carries the most at the link's mean signal, rate x (1 - loss), whatever the air does
  (the medium's choice before Minstrel; ns-3's IdealWifiManager works the same way, from the SNR).
* ``minstrel``: Linux mac80211's Minstrel (net/mac80211/rc80211_minstrel, as ns-3's MinstrelWifiManager): each
  link keeps, per rate, the share of its attempts that got through, averaged every 100 ms (EWMA, 75 % the
  past); the rate of the best expected throughput (success, capped at 90 %, over a frame's airtime) goes first,
  the second best next, then the most reliable, then the lowest, two attempts each (the multi-rate retry chain);
  about 10 % of frames sample another rate (lookaround), first in the chain if it is faster than the best,
  second if slower.  It learns from what happens on the air: collisions, interference and fading included.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ...model import radio

UPDATE_NS = 100_000_000  # Minstrel's statistics interval: 100 ms
EWMA = 0.75  # the past's weight in each rate's success probability
LOOKAROUND = 0.10  # the share of frames that sample another rate
PER_STAGE = 2  # attempts at each rate of the retry chain (4 stages: the 8 attempts of RETRY_LIMIT 7)
SAMPLE_BYTES = 1200  # the frame length Minstrel rates its throughput by (Linux: 1200 bytes)


class Air(Protocol):
    """What a rate control reads of its channel (channel.py's Channel)."""

    phy: radio.Phy
    rng: random.Random
    pairs: list[dict[int, tuple[int, float, float]]]  # pairs[i][j]: the rate index by mean signal, its loss, ...


class Control(Protocol):
    def rate(self, i: int, dst: int, attempt: int, now: int) -> int:
        """The rate (index into the standard's) of attempt ``attempt`` (0 first) of ``i``'s frame to ``dst``."""

    def report(self, i: int, dst: int, rate: int, ok: bool) -> None:
        """An attempt at ``rate`` was acknowledged (``ok``) or not."""

    def shown(self, i: int, j: int) -> int:
        """The rate ``i`` sends to ``j`` at now, for inspect."""


class Ideal:
    """By the mean signal (the channel's settled rate of each pair)."""

    def __init__(self, channel: Air) -> None:
        self.channel = channel

    def rate(self, i: int, dst: int, attempt: int, now: int) -> int:
        return self.channel.pairs[i][dst][0] if dst in self.channel.pairs[i] else 0

    def report(self, i: int, dst: int, rate: int, ok: bool) -> None:
        return None

    def shown(self, i: int, j: int) -> int:
        return self.rate(i, j, 0, 0)


@dataclass(eq=False)
class Link:
    """Minstrel's statistics of one link: per rate, this interval's attempts and successes, and the EWMA."""

    rates: int
    attempts: list[int] = field(init=False)
    successes: list[int] = field(init=False)
    prob: list[float] = field(init=False)
    tried: list[bool] = field(init=False)
    best: tuple[int, int, int] = (0, 0, 0)  # highest throughput, second highest, most reliable
    chain: tuple[int, ...] = (0, 0, 0, 0)
    next_update: int = 0

    def __post_init__(self) -> None:
        self.attempts, self.successes = [0] * self.rates, [0] * self.rates
        self.prob, self.tried = [0.0] * self.rates, [False] * self.rates


class Minstrel:
    """Linux's Minstrel per link (sender, destination), as the module says."""

    def __init__(self, channel: Air) -> None:
        self.channel = channel
        self.rng = random.Random(channel.rng.random())
        phy = channel.phy
        overhead = radio.difs(phy) + phy.cw_min / 2 * phy.slot + phy.sifs + phy.ack_us
        self.airtime = [radio.frame_us(phy, rate, SAMPLE_BYTES) + overhead for rate, _ in phy.rates]
        self.links: dict[tuple[int, int], Link] = {}

    def _link(self, i: int, dst: int) -> Link:
        link = self.links.get((i, dst))
        if link is None:
            link = self.links[(i, dst)] = Link(len(self.airtime))
        return link

    def rate(self, i: int, dst: int, attempt: int, now: int) -> int:
        if dst < 0 or dst not in self.channel.pairs[i]:
            return 0
        link = self._link(i, dst)
        if now >= link.next_update:
            self._update(link)
            link.next_update = now + UPDATE_NS
        if attempt == 0:
            link.chain = self._chain(link)
        return link.chain[min(attempt // PER_STAGE, len(link.chain) - 1)]

    def report(self, i: int, dst: int, rate: int, ok: bool) -> None:
        link = self.links.get((i, dst))
        if link is not None:
            link.attempts[rate] += 1
            link.successes[rate] += ok

    def shown(self, i: int, j: int) -> int:
        link = self.links.get((i, j))
        return link.best[0] if link is not None else Ideal(self.channel).shown(i, j)

    def _throughput(self, link: Link, r: int) -> float:
        prob = link.prob[r]
        return 0.0 if prob < 0.1 else min(prob, 0.9) / self.airtime[r]

    def _update(self, link: Link) -> None:
        """Each rate's EWMA from this interval's attempts; the best, second best and most reliable rates."""
        for r in range(link.rates):
            if link.attempts[r]:
                now = link.successes[r] / link.attempts[r]
                link.prob[r] = EWMA * link.prob[r] + (1 - EWMA) * now if link.tried[r] else now
                link.tried[r] = True
            link.attempts[r] = link.successes[r] = 0
        order = sorted(range(link.rates), key=lambda r: (self._throughput(link, r), -r), reverse=True)  # untried: lowest first
        sure = [r for r in range(link.rates) if link.prob[r] >= 0.95]
        reliable = (
            max(sure, key=lambda r: self._throughput(link, r)) if sure else max(range(link.rates), key=link.prob.__getitem__)
        )
        link.best = (order[0], order[1], reliable)

    def _chain(self, link: Link) -> tuple[int, ...]:
        """The rates of a new frame's attempts: best, second best, most reliable, lowest; or a sample in place
        of the first (faster than the best) or the second (slower)."""
        best, second, reliable = link.best
        if self.rng.random() < LOOKAROUND:
            sample = self.rng.randrange(link.rates)
            if sample != best and link.prob[sample] < 0.95:
                return (sample, best, reliable, 0) if sample > best else (best, sample, reliable, 0)
        return (best, second, reliable, 0)


# Each rate control's name (model/wireless.py RATE_CONTROLS) and its implementation.
CONTROLS: dict[str, Callable[[Air], Control]] = {"ideal": Ideal, "minstrel": Minstrel}

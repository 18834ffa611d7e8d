"""Wireless physics against published numbers, and the channel's airtime sharing (pure: no kernel state)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nestlab.backends.services.channel import Channel
from nestlab.model import radio
from nestlab.model.wireless import Propagation, frequency

G = radio.PHYS["802.11g"]


def test_free_space_loss_matches_friis():
    """Friis at 2.4 GHz: 40.05 dB at 1 m, +20 dB per decade; 5.18 GHz (channel 36) at 1 m: 46.7 dB."""
    assert radio.friis(1.0, 2.4e9) == pytest.approx(40.05, abs=0.01)
    assert radio.friis(100.0, 2.4e9) == pytest.approx(80.05, abs=0.01)
    assert radio.friis(1.0, frequency("802.11a", None)) == pytest.approx(46.73, abs=0.01)
    assert frequency("802.11g", 6) == 2.437e9 and frequency("802.11g", 14) == 2.484e9


def test_each_model_by_its_formula():
    pos = np.array([[0, 0, 0], [100, 0, 0]], dtype=float)
    f = 2.4e9
    loss = lambda **kw: radio.path_loss(Propagation(**kw), f, pos)[0, 1]  # noqa: E731
    assert loss(model="log-distance", exponent=3) == pytest.approx(40.05 + 60, abs=0.01)
    assert loss(model="log-distance", exponent=2) == pytest.approx(loss(model="friis"), abs=1e-9)
    # two-ray beyond the crossover (4 pi h h / lambda = 100.5 m at 1 m heights): 40 log d - 20 log(h h)
    far = np.array([[0, 0, 0], [1000, 0, 0]], dtype=float)
    assert radio.path_loss(Propagation(model="two-ray"), f, far)[0, 1] == pytest.approx(120.0, abs=0.01)
    # ITU-R P.1238: 20 log f(MHz) + N log d + Lf - 28 (office, N = 30, two floors of 15 dB)
    itu = 20 * math.log10(2400) + 30 * 2 + 30 - 28
    assert loss(model="itu-indoor", floors=2) == pytest.approx(itu, abs=0.01)
    shadowed = radio.path_loss(Propagation(model="log-normal", sigma=6), f, np.zeros((50, 3)) + np.arange(50)[:, None])
    assert np.allclose(shadowed, shadowed.T)  # one value per pair, both ways
    assert loss(model="log-normal", sigma=0) == loss(model="log-distance")


def test_80211g_rates_by_signal():
    """IEEE 802.11-2016 Table 17-18 minimum sensitivities: -65 dBm for 54 Mbit/s ... -82 dBm for 6."""
    assert G.rates[0] == (6, -82) and G.rates[-1] == (54, -65)
    rx = np.array([[0, -60.0, -75.0, -83.0, -90.0]] * 5)

    def from_0(links: radio.Links) -> dict[int, tuple[float, float]]:
        return {int(j): (G.rates[r][0], p) for i, j, r, p in zip(links.i, links.j, links.rate, links.per) if i == 0}

    rates = from_0(radio.links(G, rx, radio.DEFAULT_NOISE_FLOOR))
    assert {j: r for j, (r, _) in rates.items()} == {1: 54, 2: 18, 3: 6}  # -75 dBm: 24 needs -74 (55 % loss); -90: out
    assert rates[3][1] > 0.1 and rates[1][1] < 0.001
    noisy = from_0(radio.links(G, rx, radio.DEFAULT_NOISE_FLOOR + 10))  # 10 dB more noise: thresholds 10 dB higher
    assert {j: r for j, (r, _) in noisy.items()} == {1: 36, 2: 6}


def test_airtime_of_a_full_frame():
    """1514 bytes at 54 Mbit/s: 20 µs preamble + 57 symbols + 6 µs extension; with SIFS + ACK: 292 µs."""
    assert radio.frame_us(G, 54, 1514) == 20 + 4 * 57 + 6
    assert radio.exchange_us(G, 54, 1514, True) == 254 + 10 + 28
    assert radio.frame_us(radio.PHYS["802.11b"], 11, 1514) == pytest.approx(192 + 8 * 1536 / 11)


def _channel(xs: list[float], prop: Propagation | None = None) -> Channel:
    pos = np.array([[x, 0, 0] for x in xs], dtype=float)
    n = len(xs)
    return Channel(G, prop or Propagation(exponent=3), 2.412e9, -91.0, pos, np.full(n, 20.0), np.zeros(n), seed=7)


def _saturate(ch: Channel, flows: list[tuple[int, int]], seconds: float = 2.0) -> dict[tuple[int, int], float]:
    """Keep every sender's queue full for ``seconds``; Mbit/s each flow delivers."""
    got = dict.fromkeys(flows, 0)
    now, step = 0.0, 0.0005
    while now < seconds:
        for i, j in flows:
            while len(ch.queues[i]) < 20:
                ch.arrive(i, bytes([i]) * 1514, j, now)
        for j, frame in ch.run(now):
            got[(frame[0], j)] += len(frame)
        now += step
    return {flow: 8 * b / seconds / 1e6 for flow, b in got.items()}


def test_one_sender_gets_what_its_rate_allows():
    near = _saturate(_channel([0, 10]), [(0, 1)])[(0, 1)]  # 54 Mbit/s: ~31 Mbit/s of frames after DCF overhead
    far = _saturate(_channel([0, 90]), [(0, 1)])[(0, 1)]
    assert 25 < near < 35, near
    assert far < near / 2, (far, near)


def test_two_senders_in_range_share_the_air():
    alone = _saturate(_channel([0, 10, 20]), [(0, 1)])[(0, 1)]
    both = _saturate(_channel([0, 10, 20]), [(0, 1), (2, 1)])
    assert sum(both.values()) == pytest.approx(alone, rel=0.2), both
    assert min(both.values()) > 0.3 * alone, both  # each gets a fair part


def test_hidden_senders_collide_at_the_station_between_them():
    """0 and 2 cannot hear each other (200 m apart) but 1 hears both: their frames collide at 1."""
    ch = _channel([0, 100, 200])
    assert 1 in ch.hears[0] and 1 in ch.hears[2] and 2 not in ch.hears[0]
    _saturate(ch, [(0, 1), (2, 1)], seconds=1.0)
    assert ch.counts["collisions"] > 50 and ch.counts["retries"] > 50, ch.counts


def test_broadcast_reaches_everyone_in_range_and_nobody_beyond():
    ch = _channel([0, 30, 60, 2500])
    ch.arrive(0, b"\xff" * 100, -1, 0.0)
    got = {j for j, _ in ch.run(1.0)}
    assert got == {1, 2}


def test_reach_is_where_the_basic_rate_fades_out():
    """20 dBm, log-distance exponent 3: heard down to -86 dBm (6 Mbit/s's -82 less 4 dB), about 157 m."""
    reach = radio.reach_m(Propagation(exponent=3), 2.412e9, G, radio.DEFAULT_NOISE_FLOOR, 20.0, 0.0)
    assert reach == pytest.approx(10 ** ((20 + 86 - radio.friis(1.0, 2.412e9)) / 30), rel=0.03)

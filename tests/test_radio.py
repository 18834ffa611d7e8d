"""Wireless physics against published numbers, and the channel's airtime sharing (pure: no kernel state)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nestlab.backends.services.channel import CW_MAX, RETRY_LIMIT, Channel, Tx
from nestlab.model import radio
from nestlab.model.wireless import MODELS, Propagation, frequency

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
    # ITU-R P.1238: 20 log f(MHz) + N log d + Lf(n) - 28 (office, N = 30); Lf(n) = 15 + 4 (n - 1) dB for n floors
    itu = 20 * math.log10(2400) + 30 * 2 - 28
    assert loss(model="itu-indoor") == pytest.approx(itu, abs=0.01)
    assert loss(model="itu-indoor", floors=1) == pytest.approx(itu + 15, abs=0.01)
    assert loss(model="itu-indoor", floors=3) == pytest.approx(itu + 15 + 8, abs=0.01)
    shadowed = radio.path_loss(Propagation(model="log-normal", sigma=6), f, np.zeros((50, 3)) + np.arange(50)[:, None])
    assert np.allclose(shadowed, shadowed.T)  # one value per pair, both ways
    assert loss(model="log-normal", sigma=0) == loss(model="log-distance")


def test_every_model_named_in_the_schema_has_its_formula():
    """The schema's model names and the table of formulas are the same set (a name without a formula would fall
    through to another's), and a name outside them is refused."""
    from typing import get_args

    from pydantic import ValidationError

    assert set(radio.MODELS) == set(MODELS) == set(get_args(Propagation.model_fields["model"].annotation))
    with pytest.raises(ValidationError, match="log-distance"):
        Propagation(model="okumura-hata")


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
    assert radio.frame_us(G, 54, 1514) + G.sifs + G.ack_us == 254 + 10 + 28  # the frame, SIFS and the ACK
    assert radio.frame_us(radio.PHYS["802.11b"], 11, 1514) == pytest.approx(192 + 8 * 1536 / 11)


def _channel(xs: list[float], prop: Propagation | None = None) -> Channel:
    pos = np.array([[x, 0, 0] for x in xs], dtype=float)
    n = len(xs)
    return Channel(G, prop or Propagation(exponent=3), 2.412e9, -91.0, pos, np.full(n, 20.0), np.zeros(n), seed=7)


def _saturate(ch: Channel, flows: list[tuple[int, int]], seconds: float = 2.0) -> dict[tuple[int, int], float]:
    """Keep every sender's queue full for ``seconds``; Mbit/s each flow delivers."""
    got = dict.fromkeys(flows, 0)  # broadcast flows (i, -1) are sent, not counted
    now, step = 0, 500_000  # ns
    while now < seconds * 1e9:
        for i, j in flows:
            while ch.queued(i) < 20:
                ch.arrive(i, bytes([i]) * 1514, j, now)
        for j, frame in ch.run(now):
            if (frame[0], j) in got:
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
    ch.arrive(0, b"\xff" * 100, -1, 0)
    got = {j for j, _ in ch.run(10**9)}
    assert got == {1, 2}


def test_reach_is_where_the_basic_rate_fades_out():
    """20 dBm, log-distance exponent 3: heard down to -86 dBm (6 Mbit/s's -82 less 4 dB), about 157 m."""
    reach = radio.reach_m(Propagation(exponent=3), 2.412e9, G, radio.DEFAULT_NOISE_FLOOR, 20.0, 0.0)
    assert reach == pytest.approx(10 ** ((20 + 86 - radio.friis(1.0, 2.412e9)) / 30), rel=0.03)


def bianchi(n: int, phy: radio.Phy, nbytes: int, rate: float) -> tuple[float, float]:
    """Bianchi's saturation model (IEEE JSAC 18(3), 2000), basic access, with the retry limit (Wu et al., 2002):
    Mbit/s of frames that n saturated stations in range of each other deliver, and the probability an attempt
    collides.  tau (a station sends in a slot) and p (another does) solved as a fixed point: with W_i =
    min(2^i (CWmin + 1), CWmax + 1) for attempts i = 0..retry limit, tau = sum p^i / sum p^i (W_i + 1) / 2 and
    p = 1 - (1 - tau)^(n - 1).  A success holds the air T_s = frame + SIFS + ACK + DIFS; a collision T_c =
    frame + EIFS (the stations that sensed it wait EIFS, the senders their ACK timeout and then the same)."""
    windows = [min((phy.cw_min + 1) * 2**i, CW_MAX + 1) for i in range(RETRY_LIMIT + 1)]

    def tau(p: float) -> float:
        return sum(p**i for i in range(len(windows))) / sum(p**i * (w + 1) / 2 for i, w in enumerate(windows))

    low, high = 0.0, 1.0
    for _ in range(60):  # p - (1 - (1 - tau(p))^(n-1)) rises with p: bisect for its zero
        p = (low + high) / 2
        low, high = (low, p) if p > 1 - (1 - tau(p)) ** (n - 1) else (p, high)
    t = tau(p)
    busy = 1 - (1 - t) ** n
    alone = n * t * (1 - t) ** (n - 1) / busy
    frame = radio.frame_us(phy, rate, nbytes)
    success, collision = frame + phy.sifs + phy.ack_us + radio.difs(phy), frame + radio.eifs(phy)
    mbits = alone * busy * 8 * nbytes / ((1 - busy) * phy.slot + busy * alone * success + busy * (1 - alone) * collision)
    return mbits, p


@pytest.mark.parametrize("n", [2, 5, 10, 20, 50])
def test_saturated_stations_share_the_air_as_bianchi_predicts(n):
    """n stations 5 m around a receiver (54 Mbit/s, no loss but collisions), each always with a 1500-byte frame
    for it: throughput within 3 % of Bianchi's model and the collision probability within 0.03."""
    angle = 2 * math.pi / n
    xs = [(0.0, 0.0)] + [(5 * math.cos(k * angle), 5 * math.sin(k * angle)) for k in range(n)]
    pos = np.array([[x, y, 0.0] for x, y in xs])
    ch = Channel(G, Propagation(exponent=3), 2.412e9, -91.0, pos, np.full(n + 1, 20.0), np.zeros(n + 1), seed=n)
    assert all(ch.rate(i, 0) == 54 for i in range(1, n + 1)) and all(len(ch.hears[i]) == n for i in range(n + 1))
    seconds, delivered = 6, 0
    for now in range(0, seconds * 10**9, 500_000):
        for i in range(1, n + 1):
            while ch.queued(i) < 4:
                ch.arrive(i, bytes(1500), 0, now)
        delivered += sum(len(frame) for _, frame in ch.run(now))
    mbits, p = bianchi(n, G, 1500, 54)
    failed = (ch.counts["retries"] + ch.counts["lost"]) / ch.counts["attempts"]
    assert 8 * delivered / seconds / 1e6 == pytest.approx(mbits, rel=0.03), (8 * delivered / seconds / 1e6, mbits)
    assert failed == pytest.approx(p, abs=0.03), (failed, p)


def test_a_hidden_sender_35_db_weaker_leaves_a_strong_link_its_throughput():
    """s sends to r 10 m away (-50 dBm); h, 150 m from r (-85.3 dBm there, 35 dB weaker) and hidden from s
    (160 m), floods its own partner at full rate: r captures s's frames over h's and decodes them at 35 dB of
    SINR, so the link keeps at least 95 % of what it carries alone."""
    xs = [(0, 0), (10, 0), (-150, 0), (-150, -10)]  # r, s, h, h's partner
    ch = lambda: Channel(  # noqa: E731
        G, Propagation(exponent=3), 2.412e9, -91.0, np.array([[x, y, 0] for x, y in xs], dtype=float), np.full(4, 20.0),
        np.zeros(4), seed=3,
    )  # fmt: skip
    probe = ch()
    assert probe.links.rx[1, 0] == pytest.approx(-50, abs=0.2) and probe.links.rx[2, 0] == pytest.approx(-85.3, abs=0.2)
    assert 2 not in probe.hears[1] and 0 in probe.hears[2]  # hidden from s; r senses it
    alone = _saturate(ch(), [(1, 0)])[(1, 0)]
    both = _saturate(ch(), [(1, 0), (2, 3)])
    assert both[(1, 0)] >= 0.95 * alone, (both, alone)
    assert both[(2, 3)] > 20, both  # h's own link is far from r and s: it carries its own


def test_twenty_weak_senders_together_raise_the_noise():
    """r hears s at -60 dBm (SINR 31 dB, 54 Mbit/s needs 26).  Senders on a circle 270 m away reach r at
    -88 dBm each, below what anyone senses, hidden from each other and from s, and broadcast without end: one
    of them costs the link little; twenty add up to -75 dBm of interference (16 dB over the noise) and the
    link's 54 Mbit/s frames no longer get through."""

    def channel(weak: int) -> Channel:
        angle = 2 * math.pi / 20
        pos = [[0, 0, 0], [21.5, 0, 0]] + [[270 * math.cos(k * angle), 270 * math.sin(k * angle), 0] for k in range(weak)]
        tx = np.array([20.0, 20.0] + [40.0] * weak)
        gain = np.array([0.0, 0.0] + [-15.0] * weak)
        return Channel(G, Propagation(exponent=3), 2.412e9, -91.0, np.array(pos, dtype=float), tx, gain, seed=5)

    probe = channel(20)
    assert probe.links.rx[1, 0] == pytest.approx(-60, abs=0.2) and probe.links.rx[2, 0] == pytest.approx(-88, abs=0.2)
    assert all(not probe.hears[k] for k in range(2, 22)) and probe.hears[1] == [0]  # nobody senses the weak ones
    flows = lambda weak: [(1, 0)] + [(k, -1) for k in range(2, 2 + weak)]  # noqa: E731
    alone = _saturate(channel(0), flows(0), seconds=1.0)[(1, 0)]
    one = _saturate(channel(1), flows(1), seconds=1.0)[(1, 0)]
    twenty = _saturate(channel(20), flows(20), seconds=1.0)[(1, 0)]
    assert one > 0.8 * alone, (one, alone)
    assert twenty < 0.2 * alone, (twenty, alone)


def _ping_under_flood(far: float) -> list[float]:
    """Station 0 floods station 1 (``far`` m away) with 1514-byte frames, more than the air carries, and pings
    it every 20 ms from another flow (98-byte frames, the echo sent back at once): the round trips in ms."""
    ch = _channel([0, far])
    ping = lambda: bytes(12) + b"\x08\x00\x45" + bytes(8) + b"\x01" + bytes(74)  # noqa: E731  # IPv4, ICMP
    bulk = bytes(12) + b"\x08\x00\x45" + bytes(8) + b"\x11" + bytes(1491)  # IPv4, UDP
    sent: dict[int, int] = {}
    rtts: list[float] = []
    for now in range(0, 3 * 10**9, 500_000):
        while ch.queued(0) < 99:  # the flood keeps the queue full but for the ping's place
            ch.arrive(0, bulk, 1, now)
        if now % 20_000_000 == 0 and now > 10**9:  # after a second of flood: the queue is at its steady state
            sent[now] = now
            ch.arrive(0, ping()[:-4] + now.to_bytes(4, "big"), 1, now)
        for j, frame in ch.run(now):
            if len(frame) == 98 and j == 1:
                ch.arrive(1, frame, 0, now)  # the echo
            elif len(frame) == 98:
                rtts.append((now - int.from_bytes(frame[-4:], "big")) / 1e6)
    assert len(rtts) > 0.9 * len(sent), (len(rtts), len(sent))
    return rtts


@pytest.mark.parametrize(("far", "rate"), [(10, 54), (125, 6)])
def test_a_sparse_flow_keeps_its_round_trip_under_a_saturating_upload(far, rate):
    """fq_codel per station (RFC 8290): the ping's flow is new each time and goes before the flood's backlog,
    whose own sojourn CoDel holds near 5 ms.  A 100-frame drop-tail FIFO gave the ping 25 ms at 54 Mbit/s and
    200 ms at 6."""
    assert _channel([0, far]).rate(0, 1) == rate
    rtts = sorted(_ping_under_flood(far))
    assert rtts[int(0.95 * len(rtts))] <= 30, rtts


def test_destinations_at_54_and_6_mbits_get_about_equal_airtime():
    """mac80211's airtime fairness: a station sending to one peer at 54 Mbit/s and one at 6 gives each about
    the same airtime (so the near one carries about 9 times the bytes), where one FIFO shared by both gives each
    the same number of frames, and the slow one most of the air."""
    ch = _channel([0, 10, -125])
    assert ch.rate(0, 1) == 54 and ch.rate(0, 2) == 6
    got = {1: 0, 2: 0}
    for now in range(0, 3 * 10**9, 500_000):
        for j in (1, 2, 1, 2):  # both always have frames waiting, as many offered to each
            ch.arrive(0, bytes(1514), j, now)
        for j, frame in ch.run(now):
            got[j] += len(frame)
    frames_kept = {j: (1 - ch.loss(0, j)) ** (1536 / radio.REFERENCE_BYTES) for j in (1, 2)}  # an attempt's chance
    airtime = {j: got[j] / ch.rate(0, j) / frames_kept[j] for j in (1, 2)}  # the air each took, retries too
    assert airtime[1] == pytest.approx(airtime[2], rel=0.25), (got, airtime)


def test_a_longer_frame_is_lost_more_at_the_same_signal():
    """Loss scales with length: at the SINR where a 1000-byte PSDU is lost 10 % of the time (the sensitivity's
    definition), a 1514-byte frame (1536 on the air) is lost 1 - 0.9^1.536 = 15 %, a 100-byte one 1 %."""
    ch = _channel([0, 10])
    ch.mw[0, 1] = ch.noise_mw * 10 ** (ch.needs[-1] / 10)  # 54 Mbit/s at its threshold exactly
    per = lambda n: 1 - ch._success(Tx(0, [bytes(n)], 1, len(G.rates) - 1, 0, 1, [1], []), 1, (0, 1, n + 22))  # noqa: E731
    assert per(1000 - 22) == pytest.approx(radio.loss_one(0.0), abs=1e-9)
    assert per(1514) == pytest.approx(1 - (1 - radio.loss_one(0.0)) ** 1.536, abs=1e-6)
    assert per(78) < 0.02 < 0.1 < per(1514)


def test_shadowing_of_a_pair_is_the_same_whoever_else_is_there():
    """Each pair's shadowing comes from its two stations' names and the seed: a fourth station changes none of
    the three pairs before it (one shared draw in order changed an unrelated pair by 8 dB)."""
    prop, names = Propagation(model="log-normal", sigma=8), ["a", "b", "c", "d"]
    pos = np.array([[0, 0, 0], [40, 0, 0], [0, 30, 0], [25, 25, 0]], dtype=float)
    three = radio.path_loss(prop, 2.412e9, pos[:3], radio.station_keys(names[:3]))
    four = radio.path_loss(prop, 2.412e9, pos, radio.station_keys(names))
    assert np.array_equal(four[:3, :3], three)
    assert np.allclose(four, four.T)
    shadow = four - radio.path_loss(Propagation(model="log-distance"), 2.412e9, pos)
    assert np.abs(shadow[np.triu_indices(4, 1)]).max() > 1  # shadowed at all


@pytest.mark.parametrize("moved", [0.0, 5.0, 10.0, 30.0])
def test_shadowing_decorrelates_as_a_station_moves_as_gudmundson_says(moved):
    """Over 2000 seeds, a pair's shadowing before and after one station moves ``moved`` metres has deviation
    sigma and correlation exp(-moved / 10 m) (Gudmundson's model, decorrelation distance 10 m)."""
    keys = radio.station_keys(["a", "b"])
    before, after = [], []
    for seed in range(2000):
        prop = Propagation(model="log-normal", sigma=6, seed=seed, decorrelation=10)
        pair = np.array([0]), np.array([1])
        before.append(radio.shadowing(np.array([[0, 0, 0], [50, 0, 0]], dtype=float), keys, prop, *pair)[0])
        after.append(radio.shadowing(np.array([[0, 0, 0], [50, moved, 0]], dtype=float), keys, prop, *pair)[0])
    assert np.std(before) == pytest.approx(6, rel=0.08)
    assert np.corrcoef(before, after)[0, 1] == pytest.approx(math.exp(-moved / 10), abs=0.06)


def test_a_station_spraying_flows_holds_no_more_than_its_queue():
    """Root on a station sends 20 000 frames, each of a new UDP flow, to two peers: the station's queues keep a
    flow only while it has frames (at most its 100), and a peer's queue only while it is in turn."""
    ch = _channel([0, 10, 20])
    sender, most = ch.queues[0], 0
    for k in range(20_000):
        udp = bytes(12) + b"\x08\x00\x45" + bytes(8) + b"\x11" + bytes(10) + k.to_bytes(4, "big") + bytes(60)
        ch.arrive(0, udp, 1 + k % 2, k * 50_000)
        ch.run(k * 50_000)
        most = max(most, sum(len(t.flows) for t in sender.txqs.values()))
    ch.run(10**12)
    assert most <= 2 * 100, most
    assert not sender.count and len(sender.txqs) <= 1  # the last peer served leaves at the next turn


def _subframes(sizes: list[int]) -> list[int]:
    """Octets each Ethernet frame of ``sizes`` takes in an A-MPDU: delimiter, QoS MPDU, padding (not the last's)."""
    mpdus = [radio.DELIMITER + n + radio.MAC_OVERHEAD + radio.QOS_BYTES for n in sizes]
    return [m + (-m % 4) for m in mpdus[:-1]] + mpdus[-1:]


def _aggregate_model(phy: radio.Phy, nbytes: int) -> tuple[int, float]:
    """MPDUs of ``nbytes`` Ethernet frames per A-MPDU within the standard's limits at the top rate, and the Mbit/s of
    frames one saturated sender delivers: Bianchi's model with one station (no collision; a mean backoff of CWmin / 2
    slots), each success DIFS + backoff + the A-MPDU's PPDU + SIFS + a block ACK (802.11-2016 10.24: immediate block
    ack, implicit request), the PPDU's octets a delimiter, QoS MPDU and padding each."""
    limit, rate = phy.aggregate, phy.rates[-1][0]
    assert limit is not None
    n = 1
    while n < limit.frames and sum(_subframes([nbytes] * (n + 1))) <= limit.octets:
        if radio.ppdu_us(phy, rate, sum(_subframes([nbytes] * (n + 1)))) > limit.max_us:
            break
        n += 1
    cycle = radio.difs(phy) + phy.cw_min / 2 * phy.slot + radio.ppdu_us(phy, rate, sum(_subframes([nbytes] * n)))
    return n, 8 * n * nbytes / (cycle + phy.sifs + radio.block_ack_us(phy))


def _pair(phy: radio.Phy, tx_power: float = 20.0, seconds: float = 1.0) -> tuple[Channel, float]:
    """Two stations 3 m apart on 5.18 GHz, the first keeping its queue full (100 frames of 1514 bytes, besides
    those on the air) for the second: the channel and the Mbit/s of frames delivered."""
    ch = Channel(phy, Propagation(exponent=3), 5.18e9, -91.0, np.array([[0, 0, 0], [3, 0, 0]], dtype=float),
                 np.full(2, tx_power), np.zeros(2), seed=11)  # fmt: skip
    got = 0
    for now in range(0, int(seconds * 1e9), 250_000):
        while ch.queues[0].count < 100:
            ch.arrive(0, bytes(1514), 1, now)
        got += sum(len(frame) for _, frame in ch.run(now))
    return ch, 8 * got / seconds / 1e6


@pytest.mark.parametrize(
    ("standard", "width", "streams", "short_gi", "frames", "mbits"),
    [
        ("802.11n", 20, 1, False, 28, 61.55),  # 65 Mbit/s: 5.484 ms holds 28 frames
        ("802.11n", 40, 2, True, 42, 264.74),  # 300 Mbit/s: 65 535 octets hold 42
        ("802.11ac", 80, 1, False, 64, 349.57),  # 390 Mbit/s: the block ack window's 64
    ],
)
def test_an_a_mpdu_pair_carries_what_the_mac_model_says(standard, width, streams, short_gi, frames, mbits):
    """A saturated 802.11n/ac pair 3 m apart at its top rate sends A-MPDUs as large as 802.11-2016 allows (64
    MPDUs, 65 535 octets for HT, 5.484 ms) with a block ACK each: it delivers within 3 % of the analytical MAC
    throughput (without aggregation the same 802.11n HT20 link carried 31.5 Mbit/s)."""
    phy = radio.phy(standard, width, streams, short_gi)
    assert _aggregate_model(phy, 1514) == (frames, pytest.approx(mbits, abs=0.01))
    ch, got = _pair(phy)
    assert ch.rate(0, 1) == phy.rates[-1][0]
    assert got == pytest.approx(mbits, rel=0.03), got
    assert ch.counts["delivered"] / ch.counts["attempts"] == pytest.approx(frames, rel=0.05), ch.counts


def test_an_a_mpdu_loses_frames_one_by_one():
    """At -64 dBm (802.11n MCS 7's sensitivity: each 1000 octets lost 10 %), each MPDU of an A-MPDU is decoded on
    its own (1 - 0.9^1.544: 15 % lost) and only those lost are sent again: the link keeps about 85 % of its clean
    throughput, where losing the aggregate with any of its 28 frames would keep about 1 %."""
    phy = radio.phy("802.11n")
    clean = _pair(phy)[1]
    ch, weak = _pair(phy, tx_power=20 - 64 - float(_pair(phy, seconds=0.01)[0].links.rx[0, 1]))
    assert ch.links.rx[0, 1] == pytest.approx(-64, abs=0.01) and ch.rate(0, 1) == 65
    assert weak == pytest.approx(0.85 * clean, rel=0.06), (weak, clean)
    assert ch.counts["retries"] > 0.1 * ch.counts["delivered"], ch.counts

"""Radio physics of a wireless medium, pure numbers (numpy): path loss, each standard's rates by signal,
loss near the edge and the airtime of a frame (docs/wireless.md).

* Path loss in dB between every two stations from their positions: Friis free space, log-distance,
  log-normal shadowing (per pair, decorrelating as either station moves: Gudmundson), two-ray ground
  reflection, ITU-R P.1238 indoor.
* Received power = transmit power + both antenna gains - path loss.
* The standard's minimum sensitivities (IEEE 802.11-2016: Table 17-18 for OFDM a/g, 19-23 for HT, 21-25
  for VHT) are the signal each rate needs at the default noise floor (-91 dBm); a noise floor above it
  raises every threshold by the difference.  A frame at sensitivity is lost 10 % of the time (the
  standard's definition, for a 1000-byte PSDU), about 1 % two dB above it, 55 % two dB below; a frame of L
  bytes is lost 1 - (1 - PER)^(L / 1000) of the time (a frame-length-scaled error model).
* A card settles on the rate that carries the most: rate x (1 - loss), as Minstrel does.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .wireless import WIDTHS, Propagation

C = 299_792_458.0
DEFAULT_NOISE_FLOOR = -91.0  # dBm: thermal noise in 20 MHz (-101) + a 10 dB noise figure, as the sensitivities assume
PER_SLOPE, PER_OFFSET = 1.2, 1.83  # logistic loss by margin: 10 % at 0 dB, ~1 % at +2 dB
EDGE_MARGIN = -4.0  # below the basic rate's sensitivity by more than this: out of range, nothing at all


@dataclass(frozen=True)
class Phy:
    """One standard: its rates (Mbit/s) with the signal each needs (dBm), and its timing (µs)."""

    name: str
    rates: tuple[tuple[float, float], ...]
    preamble: float  # PLCP preamble and header
    slot: float
    sifs: float
    cw_min: int
    ack_us: float  # an ACK frame's airtime
    extension: float = 0.0  # 802.11g's signal extension after every OFDM frame
    dsss: bool = False  # bits/rate with no symbols (802.11b)
    symbol: float = 4.0  # µs an OFDM symbol lasts (3.6: HT/VHT's short guard interval)
    aggregate: Aggregate | None = None  # HT/VHT: A-MPDU limits (None: one frame per PPDU)


@dataclass(frozen=True)
class Aggregate:
    """A-MPDU limits (IEEE 802.11-2016): MPDUs per aggregate (the block ack window, 64: 10.24.7.5), octets
    (HT: 65 535, Table 9-163's largest exponent; VHT: 1 048 575, 9.4.2.158.2) and a PPDU's longest time
    (aPPDUMaxTime 5.484 ms: Tables 19-25 and 21-28)."""

    frames: int = 64
    octets: int = 65_535
    max_us: float = 5484.0


# Rates and minimum sensitivities (20 MHz, one stream); ACKs at 24 Mbit/s OFDM (28 µs), 1 Mbit/s DSSS.
_OFDM = ((6, -82), (9, -81), (12, -79), (18, -77), (24, -74), (36, -70), (48, -66), (54, -65))
# HT/VHT MCS 0-9: bits per subcarrier, code rate, minimum sensitivity at 20 MHz (802.11-2016 Tables 19-23, 21-25;
# 3 dB more for each doubling of the width).  HT has MCS 0-7 of each stream; VHT 0-9.
_MCS = ((1, 1 / 2, -82), (2, 1 / 2, -79), (2, 3 / 4, -77), (4, 1 / 2, -74), (4, 3 / 4, -70), (6, 2 / 3, -66),
        (6, 3 / 4, -65), (6, 5 / 6, -64), (8, 3 / 4, -59), (8, 5 / 6, -57))  # fmt: skip
SUBCARRIERS = {20: 52, 40: 108, 80: 234, 160: 468}  # data subcarriers by width (MHz)
DEFAULT_WIDTH = {"802.11n": 20, "802.11ac": 80}
MAX_STREAMS = 4
_LTFS = {1: 1, 2: 2, 3: 4, 4: 4}  # training fields by spatial streams (Tables 19-13, 21-13)


def high_throughput(standard: str, width: int | None = None, streams: int = 1, short_gi: bool = False) -> Phy:
    """802.11n (HT-mixed) or 802.11ac (VHT) at ``width`` MHz with ``streams`` spatial streams: each MCS's rate
    from its data bits per symbol (subcarriers x bits x code rate x streams) over a 4 µs symbol, 3.6 µs with the
    short guard interval; the preamble with a training field per stream; A-MPDU limits."""
    vht = standard == "802.11ac"
    width = width or DEFAULT_WIDTH[standard]
    extra = 3 * math.log2(width / 20)
    symbol = 3.6 if short_gi else 4.0
    rates = []
    for bits, code, sensitivity in _MCS if vht else _MCS[:8]:
        dbps = SUBCARRIERS[width] * bits * code * streams
        if abs(dbps - round(dbps)) < 1e-9:  # VHT leaves out an MCS whose bits per symbol are not whole (VHT20 MCS 9)
            rates.append((round(dbps) / symbol, sensitivity + extra))
    preamble = 20 + 8 + 4 + 4 * _LTFS[streams] + (4 if vht else 0)  # L-STF, L-LTF, L-SIG; (V)HT-SIG, -STF, -LTFs; SIG-B
    octets = 1_048_575 if vht else 65_535
    return Phy(standard, tuple(rates), preamble, 9, 16, 15, 28, symbol=symbol, aggregate=Aggregate(octets=octets))


PHYS = {
    "802.11b": Phy("802.11b", ((1, -83), (2, -80), (5.5, -79), (11, -76)), 192, 20, 10, 31, 304, dsss=True),
    "802.11g": Phy("802.11g", _OFDM, 20, 9, 10, 15, 28, extension=6),
    "802.11a": Phy("802.11a", _OFDM, 20, 9, 16, 15, 28),
    "802.11n": high_throughput("802.11n"),
    "802.11ac": high_throughput("802.11ac"),
}
REFERENCE_BYTES = 1000  # the PSDU length the sensitivities are defined at (PER 10 %, 802.11-2016 17.3.10.2)
ACK_BYTES = 14  # an ACK frame: frame control, duration, receiver address, FCS
BLOCK_ACK_BYTES = 32  # a compressed BlockAck: frame control, duration, addresses, control, sequence, 64-bit bitmap, FCS
MAC_OVERHEAD = 22  # bytes: an Ethernet frame becomes 802.11 header (24) + LLC/SNAP (8) + FCS (4) - Ethernet header (14)
QOS_BYTES = 2  # an aggregated MPDU's QoS control field (a block ack agreement is per traffic identifier)
DELIMITER = 4  # an A-MPDU subframe's delimiter; each subframe but the last padded to 4 octets


def phy(standard: str, width: int | None = None, streams: int = 1, short_gi: bool = False) -> Phy:
    """The standard's PHY as a medium configures it (HT and VHT: width, streams and guard interval)."""
    return high_throughput(standard, width, streams, short_gi) if standard in WIDTHS else PHYS[standard]


def difs(phy: Phy) -> float:
    return phy.sifs + 2 * phy.slot


def ppdu_us(phy: Phy, rate: float, mac_bytes: int) -> float:
    """Airtime of one PPDU of ``mac_bytes`` (MAC header to FCS, or a whole A-MPDU) at ``rate`` Mbit/s."""
    bits = 8 * mac_bytes
    if phy.dsss:
        return phy.preamble + bits / rate
    symbols = math.ceil((16 + bits + 6) / round(rate * phy.symbol, 6))  # SERVICE + data + tail
    return phy.preamble + 4 * math.ceil(symbols * phy.symbol / 4 - 1e-9) + phy.extension  # short GI: whole 4 µs (19-90)


def frame_us(phy: Phy, rate: float, nbytes: int) -> float:
    """Airtime of one PPDU carrying an Ethernet frame of ``nbytes`` at ``rate`` Mbit/s."""
    return ppdu_us(phy, rate, nbytes + MAC_OVERHEAD)


def legacy_us(phy: Phy, nbytes: int, rate: float = 24) -> float:
    """A control frame of ``nbytes`` in a non-HT OFDM PPDU (20 µs preamble) at ``rate`` Mbit/s."""
    return 20 + 4 * math.ceil((16 + 8 * nbytes + 6) / (4 * rate)) + phy.extension


def block_ack_us(phy: Phy) -> float:
    """A compressed BlockAck at 24 Mbit/s (32 µs), what acknowledges an A-MPDU."""
    return legacy_us(phy, BLOCK_ACK_BYTES)


def eifs(phy: Phy) -> float:
    """EIFS (802.11-2016 10.3.2.3.7): SIFS + an ACK at the lowest rate (1 Mbit/s DSSS, 6 Mbit/s OFDM) + DIFS,
    what a station waits instead of DIFS after a frame it could not read."""
    ack = ppdu_us(phy, 1, ACK_BYTES) if phy.dsss else legacy_us(phy, ACK_BYTES, 6)  # OFDM: whatever its own preamble
    return phy.sifs + ack + difs(phy)


def loss(margin: np.ndarray | float) -> np.ndarray | float:
    """Frame loss from the signal's margin over a rate's threshold, in dB."""
    return 1.0 / (1.0 + np.exp(PER_SLOPE * (np.asarray(margin) + PER_OFFSET)))


def loss_one(margin: float) -> float:
    """``loss`` of one margin, without numpy (the channel's per-frame path)."""
    return 1.0 / (1.0 + math.exp(min(PER_SLOPE * (margin + PER_OFFSET), 700.0)))


def distances(pos: np.ndarray) -> np.ndarray:
    """Metres between every two stations (``pos``: N x 3); at least 0.1 m (no station shares a point)."""
    square = (pos * pos).sum(axis=1)
    d2 = square[:, None] + square[None, :] - 2 * (pos @ pos.T)  # one matrix product: cheap at 1000 stations
    metres: np.ndarray = np.sqrt(np.maximum(d2, 0.01))
    return metres


def friis(d: np.ndarray | float, freq: float) -> np.ndarray | float:
    """Free-space path loss in dB (Friis): 20 log10(4 pi d f / c)."""
    return 20 * np.log10(4 * math.pi * np.asarray(d) * freq / C)


def _friis(prop: Propagation, freq: float, pos: np.ndarray, d: np.ndarray) -> np.ndarray:
    return np.asarray(friis(d, freq))


def _log_distance(prop: Propagation, freq: float, pos: np.ndarray, d: np.ndarray) -> np.ndarray:
    # never less than free space (below a reference distance over 1 m the slope would give less)
    return np.maximum(friis(prop.reference, freq) + 10 * prop.exponent * np.log10(d / prop.reference), friis(d, freq))


def _two_ray(prop: Propagation, freq: float, pos: np.ndarray, d: np.ndarray) -> np.ndarray:
    heights = np.where(pos[:, 2] > 0, pos[:, 2], prop.height)
    hh = heights[:, None] * heights[None, :]
    crossover = 4 * math.pi * hh * freq / C
    return np.where(d < crossover, friis(d, freq), 40 * np.log10(d) - 20 * np.log10(hh))


def _itu_indoor(prop: Propagation, freq: float, pos: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ITU-R P.1238: 20 log10 f(MHz) + N log10 d + Lf(n) - 28, with Lf(n) = floor_loss + 4 (n - 1) for n >= 1
    floors (P.1238's residential and office floor loss at 2.4 GHz: 15 + 4 (n - 1) dB), 0 on one floor."""
    floors = prop.floor_loss + 4 * (prop.floors - 1) if prop.floors else 0.0
    db: np.ndarray = 20 * math.log10(freq / 1e6) + prop.power_coefficient * np.log10(d) + floors - 28
    return db


# Each propagation model's name (model/wireless.py MODELS) and its path loss in dB from the distances.
MODELS = {
    "friis": _friis,
    "log-distance": _log_distance,
    "log-normal": _log_distance,  # and shadowing (path_loss)
    "two-ray": _two_ray,
    "itu-indoor": _itu_indoor,
}


def path_loss(
    prop: Propagation, freq: float, pos: np.ndarray, keys: np.ndarray | None = None, within: float = math.inf
) -> np.ndarray:
    """Path loss in dB between every two stations (symmetric; the diagonal is meaningless); ``keys``: each
    station's (``station_keys``; default its index), which its pairs' shadowing is drawn from; only pairs whose
    mean loss is at most ``within`` dB are shadowed (the others are out of reach whatever their draw)."""
    out = np.asarray(MODELS[prop.model](prop, freq, pos, distances(pos))) + prop.system_loss
    if prop.model == "log-normal" and prop.sigma:
        i, j = np.triu_indices(len(pos), 1)
        near = out[i, j] <= within
        i, j = i[near], j[near]
        shadow = shadowing(pos, np.arange(len(pos), dtype=np.uint64) if keys is None else keys, prop, i, j)
        out[i, j] += shadow
        out[j, i] += shadow
    return out


SHADOW_FEATURES = 24  # cosines summed per pair
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def station_keys(names: list[str]) -> np.ndarray:
    """A 64-bit key per station from its name alone: a pair's shadowing is the same whoever else is there."""
    return np.array([int.from_bytes(hashlib.blake2b(n.encode(), digest_size=8).digest(), "big") for n in names], np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-spread 64-bit hash of each value (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


def _uniforms(pair: np.ndarray, start: int, n: int) -> np.ndarray:
    """``n`` uniforms in (0, 1) for each pair key, numbered from ``start`` (a counter-based generator)."""
    counter = (np.arange(start, start + n, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
    return ((_mix(pair[:, None] + counter[None, :]) >> np.uint64(11)).astype(float) + 0.5) / 2.0**53


def shadowing(pos: np.ndarray, keys: np.ndarray, prop: Propagation, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Shadowing in dB of the pairs (``i[k]``, ``j[k]``): each pair's a Gaussian field of both stations' places (6
    coordinates) with deviation ``sigma`` and correlation exp(-moved / decorrelation) (Gudmundson, Electronics
    Letters 27(23), 1991), as a sum of random cosines whose frequencies are drawn from that correlation's
    spectrum, the multivariate Cauchy (Rahimi and Recht's random features).  Each pair's cosines come from its
    two keys and the seed alone (a counter-based hash), so adding a station changes no other pair."""
    low, high = np.minimum(keys[i], keys[j]), np.maximum(keys[i], keys[j])
    first, second = np.where(keys[i] <= keys[j], i, j), np.where(keys[i] <= keys[j], j, i)
    pair = _mix(_mix(low ^ _mix(np.array([prop.seed], np.uint64))) + high)
    place = np.hstack([pos[first], pos[second]])  # pairs x 6, the same both ways
    total = np.zeros(len(pair))
    for m in range(SHADOW_FEATURES):
        u = _uniforms(pair, 9 * m, 9)
        radius, angle = np.sqrt(-2 * np.log(u[:, :4])), 2 * np.pi * u[:, 4:8]
        normal = np.hstack([radius * np.cos(angle), radius * np.sin(angle)])  # Box-Muller: 8 normals
        w = normal[:, :6] / (prop.decorrelation * np.abs(normal[:, 6:7]))  # multivariate Cauchy, scale 1 / decorrelation
        total += np.cos((w * place).sum(axis=1) + 2 * np.pi * u[:, 8])
    return np.asarray(prop.sigma * math.sqrt(2 / SHADOW_FEATURES) * total)


@dataclass
class Links:
    """The pairs in range (sender ``i[k]``, receiver ``j[k]``): the index of the rate i sends to j at
    (``rate[k]``), its loss (``per[k]``), the basic rate's loss (``basic_per[k]``, broadcast); ``rx[i, j]``: dBm at j
    for every pair."""

    rx: np.ndarray
    i: np.ndarray
    j: np.ndarray
    rate: np.ndarray
    per: np.ndarray
    basic_per: np.ndarray


def links(phy: Phy, rx: np.ndarray, noise_floor: float) -> Links:
    """Each pair's settled rate and loss from the received power matrix."""
    needs = np.array([s for _, s in phy.rates]) + (noise_floor - DEFAULT_NOISE_FLOOR)
    speeds = np.array([r for r, _ in phy.rates])
    reach = rx - needs[0] >= EDGE_MARGIN
    np.fill_diagonal(reach, False)
    i, j = np.nonzero(reach)
    per = np.asarray(loss(rx[i, j][:, None] - needs[None, :]))  # reachable pairs x rates
    best = np.argmax(speeds[None, :] * (1 - per), axis=1)
    return Links(rx, i, j, best, per[np.arange(len(best)), best], per[:, 0])


def received(
    prop: Propagation,
    freq: float,
    pos: np.ndarray,
    tx: np.ndarray,
    gain: np.ndarray,
    keys: np.ndarray | None = None,
    floor: float = -math.inf,
) -> np.ndarray:
    """dBm at j of what i sends, for every pair: tx power + both gains - path loss; pairs more than 4 sigma of
    shadowing under ``floor`` (dBm: what nobody hears) are left unshadowed."""
    within = float(tx.max() + 2 * gain.max()) - floor + 4 * prop.sigma if len(tx) else math.inf
    dbm: np.ndarray = tx[:, None] + gain[:, None] + gain[None, :] - path_loss(prop, freq, pos, keys, within)
    return dbm


def reach_m(prop: Propagation, freq: float, phy: Phy, noise_floor: float, tx: float, gain: float) -> float:
    """How far (m) a station of ``tx`` dBm and ``gain`` dBi is heard at all by one like it (mean path loss)."""
    floor = phy.rates[0][1] + (noise_floor - DEFAULT_NOISE_FLOOR) + EDGE_MARGIN
    grid = np.geomspace(0.5, 100_000, 400)
    pos = np.zeros((len(grid) + 1, 3))
    pos[1:, 0] = grid
    mean = Propagation(**{**prop.model_dump(), "sigma": 0.0})
    heard = tx + 2 * gain - path_loss(mean, freq, pos)[0, 1:] >= floor
    return float(grid[heard].max()) if heard.any() else 0.0

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

from .wireless import Propagation

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


# Rates and minimum sensitivities (20 MHz, one stream; VHT at 80 MHz); ACKs at 24 Mbit/s OFDM (28 µs), 1 Mbit/s DSSS.
_OFDM = ((6, -82), (9, -81), (12, -79), (18, -77), (24, -74), (36, -70), (48, -66), (54, -65))
PHYS = {
    "802.11b": Phy("802.11b", ((1, -83), (2, -80), (5.5, -79), (11, -76)), 192, 20, 10, 31, 304, dsss=True),
    "802.11g": Phy("802.11g", _OFDM, 20, 9, 10, 15, 28, extension=6),
    "802.11a": Phy("802.11a", _OFDM, 20, 9, 16, 15, 28),
    "802.11n": Phy(
        "802.11n",
        ((6.5, -82), (13, -79), (19.5, -77), (26, -74), (39, -70), (52, -66), (58.5, -65), (65, -64)),
        36, 9, 16, 15, 28,
    ),
    "802.11ac": Phy(
        "802.11ac",
        ((29.3, -76), (58.5, -73), (87.8, -71), (117, -68), (175.5, -64), (234, -60), (263.3, -59), (292.5, -58), (351, -53), (390, -51)),
        40, 9, 16, 15, 28,
    ),
}  # fmt: skip
REFERENCE_BYTES = 1000  # the PSDU length the sensitivities are defined at (PER 10 %, 802.11-2016 17.3.10.2)
ACK_BYTES = 14  # an ACK frame: frame control, duration, receiver address, FCS
MAC_OVERHEAD = 22  # bytes: an Ethernet frame becomes 802.11 header (24) + LLC/SNAP (8) + FCS (4) - Ethernet header (14)


def difs(phy: Phy) -> float:
    return phy.sifs + 2 * phy.slot


def ppdu_us(phy: Phy, rate: float, mac_bytes: int) -> float:
    """Airtime of one PPDU of ``mac_bytes`` (MAC header to FCS) at ``rate`` Mbit/s."""
    bits = 8 * mac_bytes
    if phy.dsss:
        return phy.preamble + bits / rate
    symbols = math.ceil((16 + bits + 6) / (rate * 4))  # SERVICE + data + tail, 4 µs symbols
    return phy.preamble + 4 * symbols + phy.extension


def frame_us(phy: Phy, rate: float, nbytes: int) -> float:
    """Airtime of one PPDU carrying an Ethernet frame of ``nbytes`` at ``rate`` Mbit/s."""
    return ppdu_us(phy, rate, nbytes + MAC_OVERHEAD)


def eifs(phy: Phy) -> float:
    """EIFS (802.11-2016 10.3.2.3.7): SIFS + an ACK at the lowest rate (1 Mbit/s DSSS, 6 Mbit/s OFDM) + DIFS,
    what a station waits instead of DIFS after a frame it could not read."""
    if phy.dsss:
        ack = ppdu_us(phy, 1, ACK_BYTES)
    else:  # a legacy OFDM PPDU (20 µs preamble) at 6 Mbit/s, whatever the standard's own preamble
        ack = 20 + 4 * math.ceil((16 + 8 * ACK_BYTES + 6) / 24) + phy.extension
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
    return np.sqrt(np.maximum(d2, 0.01))


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
    return 20 * math.log10(freq / 1e6) + prop.power_coefficient * np.log10(d) + floors - 28


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
    return x ^ (x >> np.uint64(31))


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
    per = loss(rx[i, j][:, None] - needs[None, :])  # reachable pairs x rates
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
    return tx[:, None] + gain[:, None] + gain[None, :] - path_loss(prop, freq, pos, keys, within)


def reach_m(prop: Propagation, freq: float, phy: Phy, noise_floor: float, tx: float, gain: float) -> float:
    """How far (m) a station of ``tx`` dBm and ``gain`` dBi is heard at all by one like it (mean path loss)."""
    floor = phy.rates[0][1] + (noise_floor - DEFAULT_NOISE_FLOOR) + EDGE_MARGIN
    grid = np.geomspace(0.5, 100_000, 400)
    pos = np.zeros((len(grid) + 1, 3))
    pos[1:, 0] = grid
    mean = Propagation(**{**prop.model_dump(), "sigma": 0.0})
    heard = tx + 2 * gain - path_loss(mean, freq, pos)[0, 1:] >= floor
    return float(grid[heard].max()) if heard.any() else 0.0

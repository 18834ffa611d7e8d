"""Fast fading of a wireless medium (docs/wireless.md): each frame's power on each link is the mean (path loss,
shadowing) times a random gain of mean 1, drawn once per frame and receiver (block fading: constant over a
frame, independent between frames).

* ``rayleigh``: no direct path; the amplitude is Rayleigh, the power gain exponential.
* ``rician``: a direct path K times the scattered power; the gain is |sqrt(K / (K + 1)) + CN(0, 1 / (K + 1))|^2.
* ``nakagami``: the amplitude is Nakagami-m, the power gain Gamma(m, 1 / m) (m = 1 is Rayleigh).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from .wireless import Fading


def _rayleigh(rng: random.Random, fading: Fading) -> float:
    return rng.expovariate(1.0)


def _rician(rng: random.Random, fading: Fading) -> float:
    scatter = math.sqrt(0.5 / (fading.k + 1))
    real = math.sqrt(fading.k / (fading.k + 1)) + scatter * rng.gauss(0.0, 1.0)
    imag = scatter * rng.gauss(0.0, 1.0)
    return real * real + imag * imag


def _nakagami(rng: random.Random, fading: Fading) -> float:
    return rng.gammavariate(fading.m, 1.0 / fading.m)


# Each fading model's name (model/wireless.py FADINGS but "none") and its power gain's draw.
GAINS: dict[str, Callable[[random.Random, Fading], float]] = {
    "rayleigh": _rayleigh,
    "rician": _rician,
    "nakagami": _nakagami,
}


def drawer(fading: Fading | None) -> Callable[[], float] | None:
    """A call drawing one frame's power gain on one link, from ``fading``'s seed (None: no fading)."""
    if fading is None or fading.model == "none":
        return None
    rng, gain = random.Random(fading.seed), GAINS[fading.model]
    return lambda: gain(rng, fading)

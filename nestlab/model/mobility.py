"""Where a wireless medium's stations are over time, from its ``mobility:`` (docs/wireless.md).

* random-waypoint: each station walks straight to a random point of the area at a random speed, pauses, again;
* random-walk: a random direction and speed, kept for a second, reflected at the area's edges;
* gauss-markov: speed and direction each step = alpha x the last + (1 - alpha) x the mean + a random part
  (alpha 0: a random walk, 1: a straight line), reflected at the edges;
* trace: a file of steps ``{t: 1s, positions: {node: [x, y]}}``, as ``nestlab mobility random-waypoint`` writes.

Every model gives the positions of the moving stations every ``interval`` seconds (a trace: at its own times).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from .errors import Problem, TopologyError
from .units import parse_time
from .yamlsource import read_source

if TYPE_CHECKING:
    from .wireless import Mobility

Step = tuple[float, dict[str, list[float]]]  # (seconds from the start, station -> [x, y, z])
Move = Callable[["Mobility", np.ndarray, np.random.Generator, int], Iterator[np.ndarray]]  # positions, frame by frame


def steps(spec: Mobility, start: dict[str, list[float]], folder: Path) -> list[Step]:
    """The moves of ``spec`` for stations starting at ``start`` (a trace's path is relative to ``folder``)."""
    return MODELS[spec.model](spec, start, folder)


def _traced(spec: Mobility, start: dict[str, list[float]], folder: Path) -> list[Step]:
    assert spec.trace is not None
    return trace(folder / spec.trace if not Path(spec.trace).is_absolute() else Path(spec.trace), set(start))


def _moved(spec: Mobility, start: dict[str, list[float]], move: Move) -> list[Step]:
    """The stations ``spec`` names, moved by ``move`` every ``interval`` seconds for ``duration``."""
    movers = [n for n in start if spec.stations is None or n in spec.stations]
    pos = np.array([start[n] for n in movers], dtype=float).reshape(-1, 3)
    rng = np.random.default_rng(spec.seed)
    out: list[Step] = []
    count = int(round(spec.duration / spec.interval))
    for k, frame in enumerate(move(spec, pos, rng, count), start=1):
        out.append((k * spec.interval, {n: frame[i].round(2).tolist() for i, n in enumerate(movers)}))
    return out


def _bounded(spec: Mobility, pos: np.ndarray, vel: np.ndarray) -> None:
    """Keep positions in the area, turning velocities back at its edges (in place)."""
    for axis in (0, 1):
        low, high = pos[:, axis] < 0, pos[:, axis] > spec.area[axis]
        pos[low, axis] = -pos[low, axis]
        pos[high, axis] = 2 * spec.area[axis] - pos[high, axis]
        vel[low | high, axis] *= -1
    pos[:, :2] = pos[:, :2].clip(0, spec.area)


def _waypoint(spec: Mobility, pos: np.ndarray, rng: np.random.Generator, count: int) -> Iterator[np.ndarray]:
    n = len(pos)
    goal = rng.uniform((0, 0), spec.area, (n, 2))
    speed = rng.uniform(spec.speed[0], spec.speed[1], n)
    paused = np.zeros(n)
    for _ in range(count):
        delta = goal - pos[:, :2]
        dist = np.hypot(delta[:, 0], delta[:, 1])
        stride = np.where(paused > 0, 0.0, speed * spec.interval)
        arrived = (dist <= stride) & (paused <= 0)
        walking = ~arrived & (paused <= 0)
        pos[walking, :2] += delta[walking] / dist[walking, None] * stride[walking, None]
        pos[arrived, :2] = goal[arrived]
        goal[arrived] = rng.uniform((0, 0), spec.area, (int(arrived.sum()), 2))
        speed[arrived] = rng.uniform(spec.speed[0], spec.speed[1], int(arrived.sum()))
        paused = np.where(arrived, spec.pause, paused - spec.interval)
        yield pos


def _walk(spec: Mobility, pos: np.ndarray, rng: np.random.Generator, count: int) -> Iterator[np.ndarray]:
    vel = None
    every = max(1, int(round(1.0 / spec.interval)))  # a new direction and speed each second
    for k in range(count):
        if k % every == 0:
            angle = rng.uniform(0, 2 * math.pi, len(pos))
            speed = rng.uniform(spec.speed[0], spec.speed[1], len(pos))
            vel = np.stack([np.cos(angle) * speed, np.sin(angle) * speed], axis=1)
        assert vel is not None
        pos[:, :2] += vel * spec.interval
        _bounded(spec, pos, vel)
        yield pos


def _gauss_markov(spec: Mobility, pos: np.ndarray, rng: np.random.Generator, count: int) -> Iterator[np.ndarray]:
    n, a = len(pos), spec.alpha
    mean_speed, spread = sum(spec.speed) / 2, (spec.speed[1] - spec.speed[0]) / 4 or 0.1
    speed = np.full(n, mean_speed)
    heading = rng.uniform(0, 2 * math.pi, n)
    mean_heading = heading.copy()
    noise = math.sqrt(1 - a * a)
    for _ in range(count):
        speed = a * speed + (1 - a) * mean_speed + noise * rng.normal(0, spread, n)
        speed = speed.clip(spec.speed[0], spec.speed[1])
        heading = a * heading + (1 - a) * mean_heading + noise * rng.normal(0, math.pi / 4, n)
        vel = np.stack([np.cos(heading) * speed, np.sin(heading) * speed], axis=1)
        pos[:, :2] += vel * spec.interval
        before = vel.copy()
        _bounded(spec, pos, vel)
        turned = (before != vel).any(axis=1)
        heading[turned] = np.arctan2(vel[turned, 1], vel[turned, 0])
        mean_heading[turned] = heading[turned]
        yield pos


def trace(path: Path, stations: set[str]) -> list[Step]:
    """The steps of a trace file (``positions:`` of stations on the medium; z defaults to 0)."""
    source = str(path)
    try:
        data = yaml.safe_load(read_source(path, "the mobility trace"))
        out = []
        for raw in data["steps"]:
            if "positions" not in raw:
                raise ValueError("a trace's steps need positions: (a graph of edges only has no places)")
            unknown = set(raw["positions"]) - stations
            if unknown:
                raise ValueError(f"{', '.join(sorted(unknown))}: not stations of the medium")
            where = {n: [float(v) for v in p] + [0.0] * (3 - len(p)) for n, p in raw["positions"].items()}
            out.append((parse_time(raw["t"]) / 1e6, where))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise TopologyError(source, [Problem((), f"cannot read the mobility trace: {exc}")]) from None
    return out


# The models ``mobility: {model: ...}`` names (the schema's words, model/wireless.py; a test holds the two equal).
MODELS: dict[str, Callable[[Mobility, dict[str, list[float]], Path], list[Step]]] = {
    "random-waypoint": lambda spec, start, _folder: _moved(spec, start, _waypoint),
    "random-walk": lambda spec, start, _folder: _moved(spec, start, _walk),
    "gauss-markov": lambda spec, start, _folder: _moved(spec, start, _gauss_markov),
    "trace": _traced,
}

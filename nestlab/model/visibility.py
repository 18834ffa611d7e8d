"""Time-varying visibility graphs for MANETs: load them, and generate them by random waypoint.

A graph file is YAML with a list of ``steps``; each step has a time ``t`` and either
``edges`` (pairs of nodes that see each other) or ``positions`` (``node: [x, y]``) from
which visibility is computed with the file's (or the step's) radio ``range``::

    range: 250
    steps:
      - {t: 0s, edges: [[n1, n2], [n2, n3]]}
      - {t: 5s, positions: {n1: [0, 0], n2: [300, 0], n3: [100, 50]}}
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem, TopologyError
from .units import parse_time
from .yamlsource import read_source

Pair = frozenset[str]


@dataclass(frozen=True)
class Step:
    at: float  # seconds
    edges: frozenset[Pair]


def pair_link_names(a: str, b: str) -> tuple[str, str]:
    """The interfaces of the radio link between ``a`` and ``b``: ``a:v-b`` and ``b:v-a``."""
    return f"{a}:v-{b}", f"{b}:v-{a}"


def load(path: str | Path, nodes: list[str]) -> list[Step]:
    """Read a graph file; every node it names must be one of ``nodes``."""
    source = str(path)
    try:
        data = yaml.safe_load(read_source(path, "the visibility graph"))
    except (OSError, yaml.YAMLError) as exc:
        raise TopologyError(source, [Problem((), f"cannot read the visibility graph: {exc}")]) from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise TopologyError(source, [Problem((), "a visibility graph is a mapping with a list of steps: (see docs/shaping.md)")])
    steps = []
    for i, raw in enumerate(data["steps"]):
        where = ("steps", i)
        try:
            at = parse_time(raw["t"]) / 1e6
            if "edges" in raw:
                edges = frozenset(Pair(e) for e in raw["edges"] if len(set(e)) == 2)
            else:
                edges = in_range(raw["positions"], float(raw.get("range", data.get("range", 0))))
        except (KeyError, TypeError, ValueError) as exc:
            raise TopologyError(
                source, [Problem(where, f"each step needs t: and edges: or positions: (+ range:): {exc}")]
            ) from None
        unknown = {n for e in edges for n in e} - set(nodes)
        if unknown:
            raise TopologyError(
                source, [Problem(where, f"unknown nodes {', '.join(sorted(unknown))} (mobile nodes: {', '.join(nodes)})")]
            )
        steps.append(Step(at, edges))
    return sorted(steps, key=lambda s: s.at)


def in_range(positions: dict[str, Any], radio_range: float) -> frozenset[Pair]:
    names = sorted(positions)
    return frozenset(
        Pair((a, b)) for i, a in enumerate(names) for b in names[i + 1 :] if math.dist(positions[a], positions[b]) <= radio_range
    )


def random_waypoint(
    nodes: int,
    width: float,
    height: float,
    radio_range: float,
    duration: float,
    step: float = 1.0,
    speed: tuple[float, float] = (1.0, 20.0),
    pause: float = 2.0,
    seed: int | None = None,
) -> dict[str, Any]:
    """A graph file (as data) for ``nodes`` moving by random waypoint: positions every ``step`` seconds."""
    rng = random.Random(seed)
    names = [f"n{i + 1}" for i in range(nodes)]
    pos = {n: [rng.uniform(0, width), rng.uniform(0, height)] for n in names}
    goal = {n: [rng.uniform(0, width), rng.uniform(0, height)] for n in names}
    velocity = {n: rng.uniform(*speed) for n in names}
    waiting = {n: 0.0 for n in names}
    steps = []
    t = 0.0
    while t <= duration + 1e-9:
        steps.append({"t": f"{t:g}s", "positions": {n: [round(p[0], 1), round(p[1], 1)] for n, p in pos.items()}})
        for n in names:
            if waiting[n] > 0:
                waiting[n] -= step
                continue
            dx, dy = goal[n][0] - pos[n][0], goal[n][1] - pos[n][1]
            dist = math.hypot(dx, dy)
            move = velocity[n] * step
            if dist <= move:
                pos[n] = goal[n]
                goal[n] = [rng.uniform(0, width), rng.uniform(0, height)]
                velocity[n] = rng.uniform(*speed)
                waiting[n] = pause
            else:
                pos[n] = [pos[n][0] + dx / dist * move, pos[n][1] + dy / dist * move]
        t += step
    return {"range": radio_range, "steps": steps}

"""What a node does once it is wired (containerlab's ``cmd``, ``startup-delay``, ``stages``, ``healthcheck``), and the
checks that its ``wait-for`` references exist and never wait in a circle.

A node goes through the stages in order: create, create-links (both reached when the deploy has made
every namespace and link), configure (its ``cmd`` starts, then its ``exec`` runs), healthy (its
healthcheck passes, at once without one) and exit (its ``cmd`` has ended).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import Path, Problem
from .modes import kind_defaults, node_kind
from .schema import Topology
from .schema.nodes import STAGES, Healthcheck, NodeSpec, StageSpec
from .yamlsource import Located

_Stage = tuple[str, str]  # (node, stage)


@dataclass(frozen=True)
class Startup:
    cmd: str | None = None
    delay: float = 0.0
    stages: dict[str, StageSpec] = field(default_factory=dict)
    health: Healthcheck | None = None

    @property
    def plain(self) -> bool:
        """Nothing beyond exec: the node's exec commands simply run in turn."""
        return not (self.cmd or self.delay or self.stages or self.health)


def _last(layers: list[NodeSpec | None], key: str) -> Any:
    value = None
    for layer in layers:
        if layer is not None and getattr(layer, key):
            value = getattr(layer, key)
    return value


def startup_of(topology: Topology, name: str) -> Startup:
    """A node's start-up keys, its own over its kind's over ``defaults``."""
    body = topology.topology
    layers = [body.defaults, kind_defaults(body, node_kind(topology, name)), body.nodes[name]]
    cmd = _last(layers, "cmd")
    if isinstance(cmd, list):
        cmd = shlex.join(cmd)
    entry = _last(layers, "entrypoint")
    if entry:
        cmd = f"{entry} {cmd}" if cmd else entry
    return Startup(cmd, float(_last(layers, "startup_delay") or 0), _last(layers, "stages") or {}, _last(layers, "healthcheck"))


def check_stages(topology: Topology, located: Located) -> list[Problem]:
    """Every ``wait-for`` names a node and a stage, and no node waits, however indirectly, on itself."""
    problems: list[Problem] = []
    nodes = topology.topology.nodes
    after: dict[tuple[str, str], list[tuple[tuple[str, str], Path]]] = {}  # (node, stage) -> what must finish first
    for name in nodes:
        for stage, spec in startup_of(topology, name).stages.items():
            for j, wait in enumerate(spec.wait_for):
                path = ("topology", "nodes", name, "stages", stage, "wait-for", j)
                if wait.node not in nodes:
                    problems.append(
                        located.problem(path + ("node",), f"wait-for names node '{wait.node}', which is not under topology.nodes")
                    )
                elif wait.node == name:
                    problems.append(
                        located.problem(
                            path + ("node",), f"{name} waits for its own {wait.stage} stage; a node's stages already run in order"
                        )
                    )
                else:
                    after.setdefault((name, stage), []).append(((wait.node, wait.stage), path))
    if problems or not after:  # without waits between nodes, each node's stages are a line: no circle
        return problems
    # A stage also follows the node's previous stage.
    for name in nodes:
        for before, stage in zip(STAGES, STAGES[1:]):
            after.setdefault((name, stage), []).append(((name, before), ()))
    done: set[tuple[str, str]] = set()
    for start in sorted(after):
        cycle = _cycle(start, after, done)
        if cycle:
            where = next((p for _, p in cycle if p), ())
            chain = " -> ".join(f"{n}.{s}" for (n, s), _ in cycle)
            return [
                located.problem(where, f"wait-for makes a circle ({chain}): no node could ever start; remove one of these waits")
            ]
    return []


def _cycle(at: _Stage, after: dict[_Stage, list[tuple[_Stage, Path]]], done: set[_Stage]) -> list[tuple[_Stage, Path]] | None:
    """A list of ((node, stage), path) closing a circle through ``at``, or None (iterative DFS)."""
    stack: list[tuple[_Stage, Path, Iterator[tuple[_Stage, Path]]]] = [(at, (), iter(after.get(at, ())))]
    on_path = {at: 0}
    trail: list[tuple[_Stage, Path]] = [(at, ())]
    while stack:
        node, _, edges = stack[-1]
        step = next(edges, None)
        if step is None:
            stack.pop()
            trail.pop()
            on_path.pop(node, None)
            done.add(node)
            continue
        target, path = step
        if target in on_path:
            return trail[on_path[target] :] + [(target, path)]
        if target in done:
            continue
        on_path[target] = len(trail)
        trail.append((target, path))
        stack.append((target, path, iter(after.get(target, ()))))
    return None

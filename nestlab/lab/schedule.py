"""Play a lab's ``schedule:`` and ``dynamics:`` graph: timed link changes on a clock that does not drift.

Each event's deadline is computed from the start time (never from the previous
event), the thread sleeps until 2 ms before it and spins the rest, so lateness
does not accumulate.  Every change lands in the event log with its scheduled
and applied wall-clock times.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .. import names
from ..engine import gc_pause
from ..engine.running import Shaper
from ..model import visibility
from ..model.units import parse_time
from ..model.visibility import pair_link_names
from ..plan.desired import mobile_nodes
from . import wireless
from .link_handle import LinkHandle

if TYPE_CHECKING:
    from .lab import Lab

_SPIN = 0.002


@dataclass
class Played:
    at: float  # seconds from the start of the loop
    late_ms: float  # applied minus scheduled
    apply_ms: float  # time spent applying
    what: str
    applied: float = 0.0  # wall-clock time (time.time()) the change took effect


@dataclass(frozen=True)
class Timed:
    at: float  # seconds from the start
    link: tuple[str, str] | None
    params: tuple[tuple[str, str], ...] = ()
    direction: str = "both"
    node: str | None = None
    action: str | None = None
    medium: str | None = None  # a wireless medium whose stations move to ``positions``
    positions: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def prepare(self, running: Lab, handles: dict[tuple[str, str], LinkHandle]) -> Callable[[float], float]:
        """Do the checks and bookkeeping now; the returned call carries the change out at its time
        and returns the milliseconds until the kernel had it."""
        if self.medium:
            return wireless.placer(running, self.medium, {n: list(p) for n, p in self.positions})
        if self.node:
            node = running.nodes[self.node]
            return node.pause if self.action == "stop" else node.resume
        assert self.link is not None  # neither a medium's nor a node's change: a link's
        handle = handles[self.link]
        if self.action == "remove":
            return cast("Callable[[float], float]", handle.remove)
        if self.action == "add":
            return cast("Callable[[float], float]", handle.restore)
        return cast("Callable[[float], float]", handle.prepare(direction=self.direction, **dict(self.params)))

    def describe(self) -> str:
        if self.medium:
            return f"{self.medium} " + (
                " ".join(f"{n}@{','.join(f'{v:g}' for v in p[:2])}" for n, p in self.positions)
                if len(self.positions) <= 4
                else f"{len(self.positions)} stations moved"
            )
        target = self.node or " ".join(self.link or ())
        return f"{target} " + " ".join([*([self.action] if self.action else []), *(f"{k}={v}" for k, v in self.params)])


def timeline(running: Lab) -> list[Timed]:
    """The ``schedule:``, the ``dynamics:`` visibility graph and wireless ``mobility:`` as one list of timed changes."""
    items = []
    for c in running.topology.schedule:
        params = {**(c.set.model_dump(exclude_none=True) if c.set else {}), **({"state": c.state} if c.state else {})}
        link = (c.link[0], c.link[1]) if c.link else None
        items.append(Timed(parse_time(c.at) / 1e6, link, tuple(params.items()), c.direction, c.node, c.action))
    dyn = running.topology.dynamics
    if dyn:
        graph = Path(dyn.graph) if Path(dyn.graph).is_absolute() else Path(running.source).parent / dyn.graph
        visible: frozenset[frozenset[str]] = frozenset()
        for step in visibility.load(graph, mobile_nodes(running.topology)):
            for pair in sorted(step.edges ^ visible, key=sorted):
                a, b = sorted(pair)
                items.append(Timed(step.at, pair_link_names(a, b), (("state", "up" if pair in step.edges else "down"),)))
            visible = step.edges
    for medium, at, where in wireless.moves(running):
        items.append(Timed(at, None, medium=medium, positions=tuple((n, tuple(p)) for n, p in where.items())))
    return sorted(items, key=lambda x: x.at)


@contextmanager
def _realtime() -> Iterator[None]:
    """Play at real-time priority (reset for children) with the garbage collector paused between
    collections of our choosing, so a busy machine delays the changes less.  Without the privilege, plays as is."""
    previous: tuple[int, os.sched_param] | None = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
    except OSError:
        previous = None
    try:
        with gc_pause.paused():
            yield
    finally:
        if previous:
            os.sched_setscheduler(0, *previous)


def play(running: Lab, loops: int = 1, report: Callable[[Played], None] | None = None) -> list[Played]:
    """Apply the timeline ``loops`` times (each loop restarts the clock after the last event)."""
    changes = timeline(running)
    played: list[Played] = []
    shaper = Shaper()
    handles = {c.link: LinkHandle(running, c.link[0], c.link[1], shaper=shaper) for c in changes if c.link}
    for handle in handles.values():  # open sockets and look up interfaces before the clock starts
        for end in (handle.obj.a, handle.obj.b):
            shaper.prepare(names.netns_path(running.name, end.node), end.iface)
    try:
        with _realtime():
            for _ in range(loops):
                _play_once(running, changes, handles, played, report)
    finally:
        shaper.close()
    return played


def _play_once(
    running: Lab,
    changes: list[Timed],
    handles: dict[tuple[str, str], LinkHandle],
    played: list[Played],
    report: Callable[[Played], None] | None,
) -> None:
    start_mono, start_wall = time.monotonic(), time.time()
    pending: list[Played] = []  # reported when the clock has time, so printing never delays a change
    for i, change in enumerate(changes):
        commit = change.prepare(running, handles)
        deadline = start_mono + change.at
        while (left := deadline - time.monotonic()) > _SPIN:
            time.sleep(left - _SPIN)
        while time.monotonic() < deadline:
            pass
        late = (time.monotonic() - deadline) * 1000
        spent = commit(start_wall + change.at)
        played.append(Played(change.at, late, spent, change.describe(), start_wall + change.at + (late + spent) / 1000))
        pending.append(played[-1])
        following = changes[i + 1].at if i + 1 < len(changes) else None
        if following is None or following - change.at > 0.05:  # slack: report and collect garbage now
            for item in pending:
                if report:
                    report(item)
            pending.clear()
            gc.collect()

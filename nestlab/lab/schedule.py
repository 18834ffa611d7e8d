"""Play a lab's ``schedule:``: timed link changes applied on a clock that does not drift.

Each event's deadline is computed from the start time (never from the previous
event), the thread sleeps until 2 ms before it and spins the rest, so lateness
does not accumulate.  Every change lands in the event log with its scheduled
and applied wall-clock times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import names
from ..backends import shaping
from ..model.units import parse_time
from .links import LinkHandle

if TYPE_CHECKING:
    from .lab import Lab

_SPIN = 0.002


@dataclass
class Played:
    at: float  # seconds from the start of the loop
    late_ms: float  # applied minus scheduled
    apply_ms: float  # time spent applying
    what: str


def play(lab: "Lab", loops: int = 1, report: Callable[[Played], None] | None = None) -> list[Played]:
    """Apply the schedule ``loops`` times (each loop restarts the clock after the last event)."""
    changes = sorted(lab.topology.schedule, key=lambda c: parse_time(c.at))
    played: list[Played] = []
    shaper = shaping.Shaper()
    handles = {tuple(c.link): LinkHandle(lab, c.link[0], c.link[1], shaper=shaper) for c in changes}
    for handle in handles.values():  # open sockets and look up interfaces before the clock starts
        for end in (handle.obj.a, handle.obj.b):
            shaper.prepare(names.netns_path(lab.name, end.node), end.iface)
    try:
        for _ in range(loops):
            start_mono, start_wall = time.monotonic(), time.time()
            for change in changes:
                at = parse_time(change.at) / 1e6
                deadline = start_mono + at
                while (left := deadline - time.monotonic()) > _SPIN:
                    time.sleep(left - _SPIN)
                while time.monotonic() < deadline:
                    pass
                late = (time.monotonic() - deadline) * 1000
                params = change.set.model_dump(exclude_none=True) if change.set else {}
                if change.state:
                    params["state"] = change.state
                spent = handles[tuple(change.link)].set(direction=change.direction, scheduled=start_wall + at, **params)
                what = f"{' '.join(change.link)} " + " ".join(f"{k}={v}" for k, v in params.items())
                played.append(Played(at, late, spent, what))
                if report:
                    report(played[-1])
    finally:
        shaper.close()
    return played

"""A running lab's wireless media: where their stations are, and moving them (``nestlab node move``, mobility)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import events
from ..engine.running import ask_medium, medium_trouble
from ..errors import LabError
from ..kinds.wireless import config

if TYPE_CHECKING:
    from .lab import Lab

LOGGED_POSITIONS = 50  # a move of more stations is logged as a count


def media(running: Lab) -> dict[str, list[str]]:
    """Each wireless medium of the lab, with the stations on it."""
    return {
        name: [s["name"] for s in config(obj)["stations"]]
        for name, obj in running.plan.nodes.items()
        if obj.option("medium") is not None  # the wireless kind's plan
    }


def move(running: Lab, positions: dict[str, list[float]]) -> list[str]:
    """Put stations at new places on every medium they are on; the media changed."""
    found = media(running)
    if not found:
        raise LabError(f"lab {running.name} has no wireless medium (a node of kind: wireless)")
    unknown = [n for n in positions if not any(n in stations for stations in found.values())]
    if unknown:
        on = ", ".join(sorted({s for stations in found.values() for s in stations}))
        raise LabError(f"{', '.join(unknown)}: not a station of any wireless medium of lab {running.name} (stations: {on})")
    changed = []
    for name, stations in found.items():
        mine = {n: p for n, p in positions.items() if n in stations}
        if mine:
            began = time.monotonic()
            ask_medium(running.name, name, {"op": "move", "positions": mine})
            _logged(running, name, mine, (time.monotonic() - began) * 1000, None)
            changed.append(name)
    return changed


def troubles(running: Lab) -> dict[str, str]:
    """Each wireless medium of the lab that does not answer, with why (its process ended, with its last error)."""
    found = {name: medium_trouble(running.name, name) for name in media(running)}
    return {name: why for name, why in found.items() if why}


def state(running: Lab, name: str) -> dict[str, Any]:
    """What medium ``name`` holds: stations with positions, pairs in range with rate, signal and loss, counts."""
    return ask_medium(running.name, name, {"op": "state"})


def moves(running: Lab) -> list[tuple[str, float, dict[str, list[float]]]]:
    """Every medium's ``mobility:`` as (medium, seconds from the start, station -> position)."""
    out = []
    for name, obj in running.plan.nodes.items():
        medium = config(obj) if obj.option("medium") is not None else {}
        if medium.get("mobility"):  # numpy and the schema load for a lab whose stations move
            from ..model.mobility import steps
            from ..model.wireless import Mobility

            start = {s["name"]: s["position"] for s in medium["stations"]}
            for at, where in steps(Mobility(**medium["mobility"]), start, Path(running.source).parent):
                out.append((name, at, where))
    return out


def placer(running: Lab, name: str, positions: dict[str, list[float]]) -> Callable[[float], float]:
    """A call that moves stations of medium ``name`` at its scheduled time, logs it and returns the ms it took."""

    def place(scheduled: float) -> float:
        began = time.monotonic()
        ask_medium(running.name, name, {"op": "move", "positions": positions})
        spent = (time.monotonic() - began) * 1000
        _logged(running, name, positions, spent, scheduled)
        return spent

    return place


def _logged(running: Lab, name: str, positions: dict[str, list[float]], spent_ms: float, scheduled: float | None) -> None:
    """The move in the event log: the positions themselves when few stations moved, else how many."""
    what: dict[str, Any] = {"medium": name, "action": "move"}
    what |= {"positions": positions} if len(positions) <= LOGGED_POSITIONS else {"stations": len(positions)}
    events.record(running.name, what, time.time(), spent_ms, scheduled)


def any_mobility(running: Lab) -> bool:
    """Whether a medium of the lab has a ``mobility:`` for ``nestlab run`` to play."""
    return any(
        json.loads(obj.text("medium")).get("mobility") for obj in running.plan.nodes.values() if obj.option("medium") is not None
    )

"""A running lab's wireless media: where their stations are, and moving them (``nestlab node move``, mobility)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..backends.services import medium
from ..errors import LabError

if TYPE_CHECKING:
    from .lab import Lab


def media(lab: Lab) -> dict[str, list[str]]:
    """Each wireless medium of the lab, with the stations on it."""
    return {
        name: [s["name"] for s in json.loads(obj.text("medium"))["stations"]]
        for name, obj in lab.plan.nodes.items()
        if obj.option("medium") is not None  # the wireless kind's plan
    }


def move(lab: Lab, positions: dict[str, list[float]]) -> list[str]:
    """Put stations at new places on every medium they are on; the media changed."""
    found = media(lab)
    if not found:
        raise LabError(f"lab {lab.name} has no wireless medium (a node of kind: wireless)")
    unknown = [n for n in positions if not any(n in stations for stations in found.values())]
    if unknown:
        on = ", ".join(sorted({s for stations in found.values() for s in stations}))
        raise LabError(f"{', '.join(unknown)}: not a station of any wireless medium of lab {lab.name} (stations: {on})")
    changed = []
    for name, stations in found.items():
        mine = {n: p for n, p in positions.items() if n in stations}
        if mine:
            medium.ask(lab.name, name, {"op": "move", "positions": mine})
            changed.append(name)
    return changed


def state(lab: Lab, name: str) -> dict[str, Any]:
    """What medium ``name`` holds: stations with positions, pairs in range with rate, signal and loss, counts."""
    return medium.ask(lab.name, name, {"op": "state"})

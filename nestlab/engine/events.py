"""The lab's event log: one JSON object per line in ``/run/nestlab/LAB/events.jsonl``.

Each event has ``applied`` (wall-clock time it took effect), ``scheduled`` (when a
schedule wanted it, else null), ``latency_ms`` (time spent applying) and ``what``,
so benchmarks can line traffic up with topology changes.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

from .. import names
from ..backends.kernel import files


class Entry(TypedDict):
    """One line of the log."""

    applied: float
    scheduled: float | None
    latency_ms: float
    what: dict[str, Any]  # what changed, as its maker says it (``link``, ``node``, ``action``, ``set``...)


def path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "events.jsonl")


def record(lab: str, what: dict[str, Any], applied: float, latency_ms: float, scheduled: float | None = None) -> None:
    entry: Entry = {"applied": applied, "scheduled": scheduled, "latency_ms": round(latency_ms, 3), "what": what}
    files.append(path(lab), json.dumps(entry) + "\n")


def read(lab: str) -> list[Entry]:
    try:
        with open(path(lab)) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []

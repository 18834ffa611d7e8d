"""The lab's event log: one JSON object per line in ``/run/nestlab/LAB/events.jsonl``.

Each event has ``applied`` (wall-clock time it took effect), ``scheduled`` (when a
schedule wanted it, else null), ``latency_ms`` (time spent applying) and ``what``,
so benchmarks can line traffic up with topology changes.
"""

from __future__ import annotations

import json
import os

from .. import names


def path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "events.jsonl")


def record(lab: str, what: dict, applied: float, latency_ms: float, scheduled: float | None = None) -> None:
    entry = {"applied": applied, "scheduled": scheduled, "latency_ms": round(latency_ms, 3), "what": what}
    with open(path(lab), "a") as fh:
        fh.write(json.dumps(entry) + "\n")


def read(lab: str) -> list[dict]:
    try:
        with open(path(lab)) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []

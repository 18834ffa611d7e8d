"""``nestlab inspect --lab NAME --format json`` without the command-line framework, for scripts that poll a lab.

Loading typer, the sites and the schema took more than half of a 500-node lab's ``inspect``; this path reads the
arguments itself and builds the same report (engine/inspect.py) from the lab's state.  Anything it does not take (a
table, ``--node``, a lab elsewhere or not running, a damaged state) goes to the full command, which says what is wrong.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sites.seam import Report


def parse(argv: list[str]) -> str | None:
    """The lab ``inspect --lab NAME --format json`` (in any order, ``--key=value`` too) names; None for any other
    arguments."""
    options: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        key, eq, value = arg.partition("=")
        if key not in ("--lab", "--format") or key in options:
            return None
        found = value if eq else next(args, None)
        if found is None:
            return None
        options[key] = found
    return options["--lab"] if options.keys() == {"--lab", "--format"} and options["--format"] == "json" else None


def inspect(argv: list[str]) -> int | None:
    """Print the report of ``nestlab inspect`` (the arguments after it): the exit code, or None to leave it to the
    full command."""
    name = parse(argv)
    if name is None or os.geteuid() != 0:
        return None

    from ..engine import state, where
    from ..engine.inspect import report
    from ..errors import LabError
    from ..plan.blueprint import Blueprint
    from .jsonout import print_json

    try:
        current = state.read(name)
        if current is None or current.status != "running" or where.read(name):
            return None
    except LabError:
        return None
    found = report(Blueprint.recorded(current))
    for warning in trace_warnings(found):
        sys.stderr.write(warning + "\n")
    print_json(found)
    return 0


def trace_warnings(found: Report) -> list[str]:
    """A warning for each interface of the report whose trace player is not playing (lagging, dead)."""
    warnings = []
    for entry in found["nodes"]:
        traces = entry.get("traces")
        for iface, player in traces.items() if isinstance(traces, dict) else ():
            if isinstance(player, dict) and player["player"] != "playing":
                warnings.append(f"warning: the trace player of {entry['name']}:{iface} is {player['player']}: {player['why']}")
    return warnings

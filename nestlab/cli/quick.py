"""``nestlab link set --lab NAME ...`` without the command-line framework, for shell loops of changes.

Loading typer, rich and the schema took 0.15 s of every change; this path reads the arguments
itself and applies the change through the same ``LiveLink`` (engine/link_changes.py) as the full
command.  Anything it does not take (``-t``, ``--help``, an unknown option, a refused value, a lab that is not running)
goes to the full command instead, which says what is wrong.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .link_options import FLAGS, OPTIONS, WHOLE

# What the quick path takes: --lab and link set's options (cli/link_options.py) but those the full command answers.
_VALUED = {"lab"} | {option.name for option in OPTIONS if option.quick and option.kind is not bool}


@dataclass
class _RunningLab:
    """What a LiveLink given its link needs of a lab: its name."""

    name: str


def parse(argv: list[str]) -> tuple[str, str, dict[str, str], set[str]] | None:
    """The two endpoints, the valued options and the flags of ``link set`` arguments; None for any it does not take."""
    ends, options, flags = [], {}, set()
    args = iter(argv)
    for arg in args:
        if not arg.startswith("--"):
            if arg.startswith("-"):
                return None
            ends.append(arg)
            continue
        key, eq, value = arg[2:].partition("=")
        if key in FLAGS and not eq:
            flags.add(key)
        elif key in _VALUED and key not in options:
            value = value if eq else next(args, None)
            if value is None:
                return None
            options[key] = value
        else:
            return None
    if len(ends) != 2 or "lab" not in options or flags == FLAGS:
        return None
    return ends[0], ends[1], options, flags


def link_set(argv: list[str]) -> int | None:
    """Apply ``nestlab link set`` (the arguments after it): the exit code, or None to leave it to the full command."""
    parsed = parse(argv)
    if parsed is None or os.geteuid() != 0:
        return None
    a, b, options, flags = parsed
    from ..engine import state, where
    from ..engine.link_changes import LiveLink
    from ..errors import LabError
    from ..model.errors import TopologyError

    name, direction = options.pop("lab"), options.pop("direction", "both")
    params: dict[str, str | int] = dict(options)
    for key in WHOLE:  # whole numbers on the full command too
        if key in params:
            if not params[key].isascii() or not params[key].isdigit():
                return None
            params[key] = int(params[key])
    if flags:
        params["state"] = "up" if "up" in flags else "down"
    if not params:
        return None
    link = state.read_link(name, a, b)
    if link is None or where.read(name):  # the lab runs elsewhere: the full command sends the change there
        return None
    try:
        commit = LiveLink(_RunningLab(name), a, b, obj=link).prepare(direction=direction, **params)
    except (LabError, TopologyError):
        return None  # said better by the full command
    try:
        spent = commit()
    except LabError as exc:
        sys.stderr.write(f"error {exc}\n")
        return 1
    sys.stderr.write(f"link {a} {b}: {', '.join(f'{k}={v}' for k, v in params.items())} applied in {spent:.1f} ms\n")
    return 0

"""``nestlab link set``'s options, written once: the full command (cli/live.py) makes its parameters of them and
the quick path (cli/quick.py) reads the same names.  Nothing here imports typer, which the quick path goes without."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkOption:
    """One option of ``link set``: ``--NAME`` taking a ``kind`` (``bool``: a flag), with its help."""

    name: str
    kind: type
    help: str
    default: object = None
    shapes: bool = True  # a setting of the link's shaping (what a change lists), not --down, --up or --direction
    quick: bool = True  # taken by the quick path; else the full command answers


OPTIONS = (
    LinkOption("rate", str, "e.g. 10mbit, 20gbit (HTB, 64-bit)."),
    LinkOption("burst", str, "HTB burst, e.g. 64kb."),
    LinkOption("queue", int, "Queue length in packets."),
    LinkOption("delay", str, "e.g. 20ms (netem)."),
    LinkOption("jitter", str, "e.g. 5ms (netem, needs --delay)."),
    LinkOption("distribution", str, "Of the jitter: uniform, normal, pareto, paretonormal."),
    LinkOption("loss", str, "e.g. 10% (netem)."),
    LinkOption(
        "gemodel", str, "Bursty loss, Gilbert-Elliott as tc writes it: 'P R [1-H [1-K]]', e.g. '5% 20%' (netem).", quick=False
    ),
    LinkOption("corrupt", str, "e.g. 1% (netem)."),
    LinkOption("duplicate", str, "e.g. 1% (netem)."),
    LinkOption("reorder", str, "e.g. 25% (netem, needs --delay)."),
    LinkOption("mtu", int, "MTU of both ends."),
    LinkOption("qdisc", str, "htb (default) or tbf: what enforces the rate."),
    LinkOption(
        "trace",
        str,
        "A Mahimahi delivery trace file: the rate follows it, looping (replaces --rate; none stops it).",
        quick=False,
    ),
    LinkOption("down", bool, "Take the link down (both ends).", default=False, shapes=False),
    LinkOption("up", bool, "Bring the link up again.", default=False, shapes=False),
    LinkOption("direction", str, "both, a (what A sends) or b (what B sends).", default="both", shapes=False),
)

SHAPING = tuple(option.name for option in OPTIONS if option.shapes)  # in the order a change lists them
FLAGS = frozenset(option.name for option in OPTIONS if option.kind is bool)
WHOLE = frozenset(option.name for option in OPTIONS if option.kind is int)  # whole numbers

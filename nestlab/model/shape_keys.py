"""What each shaping key of a link takes, checked without pydantic.

The schema's ``Shape`` validates a topology's ``params:`` with these same parsers and choices;
``nestlab link set`` checks a live change with :func:`problems`, so a shell loop of changes does
not load the schema (tests/test_fuzz.py holds the two to the same answers).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .trace import check_rate, read
from .units import parse_gemodel, parse_percent, parse_rate, parse_size, parse_time

QDISCS = ("htb", "tbf")
DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
STATES = ("up", "down")
TBF_MAX_BITS = 34 * 10**9


def rate_up_to_400g(value: str | int) -> None:
    if parse_rate(value) > 400 * 10**9:
        raise ValueError(f"'{value}' is above 400gbit")


# A whole number as pydantic reads one from text: Unicode blanks around (Rust's trim), a sign, underscores
# between ASCII digits, a zero fraction.
_BLANKS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_WHOLE = re.compile(r"([+-]?[0-9]+(?:_[0-9]+)*)(?:\.0+)?")


def _queue(value: str | int) -> None:
    match = None if isinstance(value, bool) else _WHOLE.fullmatch(str(value).strip(_BLANKS))
    if match is None:
        raise ValueError(f"'{value}' is not a whole number of packets")
    if int(match.group(1)) < 1:
        raise ValueError(f"'{value}' is below 1 packet")


def _choice(allowed: tuple[str, ...]) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise ValueError(f"'{value}' is not one of {', '.join(allowed)}")

    return check


PARSERS: dict[str, Callable[[Any], object]] = {  # each raises ValueError for a value it refuses
    "rate": rate_up_to_400g,
    "burst": parse_size,
    "delay": parse_time,
    "jitter": parse_time,
    **dict.fromkeys(("loss", "loss_correlation", "corrupt", "duplicate", "reorder"), parse_percent),
    "gemodel": parse_gemodel,
}


def _trace(value: str) -> None:
    try:
        times = read(value)
    except OSError as exc:
        raise ValueError(f"'{value}': {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a Mahimahi trace: {exc}") from None
    try:
        check_rate(times)
    except ValueError as exc:
        raise ValueError(f"'{value}' is too fast: {exc}") from None


CHECKS: dict[str, Callable[[Any], object]] = {
    **PARSERS,
    "trace": _trace,
    "queue": _queue,
    "qdisc": _choice(QDISCS),
    "distribution": _choice(DISTRIBUTIONS),
    "state": _choice(STATES),
}


def problems(params: dict[str, str | int | float]) -> list[tuple[str, str]]:
    """(key, what is wrong) for each value of one direction's shaping (and ``state``) that the schema would refuse."""
    found = []
    for key, value in params.items():
        check = CHECKS.get(key)
        if check is None:
            found.append((key, f"unknown key; one of {', '.join(CHECKS)}"))
            continue
        try:
            check(value)
        except ValueError as exc:
            found.append((key, str(exc)))
    qdisc, rate = params.get("qdisc"), params.get("rate")  # checked above: a word of QDISCS, a rate
    if not found and (
        wrong := tbf_problem(qdisc if isinstance(qdisc, str) else None, rate if not isinstance(rate, float) else None)
    ):
        found.append(("qdisc", wrong))
    if "gemodel" in params and "loss" in params:
        found.append(("gemodel", "gemodel is a loss model of its own: give loss or gemodel"))
    if "trace" in params and "rate" in params:
        found.append(("trace", "a trace sets the rate itself: give --trace or --rate"))
    return found


def tbf_problem(qdisc: str | None, rate: str | int | None) -> str | None:
    """What is wrong with a rate TBF cannot enforce (its rates stop at 34gbit), or None."""
    if qdisc == "tbf" and rate and parse_rate(rate) > TBF_MAX_BITS:
        return f"tbf takes rates up to 34gbit ({rate} given); use the default htb"
    return None

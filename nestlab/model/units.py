"""Rates written the way tc and containerlab users write them: ``100mbit``, ``10gbit``, ``1.5Gbps``."""

from __future__ import annotations

import re

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_rate(text: str | int) -> int:
    """Bits per second from ``"100mbit"`` (bits) or ``"12.5MBps"`` (bytes, capital B); raises ValueError."""
    if isinstance(text, int):
        return text
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"'{text}' is not a rate such as 100mbit, 10gbit or 1.5gbit")
    number, prefix, unit = match.groups()
    bits = float(number) * _SCALE[prefix.lower()] * (8 if unit and unit.endswith("Bps") else 1)
    if bits < 1000:
        raise ValueError(f"'{text}' is below 1kbit; write the unit, e.g. 100mbit")
    return int(bits)


_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*$")
_TIME_SCALE = {"us": 1, "ms": 1000, "s": 1_000_000}


def parse_time(text: str | int | float) -> int:
    """Microseconds from ``"20ms"``, ``"1.5s"``, ``"500us"``; raises ValueError."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        raise ValueError(f"'{text}' needs a unit: write e.g. {text}ms")
    match = _TIME.match(str(text))
    if not match:
        raise ValueError(f"'{text}' is not a time such as 20ms, 1.5s or 500us")
    return int(float(match.group(1)) * _TIME_SCALE[match.group(2)])


def parse_percent(text: str | int | float) -> float:
    """A percentage from ``"10%"`` or ``10``; must lie in 0..100; raises ValueError."""
    raw = str(text).strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"'{text}' is not a percentage such as 10% or 0.5%") from None
    if not 0 <= value <= 100:
        raise ValueError(f"'{text}' is outside 0..100%")
    return value


def parse_gemodel(text: str) -> tuple[float, float, float, float]:
    """Gilbert-Elliott loss as tc writes it, ``"P R [1-H [1-K]]"`` (percentages): P good->bad, R bad->good,
    1-H loss in the bad state (default 100%), 1-K loss in the good state (default 0%); raises ValueError."""
    words = str(text).split()
    if not 2 <= len(words) <= 4:
        raise ValueError(f"'{text}' is not 'P R [1-H [1-K]]', e.g. '5% 20%' (good->bad, bad->good) or '5% 20% 80% 1%'")
    shares = [parse_percent(w) for w in words] + [100.0, 0.0][len(words) - 2 :]
    return shares[0], shares[1], shares[2], shares[3]


def parse_size(text: str | int) -> int:
    """Bytes from ``"64kb"``, ``"1mb"``, ``1500``; raises ValueError."""
    if isinstance(text, int):
        return text
    match = re.match(r"^\s*(\d+)\s*(b|kb|k|mb|m|gb|g)?\s*$", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"'{text}' is not a size such as 1500, 64kb, 1mb or 1g")
    scale = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}[
        (match.group(2) or "").lower()
    ]
    return int(match.group(1)) * scale

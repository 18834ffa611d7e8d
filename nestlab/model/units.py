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

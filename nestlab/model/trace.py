"""Mahimahi delivery traces (``params: {trace: FILE}``): one line per delivery opportunity of one 1500-byte
packet, its time in ms from the start; the trace repeats once its last line has passed."""

from __future__ import annotations

PACKET_BITS = 1500 * 8
BIN_MS = 100  # the player changes the rate this often


def read(path: str) -> list[int]:
    """The trace's delivery times (ms); ValueError naming the line that is not one."""
    times: list[int] = []
    with open(path) as fh:
        for number, line in enumerate(fh, 1):
            text = line.strip()
            if not text:
                continue
            if not text.isdigit() or (times and int(text) < times[-1]):
                raise ValueError(f"line {number}: '{text[:20]}' is not a time in ms at or after the line before")
            times.append(int(text))
    if not times or times[-1] == 0:
        raise ValueError("it has no delivery time after 0 ms (a trace lasts until its last line)")
    return times


def bins(times: list[int]) -> list[int]:
    """Bits per second the trace delivers in each :data:`BIN_MS` slice of its period."""
    count = max(1, -(-times[-1] // BIN_MS))
    slots = [0] * count
    for t in times:
        slots[min(t // BIN_MS, count - 1)] += 1
    return [n * PACKET_BITS * 1000 // BIN_MS for n in slots]


def rates(times: list[int]) -> list[int]:
    """The rate a shaper is given in each slice: the slice's bits per second, and in a slice without
    opportunities one packet's worth.  HTB charges a packet's time at the class's rate: a packet let
    through as a fast slice ends, charged at a near-zero rate, would owe the shaper seconds, which no
    later rate change forgives; one packet per slice owes it one slice at most."""
    floor = PACKET_BITS * 1000 // BIN_MS
    return [max(floor, bits) for bits in bins(times)]


def average_bits(times: list[int]) -> int:
    """The trace's average rate in bits per second."""
    return len(times) * PACKET_BITS * 1000 // times[-1]

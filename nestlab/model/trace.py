"""Mahimahi delivery traces (``params: {trace: FILE}``): one line per delivery opportunity of one 1500-byte
packet, its time in ms from the start; the trace repeats with the period of its last line's time."""

from __future__ import annotations

from . import files

PACKET_BYTES = 1500
BIN_MS = 100  # the window :func:`peak_bps` slides
MAX_BYTES = 32 * 1024 * 1024  # a trace's file: about 4 million delivery times
MAX_BPS = 500_000_000  # the most a trace may deliver over any BIN_MS: one player (Python, one core) follows it


def read(path: str) -> list[int]:
    """The trace's delivery times (ms); ValueError naming the line that is not one."""
    times: list[int] = []
    try:
        text = files.read_text(path, MAX_BYTES)
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    for number, line in enumerate(text.splitlines(), 1):  # its lines never echoed: the file may be a secret's
        line = line.strip()
        if not line:
            continue
        if not line.isdigit() or (times and int(line) < times[-1]):
            raise ValueError(f"line {number} is not a time in ms at or after the line before")
        times.append(int(line))
    if not times or times[-1] == 0:
        raise ValueError("it has no delivery time after 0 ms (a trace lasts until its last line)")
    return times


def peak_bps(times: list[int]) -> int:
    """Bits per second the trace delivers in its busiest :data:`BIN_MS` window (any start, across its loop)."""
    period = times[-1]
    loops = 2 + BIN_MS // period
    seq = [t + k * period for k in range(loops) for t in times]
    most, first = 0, 0
    for last, t in enumerate(seq):
        while seq[first] <= t - BIN_MS:
            first += 1
        most = max(most, last - first + 1)
    return most * PACKET_BYTES * 8 * 1000 // BIN_MS


def check_rate(times: list[int]) -> None:
    """ValueError if the trace peaks above :data:`MAX_BPS` (its player could not follow it)."""
    if (peak := peak_bps(times)) > MAX_BPS:
        raise ValueError(
            f"it peaks at {peak / 1e6:,.0f} Mbit/s over {BIN_MS} ms, above the {MAX_BPS / 1e6:,.0f} Mbit/s a trace"
            " player can follow (docs/shaping.md, 'Links replayed from a delivery trace')"
        )

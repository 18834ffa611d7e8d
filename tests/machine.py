"""Same-moment references for timing and throughput tests: what the machine took away while they ran.

``stolen_since``: the share of CPU time the hypervisor gave to other guests (``steal`` in
/proc/stat).  A throughput test that fails while that share was high measured the neighbours,
not nestlab; conftest retries such a failure (``@pytest.mark.throughput``), never a failure on a
machine that had its CPUs.

``probe``: how long the machine kept one CPU from a waiting process.  The probe is pinned to one CPU at the real-time priority a schedule player takes, wakes every
millisecond, and records every gap longer than it asked for (a stolen vCPU, a kernel worker, an
interrupt storm).  A process pinned to the same CPU at the same moment can be late by that much
through no fault of its own; by more, it is its own fault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from contextlib import contextmanager

CPU = 0
STARVED = 0.05  # of all CPU time stolen: a failing throughput assertion is retried


class MachineStarved(AssertionError):
    """A throughput assertion failed while the hypervisor was taking the CPUs away."""


def cpu_times(cpu: int | None = None) -> tuple[int, int]:
    """(steal, total) jiffies so far, of all CPUs or of ``cpu``."""
    label = "cpu" if cpu is None else f"cpu{cpu}"
    with open("/proc/stat") as fh:
        line = next(line for line in fh if line.split()[0] == label)
    fields = [int(v) for v in line.split()[1:9]]
    return fields[7], sum(fields)


def stolen_since(before: tuple[int, int], cpu: int | None = None) -> float:
    """Share of CPU time stolen since ``before`` (a :func:`cpu_times` of the same ``cpu``)."""
    steal, total = cpu_times(cpu)
    return (steal - before[0]) / max(1, total - before[1])


PROBE = textwrap.dedent(
    """
    import json, os, select, sys, time
    os.sched_setaffinity(0, {%d})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
    except OSError:
        pass
    stalls, last = [], time.time()
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0.001)[0]:
        now = time.time()
        if now - last > 0.003:
            stalls.append((last, now))
        last = now
    print(json.dumps(stalls), flush=True)
    """
    % CPU
)


def pin() -> None:
    """``preexec_fn`` for the process under test: the probe's CPU."""
    os.sched_setaffinity(0, {CPU})


class Stalls:
    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []

    def longest_within(self, start: float, end: float) -> float:
        """The longest stall (seconds) that overlaps ``[start, end]``."""
        return max(self._overlaps(start, end), default=0.0)

    def beyond(self, start: float, end: float, grace: float) -> float:
        """Stall time (seconds) within ``[start, end]`` beyond ``grace`` per stall."""
        return sum(max(0.0, overlap - grace) for overlap in self._overlaps(start, end))

    def _overlaps(self, start: float, end: float) -> list[float]:
        return [min(b, end) - max(a, start) for a, b in self.spans if a < end and b > start]


@contextmanager
def probe():
    """Record the machine's stalls on :data:`CPU` while the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    result = Stalls()
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield result
    finally:
        out, _ = proc.communicate("stop\n", timeout=10)
        result.spans = [tuple(span) for span in json.loads(out)] if out.strip() else []

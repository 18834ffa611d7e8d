"""The output of several processes written to one stream as it comes, a thread reading each: how
``Site.forward`` relays one command run in several shares."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from typing import IO, Any


def interleave(
    procs: list[subprocess.Popen[bytes]],
    out: IO[bytes],
    count: int | None = None,
    by_line: bool = True,
    duration: float | None = None,
) -> int:
    """Write what ``procs`` print into ``out`` as it comes, whole lines at a time (at most ``count``, for at most
    ``duration`` seconds), or as it arrives with ``by_line`` false; then end those still running.  Returns the
    worst exit code (0 when this side ended them)."""
    lines: queue.Queue[bytes | None] = queue.Queue()

    def pump(proc: subprocess.Popen[bytes]) -> None:
        stream: Any = proc.stdout  # a buffered reader: whole lines, or what has arrived (read1)
        for piece in stream if by_line else iter(lambda: stream.read1(1 << 16), b""):
            lines.put(piece)
        lines.put(None)

    for proc in procs:
        threading.Thread(target=pump, args=(proc,), daemon=True).start()
    ended = seen = 0
    deadline = None if duration is None else time.monotonic() + duration
    cut = False
    try:
        while ended < len(procs) and (count is None or seen < count):
            try:
                line = lines.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                ended += 1
                continue
            out.write(line)
            out.flush()
            seen += 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                cut = True
                proc.terminate()
    codes = [proc.wait() for proc in procs]
    return 0 if cut else max(codes)

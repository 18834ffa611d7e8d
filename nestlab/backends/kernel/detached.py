"""How nestlab starts a helper that outlives the command starting it (an SSH gate, a node's ``cmd``, a trace player,
a port forwarder, an iperf3 server): one set of ``subprocess.Popen`` options for every way a process is started
(here, in a node, in a namespace).

It runs in a session of its own (a Ctrl-C or hang-up of the terminal that deployed does not reach it, and its
group is ended as one), with no standard input, its output to a log the caller opened (or nowhere), only the
descriptors it is handed (``pass_fds``), never the caller's others.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import IO, Any

from ...errors import LabError

Output = int | IO[Any] | None


def options(log: Output = None, stderr: Output = subprocess.STDOUT, pass_fds: tuple[int, ...] | list[int] = ()) -> dict[str, Any]:
    """``Popen`` keyword arguments for a detached helper: output to ``log`` (None: nowhere), its errors to ``stderr``
    (by default with its output), ``pass_fds`` kept open in it."""
    return {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL if log is None else log,
        "stderr": subprocess.DEVNULL if log is None and stderr == subprocess.STDOUT else stderr,
        "start_new_session": True,
        "close_fds": True,
        "pass_fds": tuple(pass_fds),
    }


def ready(proc: subprocess.Popen[Any], path: str, log: str, what: str, timeout: float) -> None:
    """Wait until the helper ``proc`` makes ``path`` (how it says it is ready); if it ends first or takes longer than
    ``timeout`` seconds it is killed and the error names ``what`` with the last line of its ``log``."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            with open(log, errors="replace") as fh:
                said = fh.read().strip().splitlines()
            raise LabError(f"{what} did not start: {said[-1] if said else 'no output'}")
        time.sleep(0.01)

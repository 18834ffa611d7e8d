"""The fidelity of a lab on servers or pods: each share samples itself, where its links and CPUs are.

Each share's own nestlab runs ``nestlab fidelity-sample`` (a ``Watch`` on its share, as on this machine),
started through the share's ``Remote`` as ``capture`` is; it says ``sampling`` once it samples, and on a
line on its standard input it stops and prints its verdict as one JSON line (merged in fidelity.py).
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sites.seam import Site

READY = "sampling"


class Shares:
    """Every share's sampler, started at once; :meth:`stop` ends them and returns each one's verdict (or why none)."""

    def __init__(self, site: Site, lab: str, period: float):
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.failed: dict[str, str] = {}
        for share, remote in site.shares().items():
            try:
                self.procs[share] = remote.popen(
                    remote.nestlab_cmd("fidelity-sample", "--lab", lab, "--period", str(period)),
                    stream=True,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            except OSError as exc:
                self.failed[share] = f"its sampler did not start: {exc}"
        for share, proc in self.procs.items():  # each has started meanwhile: waiting costs the slowest one's start
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != READY:
                self.failed[share] = "its sampler did not start"

    def stop(self) -> dict[str, dict[str, Any] | str]:
        """Each share's verdict (``Verdict.to_json``), or why it has none."""
        for share, proc in self.procs.items():
            if share not in self.failed:
                try:
                    assert proc.stdin is not None
                    proc.stdin.write("\n")
                    proc.stdin.flush()
                except OSError:
                    pass  # it ended: what it said is read below
        answers: dict[str, dict[str, Any] | str] = dict(self.failed)
        for share, proc in self.procs.items():
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            said = (err.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            found = None if share in self.failed else _verdict(out)
            answers[share] = found or f"{self.failed.get(share, 'its sampler gave no verdict')} ({said})"
        return answers


def _verdict(out: str) -> dict[str, Any] | None:
    """The verdict a sampler printed last (``Verdict.to_json``, as the share's JSON says it), if it printed one."""
    try:
        found = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("reasons"), list) else None

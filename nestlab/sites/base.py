"""What every site implements (``nestlab.sites.seam.Site``), and what finding and running things in a lab's
shares takes on every site (what the two remote sites alone share is in shares.py).

A site is made for one lab from its record (``lab/where.py``) or, for a deploy, empty; the lab layer
and the commands ask it where a node runs (:meth:`Site.remote`), how the lab looks
(:meth:`Site.inspect`) and to remove it (:meth:`Site.remove`).  For a node elsewhere, a command
runs the same ``nestlab`` command there (:meth:`Site.forward`) instead of testing where the lab is.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Any, ClassVar

from ..errors import LabError

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Step
    from ..seams import ExecReport, Progress, Remote
    from .seam import Deployed, Report


class Site:
    """A lab on one kind of place.  Subclasses set the class attributes and implement the hooks."""

    name: ClassVar[str] = ""  # the record's word
    summary: ClassVar[str] = ""  # one line for `nestlab modes` and docs/architecture.md
    here: ClassVar[bool] = False
    keys: ClassVar[dict[str, type]] = {}  # what the record must hold, and of which type

    def __init__(self, lab: str, data: dict[str, Any]):
        self.lab = lab
        self.data = data

    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Make the lab ``blueprint`` describes here (what runs already and is still wanted stays); ``progress``
        hears of each phase, ``on_exec`` of each ``exec:`` command a node ran."""
        raise NotImplementedError

    def check(self, blueprint: Blueprint, machine: bool = True) -> None:
        """Every check a deploy of ``blueprint`` here makes before it changes anything (``nestlab validate``);
        ``machine``: also whether this machine has what the lab needs (else only the file is checked)."""
        blueprint.plan

    def preview(self, blueprint: Blueprint) -> list[Step]:
        """What a deploy of ``blueprint`` would change, object by object (``deploy --dry-run``): against the
        plan recorded when it was deployed."""
        from ..lab import state
        from ..plan.diff import diff, steps
        from ..plan.objects import Plan

        current = state.read(blueprint.name)
        have = current.plan if current else Plan()
        return steps(diff(blueprint.plan, have), have)

    def remove(self, folder_too: bool = False) -> int:
        """Remove everything of the lab: at this site, then what is marked as its on this machine; returns how many
        namespaces went here.  ``folder_too``: also the lab directory beside its file (clab-LAB/)."""
        from ..lab import cleanup

        return cleanup.remove_here(self.lab, folder_too)

    def where(self) -> str:
        """Where the lab runs, for a person: "this machine", "servers s1, s2", ..."""
        return "this machine"

    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report:
        """The lab as it runs: each node (``only``: just those) with its interfaces and where it runs."""
        raise NotImplementedError

    def remote(self, ref: str) -> Remote | None:
        """Where ``ref`` (NODE, NODE/COMPONENT or NODE:IF) runs; None on this machine."""
        return None

    def shares(self) -> dict[str, Remote]:
        """Every share of the lab, by name (none for a lab on this machine)."""
        return {}

    def holders(self, refs: list[str]) -> dict[str, list[str]]:
        """The shares holding ``refs``, each with its refs in the order given."""
        by_share: dict[str, list[str]] = {}
        for ref in refs:
            remote = self.remote(ref)
            by_share.setdefault(remote.name if remote else "", []).append(ref)
        return by_share

    def forward(
        self,
        commands: dict[str, list[str]],
        out: IO[bytes],
        count: int | None = None,
        by_line: bool = True,
        duration: float | None = None,
    ) -> int:
        """Run ``nestlab ARGS`` in several shares (``commands``: share -> ARGS), their output merged into
        ``out`` as it comes, whole lines at a time (at most ``count``, for at most ``duration`` seconds),
        or as it arrives with ``by_line`` false (binary output of one share); returns the worst exit code
        (0 when this side ended them)."""
        shares = self.shares()
        lines: queue.Queue[bytes | None] = queue.Queue()
        procs = [
            shares[share].popen(shares[share].nestlab_cmd(*args), stream=True, stdout=subprocess.PIPE)
            for share, args in commands.items()
        ]

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

    def one_share(self, refs: list[str], what: str) -> str:
        """The one share holding every one of ``refs``; refused when they are spread over several."""
        by_share = self.holders(refs)
        if len(by_share) > 1:
            raise LabError(f"{', '.join(refs)} are on {', '.join(sorted(by_share))}: {what}")
        return next(iter(by_share))

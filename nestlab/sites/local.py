"""This machine: the lab's nodes are namespaces here, made by a deploy of the engine's (engine/deploy.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, ClassVar

from .. import names
from ..backends.kernel import files
from ..engine import capture as cap
from ..engine import cleanup, nodes, state, stop_start
from ..engine.inspect import report
from ..engine.stream import Stream, line_of
from ..engine.where import LOCAL
from ..errors import LabError
from ..model.units import parse_time
from ..registry import SITES
from .seam import Deployed, Done, Site
from .shares import refuse_pins

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Step
    from ..plan.objects import Plan
    from ..plugins import ExecReport, Progress, Remote
    from . import seam
    from .seam import Report, Say, Value


class Local(Site):
    """This machine: what only it has (its namespaces to remove, watch, capture on and change in place); a
    deploy here is the engine's (engine/deploy.py)."""

    name: ClassVar[str] = LOCAL
    summary: ClassVar[str] = "this machine: every node a namespace here"
    keys: ClassVar[dict[str, type]] = {}  # its record holds nothing
    rank: ClassVar[int] = 100  # asked last: it takes any lab no other site claims

    def __init__(self, lab: str, data: dict[str, Any], options: object = None):
        self.lab = lab
        self.data = data

    @classmethod
    def claims(cls, blueprint: Blueprint, options: object) -> bool:
        """Any lab: a lab runs here unless another site claims it."""
        return True

    def deploy(self, blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Create what is missing, remove what is no longer wanted; returns what was changed."""
        from ..engine import deploy  # the applier and the rest of a deploy load for a deploy alone

        refuse_pins(blueprint)
        made = deploy.deploy(blueprint, progress, on_exec)
        return Deployed(changes=made.changes, notes=made.notes, blueprint=made.blueprint)

    def check(self, blueprint: Blueprint, machine: bool = True) -> Blueprint:
        """Every check a deploy here makes; returns the blueprint as checked (handed out to this machine, planned)."""
        from ..engine import deploy  # the applier and the rest of a deploy load for a deploy alone

        refuse_pins(blueprint)
        return deploy.check(blueprint, machine)

    def preview(self, blueprint: Blueprint) -> list[Step]:
        """The diff a deploy would apply to the namespaces that exist, and the limits it would write in place."""
        from ..engine import deploy  # the applier and the rest of a deploy load for a deploy alone

        refuse_pins(blueprint)
        return deploy.preview(blueprint)

    def where(self) -> str:
        return "this machine"

    def remote(self, ref: str) -> None:
        """Every node of a lab here runs here."""
        return None

    def popen(self, plan: Plan, node: str, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``args`` inside ``node``'s namespaces here (``subprocess.Popen`` arguments)."""
        return nodes.popen(self.lab, plan, node, args, **kwargs)

    def shares(self) -> dict[str, Remote]:
        return {}

    def remove(self, folder_too: bool = False) -> int:
        """Remove everything marked as the lab's on this machine."""
        return cleanup.remove_here(self.lab, folder_too)

    def removal(self, count: int) -> str:
        return f"lab {self.lab}: removed {count} namespaces" if count else f"lab {self.lab}: nothing to remove"

    def states(self, blueprint: Blueprint) -> dict[str, str]:

        return {
            node: "stopped" if stop_start.is_stopped(self.lab, node) else "running"
            for node in blueprint.plan.nodes
            if os.path.exists(names.netns_path(self.lab, node))
        }

    def capture(
        self,
        ends: list[tuple[str, str]],
        into: str,
        bpf: str | None,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done:
        """A tap on each end (in its node's namespace, ``bpf`` applied in the kernel), written as one pcapng."""

        taps = []
        try:
            for node, iface in ends:
                taps.append(cap.open_tap(self.lab, node, iface, bpf))
        except BaseException:
            for tap in taps:
                tap.sock.close()
            raise
        tapped = ", ".join(t.ref for t in taps)
        say(f"capturing on {tapped}" + (f" ({bpf})" if bpf else "") + "; Ctrl-C stops")
        if into == "-":
            written = cap.capture(taps, sys.stdout.buffer, count=count, duration=duration)
        else:
            with files.created(into) as fh:  # through no link another user planted (docs/security.md)
                written = cap.capture(taps, fh, count=count, duration=duration)
        return Done(0, f"{written} packets from {tapped}" + ("" if into == "-" else f" in {into}"))

    def events(
        self,
        out: IO[bytes],
        fmt: str,
        since: str | None,
        follow: bool,
        count: int | None,
        duration: float | None,
        say: Say,
    ) -> Done:
        """The lab's event log from ``since`` ago, then what its namespaces and processes do as it happens."""

        current = state.read(self.lab)
        if not (current and current.status == "running"):
            raise LabError(f"lab {self.lab} is not running here; deploy it first")
        start = time.time()
        try:
            since_at = None if since is None else 0.0 if since == "0" else start - parse_time(since) / 1e6
        except ValueError as exc:
            raise LabError(f"--since: {exc}") from None
        stream = Stream(self.lab, since_at, None if duration is None else time.monotonic() + duration)
        if follow:
            say(f"streaming events of lab {self.lab} (Ctrl-C stops)")
        seen = 0
        try:
            events = stream.replay() if not follow else stream
            for event in events:
                if duration is not None and time.time() - start > duration:
                    break
                out.write(((json.dumps(event) if fmt == "json" else line_of(event)) + "\n").encode())
                out.flush()
                seen += 1
                if count is not None and seen >= count:
                    break
        except (KeyboardInterrupt, BrokenPipeError):
            pass
        finally:
            stream.close()
        return Done()

    def link_set(self, blueprint: Blueprint, a: str, b: str, params: dict[str, Value], direction: str, out: IO[bytes]) -> Done:
        """The change applied in place to the link's two ends (engine/link_changes.py), recorded and logged."""
        from ..engine.link_changes import LiveLink

        spent = LiveLink(blueprint, a, b).prepare(direction=direction, **params)(None)  # as LinkHandle.set
        return Done(0, f"link {a} {b}: {', '.join(f'{k}={v}' for k, v in params.items())} applied in {spent:.1f} ms")

    def power(
        self,
        blueprint: Blueprint,
        action: str,
        refs: list[str],
        exec_too: bool,
        out: IO[bytes],
        on_exec: ExecReport | None,
    ) -> Done:
        """The nodes' processes frozen or thawed and their links taken down or brought up (engine/stop_start.py)."""

        began = time.perf_counter()
        stopped = stop_start.stop(blueprint, refs) if action in ("stop", "restart") else []
        started = stop_start.start(blueprint, refs, on_exec, exec_too) if action in ("start", "restart") else []
        took = time.perf_counter() - began
        done = started if action != "stop" else stopped
        verb = {"stop": "stopped", "start": "started", "restart": "restarted"}[action]
        if done:
            return Done(0, f"lab {self.lab}: {verb} {_listed(done)} in {took:.2f} s")
        return Done(0, f"lab {self.lab}: {_listed(refs)} already {'stopped' if action == 'stop' else 'running'}; nothing to do")

    def inspect(self, blueprint: Blueprint, only: set[str] | None = None) -> Report:

        return report(blueprint, only)


def _listed(nodes: list[str], shown: int = 10) -> str:
    return ", ".join(nodes[:shown]) + (f" and {len(nodes) - shown} more" if len(nodes) > shown else "")


SITES.register(Local)
if TYPE_CHECKING:  # mypy holds the site to the seam

    def _is_a_site(site: Local) -> seam.Site:
        return site

"""This machine: the lab's nodes are namespaces here, made by the Applier from a diff of plans."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from typing import IO, TYPE_CHECKING

from .. import kinds, names
from ..backends.kernel import cgroups, files, probe, shaping
from ..backends.kernel.netlink import NetlinkError
from ..engine import capture as cap
from ..engine import cleanup, collector, machine_root, state, stop_start
from ..engine.inspect import report
from ..engine.stream import Stream, line_of
from ..engine.where import LOCAL
from ..errors import LabError
from ..model.units import parse_time
from ..plan.diff import Step, diff, steps
from ..plan.objects import Plan
from ..registry import KINDS, LINK_MODES, SITES
from .base import Site
from .seam import Deployed, Done
from .shares import refuse_pins

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Changes
    from ..plan.objects import NodeObj
    from ..seams import ExecReport, Progress
    from . import seam
    from .seam import Report, Say, Value


class Local(Site):
    name = LOCAL
    summary = "this machine: every node a namespace here"

    @collector.paused()
    def deploy(self, lab: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Deployed:
        """Create what is missing, remove what is no longer wanted; returns what was changed."""

        notes = machine_root.refused(lab)
        return Deployed(changes=self._deploy(lab, progress, on_exec), notes=notes)

    def _deploy(self, lab: Blueprint, progress: Progress | None, on_exec: ExecReport | None) -> Changes:
        from ..apply.applier import Applier
        from ..engine import startup

        refuse_pins(lab)
        lab.plan  # the plan's problems (a management network's subnet...) before the lab's folder and lock exist
        with state.locked(lab.name):
            current = state.read(lab.name)
            if current and current.status == "deploying":
                raise LabError(
                    f"an earlier deploy of lab '{lab.name}' (pid {current.pid}) stopped half-way; "
                    f"run `nestlab cleanup {lab.name}` and deploy again"
                )
            if current is None and cleanup.marked_namespaces(lab.name):
                raise LabError(f"lab '{lab.name}' has leftovers from a process that died; run `nestlab cleanup {lab.name}`")
            have = _existing(lab.name, current.plan) if current else Plan()
            changes = diff(lab.plan, have)
            if _retune(lab.name, lab.plan, have) and not changes:
                state.write(state.snapshot(lab, "running", lab.plan))
            if not changes:
                return changes
            try:
                _check_needs(changes)
            except LabError:
                if current is None:
                    cleanup.remove_here(lab.name)
                raise
            commit, drop = None, None
            try:  # the finished state is written first: a full disk stops the deploy before anything changes
                commit, drop = state.prepared(state.snapshot(lab, "running", lab.plan))
                state.write(state.snapshot(lab, "deploying", current.plan if current else Plan()))
            except OSError:
                if drop:
                    drop()
                if current is None:
                    cleanup.remove_here(lab.name)
                raise
            ahead = None
            if lab.topology.mgmt is not None:  # the lab directory's files and the keys while the nodes are made
                from ..engine import access

                ahead = access.Ahead(lab)
            try:
                Applier(lab.name, {**have.nodes, **lab.plan.nodes}, progress).apply(changes)
            except BaseException as exc:
                if ahead is not None:
                    with contextlib.suppress(Exception):
                        ahead.done()  # before cleanup removes the keys it makes
                drop()
                if current is None:
                    cleanup.remove_here(lab.name)
                else:
                    state.write(state.snapshot(lab, "running", _without(have, changes)))
                if isinstance(exc, NetlinkError):
                    raise LabError(
                        f"the kernel refused to {exc.strerror}{_HINTS.get(exc.errno or 0, '')}; "
                        f"{'nothing was left behind' if current is None else 'the lab is as it was'}"
                    ) from exc
                raise
            commit()
            if ahead is not None:
                try:
                    access.publish(lab, ahead)
                except BaseException as exc:
                    if current is None:  # a new lab nobody can reach is not made: as if apply had failed
                        cleanup.remove_here(lab.name)
                        if isinstance(exc, LabError):
                            raise LabError(f"{exc}; nothing was left behind") from exc
                    raise
        startup.run(lab, [node.name for node in changes.add_nodes if not KINDS.get(node.kind).machine], on_exec)
        return changes

    def check(self, lab: Blueprint, machine: bool = True) -> None:

        refuse_pins(lab)
        machine_root.refused(lab)
        changes = diff(lab.plan, Plan())
        if machine:
            _check_needs(changes)

    def preview(self, lab: Blueprint) -> list[Step]:
        """The diff a deploy would apply to the namespaces that exist, and the limits it would write in place."""

        refuse_pins(lab)
        machine_root.refused(lab)
        current = state.read(lab.name)
        have = _existing(lab.name, current.plan) if current else Plan()
        found = steps(diff(lab.plan, have), have)
        for new in lab.plan.nodes.values():
            old = have.nodes.get(new.name)
            if new.cgroup and old and old.resources != new.resources and new.name not in {s.name for s in found}:
                found.append(Step("node", new.name, "retune", f"limits {_limits(old)} -> {_limits(new)} (in place)"))
        return found

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

    def inspect(self, lab: Blueprint, only: set[str] | None = None) -> Report:

        return report(lab, only)


_HINTS = {
    errno.EXFULL: " (a Linux bridge takes at most 1024 ports: split it, e.g. a bridge per group of nodes joined to a core bridge)"
}


def _listed(nodes: list[str], shown: int = 10) -> str:
    return ", ".join(nodes[:shown]) + (f" and {len(nodes) - shown} more" if len(nodes) > shown else "")


def _limits(node: NodeObj) -> str:
    return ", ".join(f"{k}={v}" for k, v in node.resources) or "none"


def _retune(lab: str, plan: Plan, have: Plan) -> bool:
    """Write changed cgroup limits of running nodes in place (limits never recreate a node)."""

    changed = [
        (n, have.nodes[n.name])
        for n in plan.nodes.values()
        if n.cgroup and n.name in have.nodes and have.nodes[n.name].resources != n.resources
    ]
    for new, old in changed:
        lifted = {k: "none" for k in dict(old.resources) if k not in dict(new.resources)}
        cgroups.Tree(lab).set(new.name, {**lifted, **dict(new.resources)})
    return bool(changed)


def _check_needs(changes: Changes) -> None:
    """Fail before creating anything if the kernel or machine lacks a feature the change uses."""

    needs = {feature for x in changes.add_links + changes.add_attachments for feature in LINK_MODES.get(x.mode).needs(x)}
    shaped = [dict(x.shape_a + x.shape_b) for x in changes.add_links + changes.reshape]
    needs |= {"htb" for shape in shaped if shape}
    needs |= {"netem" for shape in shaped if set(shape) & set(shaping.NETEM_KEYS)}
    nat = any(br.nat or br.netfilter for n in changes.add_nodes for br in n.bridges)
    others = [problem for kind, nodes in kinds.grouped(changes.add_nodes) for problem in kind.missing(nodes)]
    if needs or nat or others:
        probe.check_needs(needs, nat, others)


def _existing(lab: str, plan: Plan) -> Plan:
    """The recorded plan minus nodes whose namespace vanished (and what depends on them)."""

    alive = {n for n in plan.nodes if os.path.exists(names.netns_path(lab, n))}
    return Plan(
        {n: o for n, o in plan.nodes.items() if n in alive},
        {k: x for k, x in plan.links.items() if x.deps <= alive},
        {k: x for k, x in plan.attachments.items() if x.deps <= alive},
    )


def _without(have: Plan, changes: Changes) -> Plan:
    gone_nodes = {n.name for n in changes.del_nodes}
    gone_links = {x.key for x in changes.del_links}
    gone_attachments = {x.key for x in changes.del_attachments}
    return Plan(
        {n: o for n, o in have.nodes.items() if n not in gone_nodes},
        {k: x for k, x in have.links.items() if k not in gone_links and not x.deps & gone_nodes},
        {k: x for k, x in have.attachments.items() if k not in gone_attachments and not x.deps & gone_nodes},
    )


SITES.register(Local)
if TYPE_CHECKING:  # mypy holds the site to the seam

    def _is_a_site(site: Local) -> seam.Site:
        return site

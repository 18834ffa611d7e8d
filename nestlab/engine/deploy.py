"""A deploy on this machine, as one transaction: a blueprint in, the namespaces, links and records it asks for out.

:func:`deploy` starts the helper that makes the lab's namespaces ahead (backends/kernel/spares.py) from what
the blueprint's file said, refuses what this machine cannot make (rootless mode), and then, holding the lab's lock,
diffs the plan against what runs, writes the finished record beside the current one, applies the diff
(apply/applier.py), publishes the nodes' names and logins and commits the record; whatever fails on the way
leaves nothing (a new lab) or the lab as it was.  The nodes' start-up runs last, outside the lock.
:func:`preview` and :func:`check` make the same checks and change nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from .. import kinds, names
from ..apply.applier import Applier
from ..backends.kernel import cgroups, probe, shaping, spares
from ..backends.kernel.netlink import NetlinkError
from ..errors import LabError
from ..model.glance import Glance, looked
from ..plan.diff import Step, diff, steps
from ..plan.objects import Plan
from ..registry import KINDS, LINK_MODES
from . import access, cleanup, gc_pause, machine_root, startup, state
from .handout import handed_out

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plan.diff import Changes
    from ..plan.objects import NodeObj
    from ..plugins import ExecReport, Progress
    from .state import LabState


class Made(NamedTuple):
    """What a deploy here did: what it changed, notes on what this machine left out (cgroup limits in rootless
    mode), and the blueprint as it was made (handed out to this machine and planned)."""

    changes: Changes
    notes: tuple[str, ...]
    blueprint: Blueprint


@gc_pause.paused()
def deploy(blueprint: Blueprint, progress: Progress | None = None, on_exec: ExecReport | None = None) -> Made:
    """Create what is missing, remove what is no longer wanted; returns what was made (:class:`Made`)."""
    made_ahead = wanted_of(_glanced(blueprint))
    if made_ahead.nodes:  # forked now: the namespaces are made while the lab is planned
        spares.start(lambda: made_ahead)
    try:
        blueprint, notes = _here(blueprint)
        changes = _made(blueprint, progress)
    finally:
        spares.stop()  # what was made ahead and not taken is freed
    startup.run(blueprint, [node.name for node in changes.add_nodes if not KINDS.get(node.kind).machine], on_exec)
    return Made(changes, notes, blueprint)


def _here(blueprint: Blueprint) -> tuple[Blueprint, tuple[str, ...]]:
    """The blueprint handed out to this machine (the one hand-out of a deploy, a dry run or a check), refused
    if it asks for what only the machine's root may make; with notes on what this machine leaves out."""
    blueprint = handed_out(blueprint)
    return blueprint, machine_root.refused(blueprint)


def _glanced(blueprint: Blueprint) -> Glance:
    """What the blueprint's file asked for as written (read once, by the load), under the lab's own name and
    within its nodes (a --name, a --node-filter)."""
    seen = looked(blueprint.located.data) if blueprint.located is not None else Glance()
    if not seen.name:
        return seen
    wanted = blueprint.document["topology"]["nodes"]
    return replace(
        seen,
        name=blueprint.name,
        nodes=[n for n in seen.nodes if n in wanted],
        bridges=[n for n in seen.bridges if n in wanted],
    )


def wanted_of(glanced: Glance) -> spares.Wanted:
    """What a deploy will make, from a glance at its file: nothing to reconcile a running lab."""
    if not glanced.name or os.path.isdir(names.lab_dir(glanced.name)):
        return spares.Wanted("", ())
    return spares.Wanted(
        names.alias(glanced.name),
        glanced.nodes,
        glanced.extra,
        glanced.bridges,
        tuple(glanced.bridge_sysctls.items()),
    )


def preview(blueprint: Blueprint) -> list[Step]:
    """The diff a deploy would apply to the namespaces that exist, and the limits it would write in place."""
    lab, _notes = _here(blueprint)
    current = state.read(lab.name)
    have = _existing(lab.name, current.plan) if current else Plan()
    found = steps(diff(lab.plan, have), have)
    for new in lab.plan.nodes.values():
        old = have.nodes.get(new.name)
        if new.cgroup and old and old.resources != new.resources and new.name not in {s.name for s in found}:
            found.append(Step("node", new.name, "retune", f"limits {_limits(old)} -> {_limits(new)} (in place)"))
    return found


def check(blueprint: Blueprint, machine: bool = True) -> Blueprint:
    """Every check a deploy makes before it changes anything; ``machine``: also what this machine must have.
    Returns the blueprint as checked (handed out to this machine, planned)."""
    lab, _notes = _here(blueprint)
    changes = diff(lab.plan, Plan())
    if machine:
        _check_needs(changes)
    return lab


def _made(blueprint: Blueprint, progress: Progress | None) -> Changes:
    """The transaction, under the lab's lock: what runs, the diff, the limits retuned in place, the diff applied."""
    blueprint.plan  # the plan's problems (a management network's subnet...) before the lab's folder and lock exist
    with state.locked(blueprint.name):
        current = _current(blueprint.name)
        have = _existing(blueprint.name, current.plan) if current else Plan()
        changes = diff(blueprint.plan, have)
        if _retune(blueprint.name, blueprint.plan, have) and not changes:
            state.write(state.snapshot(blueprint, "running", blueprint.plan))
        if changes:
            _applied(blueprint, current, have, changes, progress)
    return changes


def _current(lab: str) -> LabState | None:
    """The lab's record, refused when an earlier deploy stopped half-way or a dead process left namespaces."""
    current = state.read(lab)
    if current and current.status == "deploying":
        raise LabError(
            f"an earlier deploy of lab '{lab}' (pid {current.pid}) stopped half-way; run `nestlab cleanup {lab}` and deploy again"
        )
    if current is None and cleanup.marked_namespaces(lab):
        raise LabError(f"lab '{lab}' has leftovers from a process that died; run `nestlab cleanup {lab}`")
    return current


def _applied(blueprint: Blueprint, current: LabState | None, have: Plan, changes: Changes, progress: Progress | None) -> None:
    """Apply ``changes``, the finished record written first and committed once they are made and published."""
    with _undone_on_error(blueprint.name, current):
        _check_needs(changes)
        commit, drop = state.prepared(state.snapshot(blueprint, "running", blueprint.plan))  # a full disk stops it here
    with _undone_on_error(blueprint.name, current, drop):
        state.write(state.snapshot(blueprint, "deploying", current.plan if current else Plan()))
    preparing = (
        access.Preparing(blueprint) if blueprint.topology.mgmt is not None else None
    )  # files and keys while the nodes are made
    try:
        Applier(blueprint.name, {**have.nodes, **blueprint.plan.nodes}, progress).apply(changes)
    except BaseException as exc:
        if preparing is not None:
            with contextlib.suppress(Exception):
                preparing.done()  # before cleanup removes the keys it makes
        drop()
        _rolled_back(blueprint, current, _without(have, changes))
        if isinstance(exc, NetlinkError):
            kept = "nothing was left behind" if current is None else "the lab is as it was"
            raise LabError(f"the kernel refused to {exc.strerror}{_HINTS.get(exc.errno or 0, '')}; {kept}") from exc
        raise
    commit()
    if preparing is not None:
        _published(blueprint, preparing, current is None)


@contextlib.contextmanager
def _undone_on_error(lab: str, current: LabState | None, drop: Callable[[], None] | None = None) -> Iterator[None]:
    """On an error in the block: the prepared record dropped and a new lab's folder removed."""
    try:
        yield
    except BaseException:
        if drop:
            drop()
        if current is None:
            cleanup.remove_here(lab)
        raise


def _rolled_back(blueprint: Blueprint, current: LabState | None, kept: Plan) -> None:
    """After a failed apply (which undid what it made): a new lab removed, a running one recorded as it is."""
    if current is None:
        cleanup.remove_here(blueprint.name)
    else:
        state.write(state.snapshot(blueprint, "running", kept))


def _published(blueprint: Blueprint, preparing: access.Preparing, new: bool) -> None:
    """The nodes reachable by name and SSH; a new lab nobody can reach is not made (as if apply had failed)."""
    try:
        access.publish(blueprint, preparing)
    except BaseException as exc:
        if new:
            cleanup.remove_here(blueprint.name)
            if isinstance(exc, LabError):
                raise LabError(f"{exc}; nothing was left behind") from exc
        raise


_HINTS = {
    errno.EXFULL: " (a Linux bridge takes at most 1024 ports: split it, e.g. a bridge per group of nodes joined to a core bridge)"
}


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

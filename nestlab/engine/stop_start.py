"""Stop and start nodes of a lab running on this machine (containerlab's ``stop/start/restart --node``).

A stopped node keeps its namespaces, files, addresses and the routes it was given; its processes end
(its ``cmd``, daemons its kind started, whatever ran in it) and its interfaces go down, so its peers
see their carrier go.  What the kernel forgets with the interfaces down waits in the node's folder
(``stopped.json``), which also says that the node is stopped.  Starting brings the interfaces, those
addresses and routes, its kind's daemons (FRR reads its frr.conf again), its trace players, its
forwarded ports and its ``cmd`` back; its ``exec`` commands run again only when asked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import TYPE_CHECKING

from .. import kinds, names
from ..backends.kernel import downtime, files, namespaces
from ..errors import LabError
from ..plan.objects import NodeObj
from ..registry import KINDS, RUNTIMES
from . import events

if TYPE_CHECKING:
    from ..plan.blueprint import Blueprint
    from ..plugins import ExecReport


def _record(lab: str, node: str) -> str:
    return os.path.join(names.node_dir(lab, node), "stopped.json")


def is_stopped(lab: str, node: str) -> bool:
    return os.path.exists(_record(lab, node))


def chosen(blueprint: Blueprint, refs: list[str]) -> list[NodeObj]:
    """The nodes named, each followed by its components (a node stops and starts whole), in the order given."""
    plan = blueprint.plan.nodes
    picked: dict[str, NodeObj] = {}
    for ref in refs:
        obj = plan.get(ref)
        if obj is None or KINDS.get(obj.kind).machine:
            nodes = [n for n, o in plan.items() if not KINDS.get(o.kind).machine and not o.parent]
            what = "an emulated host, not a node" if obj else "not a node of it"
            raise LabError(
                f"lab {blueprint.name}: {ref} is {what} (nodes: {', '.join(nodes[:12])}{' ...' if len(nodes) > 12 else ''})"
            )
        picked[ref] = obj
        picked.update({n: o for n, o in plan.items() if n.startswith(ref + "/")})
    return list(picked.values())


def stop(blueprint: Blueprint, refs: list[str]) -> list[str]:
    """Stop the nodes named (and their components); returns those that were running."""
    started = time.perf_counter()
    nodes = [n for n in chosen(blueprint, refs) if not is_stopped(blueprint.name, n.name)]
    inodes = set()
    keep = set()
    for node in nodes:  # links first (peers see their carrier go at once), each recorded as it goes
        held = downtime.Held() if node.shares else downtime.take_down(names.netns_path(blueprint.name, node.name))
        files.make_dirs(names.node_dir(blueprint.name, node.name), 0o700)
        files.write(_record(blueprint.name, node.name), json.dumps(dataclasses.asdict(held)), 0o600, sync=False)
        inodes.add(namespaces.inode(names.uts_path(blueprint.name, node.name)))
        if not node.shares:  # one sharing its host's stack is told apart by its UTS namespace alone
            inodes.add(namespaces.inode(names.netns_path(blueprint.name, node.name)))
        keep |= RUNTIMES.get(node.runtime).holders(blueprint.name, node)  # a container's PID 1 stays
    namespaces.kill_inside({i for i in inodes if i}, keep=frozenset(keep))
    _log(blueprint.name, "stop", nodes, started)
    return [n.name for n in nodes]


def start(blueprint: Blueprint, refs: list[str], on_exec: ExecReport | None = None, exec_too: bool = False) -> list[str]:
    """Start the stopped nodes named (and their components); returns those that were stopped."""
    from ..apply.applier import Applier
    from ..backends.services import portfwd
    from ..model.stages import startup_of
    from .startup import run_exec, start_cmd

    started = time.perf_counter()
    nodes = [n for n in chosen(blueprint, refs) if is_stopped(blueprint.name, n.name)]
    for node in sorted(nodes, key=lambda n: n.name.count("/")):  # a node's stack before components sharing it
        with open(_record(blueprint.name, node.name)) as fh:
            held = downtime.Held(**json.load(fh))
        downtime.bring_up(names.netns_path(blueprint.name, node.name), held)
    applier = Applier(blueprint.name, blueprint.plan.nodes)
    try:
        for kind, members in kinds.grouped(nodes):
            kind.resumed(applier, members)
        starting = {n.name for n in nodes}
        applier.play_traces([x for x in blueprint.plan.links.values() if {x.a.node, x.b.node} & starting], starting)
    finally:
        applier.close()
    declared = blueprint.topology.topology.nodes
    for node in nodes:
        if node.ports:
            portfwd.start(
                names.netns_path(blueprint.name, node.name), names.uts_path(blueprint.name, node.name), node.name, node.ports
            )
        if node.name in declared and (cmd := startup_of(blueprint.topology, node.name).cmd):
            start_cmd(blueprint, node.name, cmd)
        if exec_too:
            run_exec(blueprint, node.name, on_exec)
        os.unlink(_record(blueprint.name, node.name))
    _log(blueprint.name, "start", nodes, started)
    return [n.name for n in nodes]


def _log(lab: str, action: str, nodes: list[NodeObj], started: float) -> None:
    if nodes:
        spent = (time.perf_counter() - started) * 1000
        events.record(lab, {"action": action, "nodes": [n.name for n in nodes]}, time.time(), spent)

"""A lab cut into shares, one per SSH server or pod, each deployed by the nestlab there: what the SSH
and Kubernetes sites have in common (placing and partitioning, a file error for a ``server:`` that cannot
be honoured, why a share's command failed, and one report merged from every share's ``inspect``)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine import state
from ..errors import LabError
from ..model.endpoint import Endpoint
from ..model.errors import TopologyError
from ..plan.partition import MGMT_STITCH, partition
from ..plan.placement import place

if TYPE_CHECKING:  # the schema and the partitioner load only for a lab that spans servers
    from ..model.schema.machines import ServerSpec
    from ..plan.blueprint import Blueprint
    from ..plan.partition import Partition
    from .seam import Report

NO_SERVERS = (
    "is named here, but this lab has no servers: add servers: to the file or pass --servers FILE "
    "(on Kubernetes, nestlab k8s deploy takes it as a node's name)"
)


def place_and_partition(
    blueprint: Blueprint, servers: dict[str, ServerSpec] | None = None, underlay: dict[str, str] | None = None
) -> Partition:
    """Where each node goes and what each server deploys (nothing is touched): on the lab's servers:, or
    on ``servers`` (name -> ServerSpec) whose tunnel addresses are ``underlay`` (e.g. placeholders)."""

    topo = blueprint.topology
    servers = servers or topo.servers
    if not servers:
        refuse_pins(blueprint)
    pins = {name: spec.server for name, spec in topo.topology.nodes.items() if spec.server}
    if not servers:
        raise LabError("this lab names no servers: add servers: to the file or pass --servers FILE")
    for server in pins.values():
        if server not in servers:
            pin_error(blueprint, server, f"is not one of the servers {', '.join(sorted(servers))}")
    placed = place(blueprint.plan, {name: spec.weight for name, spec in servers.items()}, pins)
    if underlay is None:
        underlay = {}
        for name, spec in servers.items():
            try:
                underlay[name] = str(ipaddress.IPv4Address(spec.underlay or spec.address))
            except ValueError:
                raise LabError(
                    f"server {name}: address {spec.address} is not an IPv4 address; give underlay: IP for its VXLAN tunnels"
                ) from None
    raw = topo.model_dump(mode="json", exclude_defaults=True)  # what the file says, groups and components applied
    return partition(raw, blueprint.plan, placed, underlay, topo.stitch.port, topo.stitch.vni, topo.stitch.mtu, topo.mgmt)


def running(blueprint: Blueprint) -> None:
    """Every share of ``lab`` runs: its record here says so, and for a lab with a management network the lab
    directory here lists every node (each share publishes its own nodes' names and SSH where it runs)."""
    state.write(state.snapshot(blueprint, "running", blueprint.plan))
    if blueprint.topology.mgmt is not None:  # lab/access loads only for a lab that needs it
        from ..engine import access

        access.inventories(blueprint)


def refuse_pins(blueprint: Blueprint) -> None:
    """A lab without servers whose file pins a node to one (``server:``): a file error at the first such node."""
    if pinned := next((spec.server for spec in blueprint.topology.topology.nodes.values() if spec.server), None):
        pin_error(blueprint, pinned, NO_SERVERS)


def pin_error(blueprint: Blueprint, server: str, message: str) -> None:
    """A ``server:`` that cannot be honoured: a file error at the first node pinned there (exit 2, file:line:col)."""

    node = next(n for n, spec in blueprint.topology.topology.nodes.items() if spec.server == server)
    raise TopologyError(
        blueprint.source, [blueprint.problem(("topology", "nodes", node, "server"), f"server '{server}' {message}")]
    )


def cause(answer: subprocess.CompletedProcess[str] | BaseException) -> str | None:
    """Why a share's command failed (its last error lines, or the exception), or None if it did not."""
    if isinstance(answer, BaseException):
        return f"{type(answer).__name__}: {answer}"
    if answer.returncode == 0:
        return None
    lines = [ln for ln in (answer.stderr or "").splitlines() if ln.strip() and not ln.startswith("note ")]
    if answer.returncode == 255:
        return "SSH failed: " + (lines[-1] if lines else "no answer")
    return " / ".join(lines[-3:]) or f"exit {answer.returncode}"


def holder(placement: dict[str, str], lab: str, ref: str) -> str:
    """The share holding ``ref`` (a node, component or NODE:IF) of a lab placed as ``placement`` says."""
    end = Endpoint(ref)
    held = placement.get(end.top)
    if held is None:
        raise LabError(f"lab {lab} has no node '{end.node}'")
    return held


def merged(
    lab: str,
    answers: dict[str, subprocess.CompletedProcess[str] | BaseException],
    label: dict[str, str],
    extra: Callable[[str, str], dict[str, Any]],
    only: set[str] | None = None,
) -> Report:
    """One ``inspect`` report from every share's (``answers``: share -> its command's answer): each interface
    with ``label[share]`` as its server, each node with ``extra(share, node)``; a switch copied onto several
    shares is one node with every share's ports.  ``only``: just those nodes."""

    by_name: dict[str, dict[str, Any]] = {}
    for share, answer in sorted(answers.items()):
        if why := cause(answer):
            raise LabError(f"{label[share]}: {why}")
        assert isinstance(answer, subprocess.CompletedProcess)
        for node in json.loads(answer.stdout)["nodes"]:
            if node["name"] == MGMT_STITCH:  # the servers' management bridges' joint, not the lab's
                continue
            interfaces = [{**i, "server": label[share]} for i in node["interfaces"]]
            if node["name"] in by_name:
                by_name[node["name"]]["interfaces"] += [i for i in interfaces if i["name"] != node["name"]]
            else:
                by_name[node["name"]] = {**node, "interfaces": interfaces, **extra(share, node["name"])}
    current = state.read(lab)
    nodes = [n for n in by_name.values() if only is None or n["name"] in only]
    return {"lab": lab, "source": current.source if current else None, "nodes": nodes}

"""What containerlab's commands share here: the app, its common options, and finding the lab they name."""

from __future__ import annotations

from pathlib import Path

import typer

from ...engine import state
from ...errors import LabError
from ...lab.lab import Lab
from ...model.labname import name_of
from ...observe.clab_view import container_name
from ...registry import KINDS

clab_app = typer.Typer(
    help="containerlab's commands and flags (deploy, redeploy, destroy, inspect, exec, save, graph, stop, start, "
    "restart, events, tools, version), for tools that drive containerlab.  Global flags (-t, --name, --vars, -r, -d, "
    "--log-level, --timeout) go anywhere on the line, and CLAB_* variables stand for flags (CLAB_TOPO, CLAB_DEPLOY_RECONFIGURE).",
    no_args_is_help=True,
    add_completion=False,
)

COMPATIBLE = "0.79.0"  # the containerlab release whose commands and JSON this follows
TopoOpt = typer.Option(None, "-t", "--topo", help="Topology file, a folder holding one *.clab.yml, - (standard input) or a URL.")
NameOpt = typer.Option(None, "--name", help="Lab name (instead of -t).")
NodeFilterOpt = typer.Option([], "--node-filter", help="Only these nodes (repeatable or comma-separated).")
VarsOpt = typer.Option([], "--vars", help="Variables for a Go-template topology.")
Ignored = dict(hidden=True, help="accepted for containerlab's sake; nestlab has no use for it")


def lab_name(topo: Path | None, name: str | None) -> str:
    """The lab a command names: --name, else the file's name: (nothing else of it is read), else the one running."""

    if name:
        return name
    if topo:
        return name_of(topo)

    running = state.labs()
    if len(running) == 1:
        return running[0]
    raise LabError(
        "provide a topology file (-t) or a lab name (--name)" + (f"; running labs: {', '.join(running)}" if running else "")
    )


def node_names(lab: str, given: list[str]) -> list[str]:
    """The nodes given (short or long names, ``clab-LAB-NODE``), or every node of the lab when none is."""

    running = Lab.running(lab)
    nodes = [n for n, o in running.plan.nodes.items() if not o.parent and not KINDS.get(o.kind).machine]
    if not given:
        return nodes
    longs = {container_name(running.document(), n): n for n in running.plan.nodes}
    return [longs.get(n, n) for n in given]

"""containerlab's deploy, redeploy, destroy, stop/start/restart, save, exec, graph and version."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from ... import __version__, sites
from ...engine import state
from ...errors import LabError
from ...lab.lab import Lab
from ...lab.node import Node
from ...model.overrides import Overrides
from ...observe.clab_view import container_name, labels
from ...registry import KINDS
from ..common import err, ignored, out, reported, split_list
from ..lifecycle import DeployRequest, deploy_with
from ..live import power
from ..observe import graph as nestlab_graph
from .base import COMPATIBLE, Ignored, NameOpt, NodeFilterOpt, TopoOpt, VarsOpt, clab_app, lab_name, node_names


def _deploy_flags(owner: str, export_template: str, skip_acl: bool, workers: int, skip_post: bool, graph: bool = False) -> None:
    for given, flag, why in (
        (owner, "--owner", "the lab directory's files belong to whoever owns the folder it is in"),
        (export_template, "--export-template", "topology-data.json is written in containerlab's default form"),
        (skip_acl, "--skip-labdir-acl", "the lab directory gets no extra ACLs here"),
        (workers, "--max-workers", "nestlab makes every node in one process, in batches"),
        (skip_post, "--skip-post-deploy", "nestlab kinds have no post-deploy step"),
        (graph, "--graph", "draw it with `containerlab graph`"),
    ):
        if given:
            ignored(flag, why)


# deploy's and redeploy's options (containerlab's), written once.
ClabTopoOpt = typer.Option(..., "-t", "--topo", help="Topology file, a folder holding one, - or a URL.")
ExportTemplateOpt = typer.Option("", "--export-template", **Ignored)
SkipAclOpt = typer.Option(False, "--skip-labdir-acl", **Ignored)
WorkersOpt = typer.Option(0, "--max-workers", **Ignored)
SkipPostOpt = typer.Option(False, "--skip-post-deploy", **Ignored)
GraphOpt = typer.Option(False, "-g", "--graph", **Ignored)
NetworkOpt = typer.Option(None, "--network", help="Management network name.")
Ipv4SubnetOpt = typer.Option(None, "--ipv4-subnet", help="Management IPv4 subnet.")
Ipv6SubnetOpt = typer.Option(None, "--ipv6-subnet", help="Management IPv6 subnet.")


def _teardown_flags(graceful: bool, keep_mgmt: bool) -> None:
    if graceful:
        ignored("--graceful", "nodes are namespaces: destroy ends their processes with SIGTERM first anyway")
    if keep_mgmt:
        ignored("--keep-mgmt-net", "the management bridge is removed with the last lab using it")


@clab_app.command()
def deploy(
    topo: Path = ClabTopoOpt,
    name: str | None = typer.Option(None, "--name", help="Deploy under this lab name instead of the file's."),
    reconfigure: bool = typer.Option(False, "-c", "--reconfigure", help="Destroy the lab first, then deploy it again."),
    vars_files: list[Path] = VarsOpt,
    node_filter: list[str] = NodeFilterOpt,
    owner: str = typer.Option("", "--owner", **Ignored),
    export_template: str = ExportTemplateOpt,
    skip_acl: bool = SkipAclOpt,
    workers: int = WorkersOpt,
    skip_post: bool = SkipPostOpt,
    graph: bool = GraphOpt,
    network: str | None = NetworkOpt,
    ipv4_subnet: str | None = Ipv4SubnetOpt,
    ipv6_subnet: str | None = Ipv6SubnetOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would change; change nothing."),
):
    """Deploy a lab (containerlab deploy), then print its containers as containerlab's table does."""
    _deploy_flags(owner, export_template, skip_acl, workers, skip_post, graph)
    deploy_topology(topo, name, reconfigure, vars_files, split_list(node_filter), (network, ipv4_subnet, ipv6_subnet), dry_run)


def deploy_topology(
    topo: Path,
    name: str | None,
    reconfigure: bool,
    vars_files: list[Path],
    nodes: list[str],
    mgmt: tuple[str | None, str | None, str | None],
    dry_run: bool = False,
) -> None:

    overrides = Overrides(name, frozenset(nodes), *mgmt)
    deploy_with(DeployRequest(topo, overrides, tuple(vars_files), reconfigure=reconfigure, dry_run=dry_run))


@clab_app.command()
def redeploy(
    topo: Path = ClabTopoOpt,
    name: str | None = typer.Option(None, "--name", help="Lab name instead of the file's."),
    folder_too: bool = typer.Option(False, "-c", "--cleanup", help="Also remove the lab directory clab-LAB/ first."),
    vars_files: list[Path] = VarsOpt,
    graceful: bool = typer.Option(False, "--graceful", **Ignored),
    keep_mgmt: bool = typer.Option(False, "--keep-mgmt-net", **Ignored),
    graph: bool = GraphOpt,
    workers: int = WorkersOpt,
    skip_post: bool = SkipPostOpt,
    export_template: str = ExportTemplateOpt,
    skip_acl: bool = SkipAclOpt,
    network: str | None = NetworkOpt,
    ipv4_subnet: str | None = Ipv4SubnetOpt,
    ipv6_subnet: str | None = Ipv6SubnetOpt,
):
    """Destroy the lab, then deploy it again from its file (containerlab redeploy)."""

    _deploy_flags("", export_template, skip_acl, workers, skip_post, graph)
    _teardown_flags(graceful, keep_mgmt)
    with reported():
        lab = lab_name(topo, name)
        with state.locked(lab):
            sites.remove(lab, folder_too)
    deploy_topology(topo, name, False, vars_files, [], (network, ipv4_subnet, ipv6_subnet))


@clab_app.command()
def destroy(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    every: bool = typer.Option(False, "-a", "--all", help="Destroy every lab."),
    folder_too: bool = typer.Option(False, "-c", "--cleanup", help="Also remove the lab directory clab-LAB/ beside the file."),
    node_filter: list[str] = NodeFilterOpt,
    graceful: bool = typer.Option(False, "--graceful", **Ignored),
    keep_mgmt: bool = typer.Option(False, "--keep-mgmt-net", **Ignored),
    _yes: bool = typer.Option(False, "-y", "--yes", help="Accepted: nestlab never asks before destroying (--all included)."),
):
    """Destroy a lab, or every lab with --all (containerlab destroy); --node-filter removes only those nodes."""

    _teardown_flags(graceful, keep_mgmt)
    with reported():
        targets = state.labs() if every else [lab_name(topo, name)]
        if node_filter:
            if every:
                raise LabError("--node-filter names nodes of one lab: give -t or --name, not --all")

            gone = split_list(node_filter)
            changes = Lab.running(targets[0]).without(gone)
            err.line(f"lab {targets[0]}: removed {', '.join(gone)} ({changes.summary()})")
            return
        for lab in targets:
            with state.locked(lab):
                sites.remove(lab, folder_too)
            err.line(f"lab {lab}: destroyed")


NodeOpt = typer.Option([], "-n", "--node", help="Node(s), repeatable or comma-separated; all nodes when omitted.")


@clab_app.command()
def stop(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Stop nodes of a deployed lab (containerlab stop): processes end, links go down, the rest is kept."""
    _power("stop", topo, name, nodes)


@clab_app.command()
def start(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Start stopped nodes of a deployed lab (containerlab start)."""
    _power("start", topo, name, nodes)


@clab_app.command()
def restart(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Stop and start nodes of a deployed lab (containerlab restart)."""
    _power("restart", topo, name, nodes)


def _power(action: str, topo: Path | None, name: str | None, nodes: list[str]) -> None:

    with reported():
        lab = lab_name(topo, name)
        picked = node_names(lab, split_list(nodes))
    power(action, picked, None, lab)


@clab_app.command()
def save(topo: Path | None = TopoOpt, name: str | None = NameOpt, node_filter: list[str] = NodeFilterOpt):
    """Save each router's running configuration (containerlab save); nodes without one have nothing to save."""

    with reported():
        lab = Lab.running(lab_name(topo, name))
        only = set(node_names(lab.name, split_list(node_filter))) if node_filter else None
        written = lab.save(None, only)
        for node, path in written.items():
            err.line(f"{node}: saved to {path}")
        if not written:
            err.line(f"lab {lab.name}: no router among {'those nodes' if only else 'its nodes'}: nothing to save")


@clab_app.command("exec")
def exec_cmd(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    cmds: list[str] = typer.Option([], "--cmd", help="Command to run (repeat for several)."),
    label: list[str] = typer.Option(
        [], "--label", help="KEY=VALUE: only the containers with that label (repeat, or comma-separate: all must match)."
    ),
    fmt: str = typer.Option("plain", "-f", "--format", help="plain or json ({container: [{cmd, return-code, stdout, stderr}]})."),
):
    """Run commands in the lab's containers (containerlab exec); every container, or those --label selects."""

    with reported():
        if not cmds:
            raise LabError("provide command to execute (--cmd)")
        if fmt not in ("plain", "json"):
            raise LabError(f"--format must be json or plain, not '{fmt}'")
        argvs = []
        for cmd in cmds:
            try:
                argvs.append(shlex.split(cmd))
            except ValueError as exc:
                raise LabError(f"--cmd {cmd!r}: {exc} (quote the command as a shell would)") from None
        wanted = dict(pair.partition("=")[::2] for pair in split_list(label))
        lab = Lab.running(lab_name(topo, name))
        results: dict[str, list[dict]] = {}
        for node, obj in lab.plan.nodes.items():
            have = labels(lab.document(), lab.name, node, obj.kind, lab.source)
            if KINDS.get(obj.kind).switch or any(have.get(k) != v for k, v in wanted.items()):
                continue
            for argv in argvs:
                done = Node(lab, node).popen(argv, stdout=-1, stderr=-1, text=True)
                stdout, stderr = done.communicate()
                results.setdefault(container_name(lab.document(), node), []).append(
                    {"cmd": argv, "return-code": done.returncode, "stdout": _maybe_json(stdout), "stderr": stderr}
                )
        if fmt == "json":
            out.line(json.dumps(results, indent=2))
            return
        for cname, runs in sorted(results.items()):
            for run in runs:
                err.line(f"Executed command node={cname} command={shlex.join(run['cmd'])} return-code={run['return-code']}")
                text = run["stdout"] if isinstance(run["stdout"], str) else json.dumps(run["stdout"])
                sys.stdout.write(text + run["stderr"])
        sys.stdout.flush()


def _maybe_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


@clab_app.command()
def graph(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    mermaid: bool = typer.Option(False, "--mermaid", help="Write the lab as a Mermaid flowchart."),
    drawio: bool = typer.Option(False, "--drawio", help="Write the lab as a draw.io diagram."),
    dot: bool = typer.Option(False, "--dot", help="Write the lab as Graphviz dot."),
    drawio_args: str = typer.Option("", "--drawio-args", **Ignored),
    offline: bool = typer.Option(False, "--offline", **Ignored),
):
    """Draw the lab (containerlab graph): --mermaid, --drawio or --dot write TOPO.clab.EXT beside the file;
    without one, the live page is served (nestlab graph --serve)."""

    if drawio_args:
        ignored("--drawio-args", "nestlab draws the diagram itself, in one layout")
    if offline:
        ignored("--offline", "the live page's scripts are nestlab's own copies, served with it: it never loads from the network")
    fmt = "mermaid" if mermaid else "drawio" if drawio else "dot" if dot else None
    if fmt is None:
        nestlab_graph(topo=topo, lab=name, fmt="json", serve=True, host="127.0.0.1", port=50080, output=None)
        return
    where = Path(str(topo).rsplit(".", 1)[0] + {"mermaid": ".mermaid", "drawio": ".drawio", "dot": ".dot"}[fmt]) if topo else None
    nestlab_graph(topo=topo, lab=name, fmt=fmt, serve=False, host="127.0.0.1", port=50080, output=where)


version_app = typer.Typer(invoke_without_command=True, help="The version, in containerlab's form.")
clab_app.add_typer(version_app, name="version")


@version_app.callback()
def version(ctx: typer.Context):
    """The version, in containerlab's form (tools compare it against the containerlab they need)."""

    if ctx.invoked_subcommand is None:
        out.line(
            f"  version: {COMPATIBLE}\n   commit: nestlab-{__version__}\n     date: -\n"
            "   source: nestlab (containerlab-compatible commands)"
        )


@version_app.command("check")
def version_check():
    """Whether a newer version exists: nestlab checks nothing on the network, and says so."""
    out.line(f"version check: nestlab answers as containerlab {COMPATIBLE} and never asks the network for a newer one")


@version_app.command("upgrade")
def version_upgrade():
    """containerlab's self-upgrade: refused (nestlab is upgraded as a Python package)."""
    with reported():
        raise LabError("nestlab is upgraded as a Python package (pip install -U nestlab / git pull && make), not by this command")

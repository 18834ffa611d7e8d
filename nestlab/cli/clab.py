"""``nestlab clab ...``: containerlab's own commands, flags and output formats, for the tools that drive
the ``containerlab`` command (docs/compat.md).  ``nestlab compat install-cli`` installs it as
``containerlab``.

Containers are named as containerlab names them (``clab-LAB-NODE``); a node's labels are its own
plus containerlab's (``containerlab``, ``clab-node-name``, ``clab-node-kind``, ``clab-node-group``,
``clab-topo-file``), which ``exec --label`` filters on.  Flags that only tune containerlab's
container engine (``--runtime``, ``--max-workers``, ``--graceful``, ...) are accepted and change nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from .. import names
from ..errors import LabError
from ..registry import KINDS
from .common import err, out, reported

clab_app = typer.Typer(
    help="containerlab's commands and flags (deploy, destroy, inspect, exec, save, graph, version), "
    "for tools that drive containerlab.",
    no_args_is_help=True,
)
compat_app = typer.Typer(help="Compatibility with other tools' commands.", no_args_is_help=True)

COMPATIBLE = "0.79.0"  # the containerlab release whose commands and JSON this follows
TopoOpt = typer.Option(None, "-t", "--topo", help="Topology file.")
NameOpt = typer.Option(None, "--name", help="Lab name (instead of -t).")
Ignored = dict(hidden=True, help="accepted for containerlab's sake; nestlab has no use for it")


def _lab_name(topo: Path | None, name: str | None) -> str:
    from ..model.labname import name_of

    if name:
        return name
    if topo:
        return name_of(topo)
    from ..lab import state

    running = state.labs()
    if len(running) == 1:
        return running[0]
    raise LabError(
        "provide a topology file (-t) or a lab name (--name)" + (f"; running labs: {', '.join(running)}" if running else "")
    )


def containers(name: str) -> list[dict]:
    """The lab's nodes as containerlab's ``inspect --format json`` lists its containers."""
    from ..lab.lab import Lab

    lab = Lab.running(name)
    raw = lab.document()
    nodes = raw["topology"]["nodes"]
    source = lab.source if os.path.exists(lab.source) else ""
    relative = os.path.relpath(source) if source else ""
    images = _images_in(source)
    mgmt = {a.end.node: a.end for a in lab.plan.attachments.values() if a.mode == "mgmt"}
    states = _states(lab)
    listed = []
    for node, obj in lab.plan.nodes.items():
        spec = nodes.get(node.split("/", 1)[0], {})
        path = names.netns_path(name, node)
        ident = f"{os.stat(path).st_ino:012x}" if os.path.exists(path) else ""
        up = states.get(node) == "running"
        listed.append(
            {
                "lab_name": name,
                "labPath": relative,
                "absLabPath": os.path.abspath(source) if source else "",
                "name": container_name(raw, node),
                "container_id": ident[:12],
                "image": obj.image or images.get(node) or "",
                "kind": names.clab_kind(obj.kind),
                "group": spec.get("group") or "",
                "state": "running" if up else "exited",
                "status": "Up" if up else "Exited",
                "ipv4_address": mgmt[node].ipv4[0] if node in mgmt else "N/A",
                "ipv6_address": mgmt[node].ipv6[0] if node in mgmt else "N/A",
                "owner": "root",
                "labels": labels(raw, name, node, obj.kind, source),
            }
        )
    return sorted(listed, key=lambda c: c["name"])


def _states(lab) -> dict[str, str]:
    """Each node's state (running, stopped, missing): asked of the shares for a lab elsewhere."""
    from ..lab import stop_start, where

    site = where.of(lab.name)
    if not site.here:
        return {n["name"]: n["state"] for n in site.inspect(lab)["nodes"]}
    return {
        node: "stopped" if stop_start.is_stopped(lab.name, node) else "running"
        for node in lab.plan.nodes
        if os.path.exists(names.netns_path(lab.name, node))
    }


def _images_in(source: str) -> dict[str, str]:
    """Each node's image as the file names it (node, else its group, kind or the defaults), though nestlab runs
    a linux node as namespaces: tools that read inspect expect it."""
    import yaml

    try:
        with open(source) as fh:
            topology = (yaml.safe_load(fh) or {}).get("topology") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    groups, kinds, defaults = topology.get("groups") or {}, topology.get("kinds") or {}, topology.get("defaults") or {}
    found = {}
    for node, spec in (topology.get("nodes") or {}).items():
        spec = spec or {}
        group = groups.get(spec.get("group") or defaults.get("group")) or {}
        kind = kinds.get(spec.get("kind") or group.get("kind") or defaults.get("kind")) or {}
        image = spec.get("image") or group.get("image") or kind.get("image") or defaults.get("image")
        if image:
            found[node] = str(image)
    return found


def container_name(raw: dict, node: str) -> str:
    return names.long_name(raw.get("prefix"), raw["name"], node)


def labels(raw: dict, lab: str, node: str, kind: str, source: str) -> dict[str, str]:
    spec = raw["topology"]["nodes"].get(node.split("/", 1)[0], {})
    own = {k: str(v) for k, v in (spec.get("labels") or {}).items()}
    return {
        **own,
        "containerlab": lab,
        "clab-node-name": node,
        "clab-node-kind": names.clab_kind(kind),
        "clab-node-group": spec.get("group") or "",
        "clab-topo-file": os.path.abspath(source) if source else "",
    }


@clab_app.command()
def deploy(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file."),
    reconfigure: bool = typer.Option(False, "-c", "--reconfigure", help="Destroy the lab first, then deploy it again."),
    vars_files: list[Path] = typer.Option([], "--vars", help="Variables for a Go-template topology."),
    _workers: int = typer.Option(0, "--max-workers", **Ignored),
    _skip: bool = typer.Option(False, "--skip-post-deploy", **Ignored),
    _runtime: str = typer.Option("", "-r", "--runtime", **Ignored),
    _debug: int = typer.Option(0, "-d", "--debug", count=True, **Ignored),
):
    """Deploy a lab (containerlab deploy), then print its containers as containerlab's table does."""
    from .lifecycle import deploy as nestlab_deploy

    nestlab_deploy(
        topo=topo, reconfigure=reconfigure, fmt="summary", table=False, vars_files=vars_files, servers=None, dry_run=False
    )


@clab_app.command()
def destroy(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    every: bool = typer.Option(False, "-a", "--all", help="Destroy every lab."),
    folder_too: bool = typer.Option(False, "-c", "--cleanup", help="Also remove the lab directory clab-LAB/ beside the file."),
    _graceful: bool = typer.Option(False, "--graceful", **Ignored),
    _keep: bool = typer.Option(False, "--keep-mgmt-net", **Ignored),
    _yes: bool = typer.Option(False, "-y", "--yes", help="Accepted: nestlab never asks before destroying (--all included)."),
    _debug: int = typer.Option(0, "-d", "--debug", count=True, **Ignored),
):
    """Destroy a lab, or every lab with --all (containerlab destroy)."""
    from ..lab import cleanup, state

    with reported():
        targets = state.labs() if every else [_lab_name(topo, name)]
        for lab in targets:
            with state.locked(lab):
                cleanup.remove_lab(lab, folder_too)
            err.line(f"lab {lab}: destroyed")


@clab_app.command()
def inspect(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    every: bool = typer.Option(False, "-a", "--all", help="Every lab."),
    fmt: str = typer.Option("table", "-f", "--format", help="table, json or csv."),
    _details: bool = typer.Option(False, "--details", **Ignored),
):
    """The lab's containers, as containerlab's inspect prints them (json: {lab: [container, ...]})."""
    from ..lab import state

    with reported():
        labs = state.labs() if every else [_lab_name(topo, name)]
        grouped = {lab: containers(lab) for lab in sorted(labs)}
        if fmt == "json":
            out.line(
                json.dumps(
                    {lab: [{k: v for k, v in c.items() if k != "labels"} for c in found] for lab, found in grouped.items()},
                    indent=2,
                )
            )
            return
        if fmt not in ("table", "csv"):
            raise LabError(f"--format must be table, json or csv, not '{fmt}'")
        rows = [
            (c["lab_name"], c["name"], c["kind"], c["image"], c["state"], c["ipv4_address"])
            for found in grouped.values()
            for c in found
        ]
        if fmt == "csv":
            out.line("\n".join(",".join(r) for r in [("lab_name", "name", "kind", "image", "state", "ipv4_address"), *rows]))
            return
        from rich.table import Table

        table = Table("Lab Name", "Name", "Kind/Image", "State", "IPv4/6 Address")
        for lab, cname, kind, image, st, ip in rows:
            table.add_row(lab, cname, f"{kind}\n{image}" if image else kind, st, ip)
        out.print(table)


NodeOpt = typer.Option([], "-n", "--node", help="Node(s), repeatable or comma-separated; all nodes when omitted.")


@clab_app.command()
def stop(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Stop nodes of a deployed lab (containerlab stop): processes end, links go down, the rest is kept."""
    _lifecycle("stop", topo, name, nodes)


@clab_app.command()
def start(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Start stopped nodes of a deployed lab (containerlab start)."""
    _lifecycle("start", topo, name, nodes)


@clab_app.command()
def restart(topo: Path | None = TopoOpt, name: str | None = NameOpt, nodes: list[str] = NodeOpt):
    """Stop and start nodes of a deployed lab (containerlab restart)."""
    _lifecycle("restart", topo, name, nodes)


def _lifecycle(action: str, topo: Path | None, name: str | None, nodes: list[str]) -> None:
    from ..lab.lab import Lab
    from .live import power

    with reported():
        lab = _lab_name(topo, name)
        picked = [n for given in nodes for n in given.split(",") if n]
        if not picked:
            picked = [n for n, obj in Lab.running(lab).plan.nodes.items() if not obj.parent and not KINDS.get(obj.kind).machine]
    power(action, picked, None, lab)


@clab_app.command("exec")
def exec_cmd(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    cmds: list[str] = typer.Option([], "--cmd", help="Command to run (repeat for several)."),
    label: list[str] = typer.Option(
        [], "--label", help="KEY=VALUE: only the containers with that label (repeat: all must match)."
    ),
    fmt: str = typer.Option("plain", "-f", "--format", help="plain or json ({container: [{cmd, return-code, stdout, stderr}]})."),
):
    """Run commands in the lab's containers (containerlab exec); every container, or those --label selects."""
    import shlex

    from ..lab.lab import Lab
    from ..lab.node import Node

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
        wanted = dict(pair.partition("=")[::2] for item in label for pair in item.split(",") if pair)
        lab = Lab.running(_lab_name(topo, name))
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
def save(topo: Path | None = TopoOpt, name: str | None = NameOpt):
    """Save each router's running configuration (containerlab save)."""
    from .lifecycle import save as nestlab_save

    with reported():
        lab = _lab_name(topo, name)
    nestlab_save(topo=None, lab=lab, to=None)


@clab_app.command()
def graph(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    mermaid: bool = typer.Option(False, "--mermaid", help="Write the lab as a Mermaid flowchart."),
    drawio: bool = typer.Option(False, "--drawio", help="Write the lab as a draw.io diagram."),
    dot: bool = typer.Option(False, "--dot", help="Write the lab as Graphviz dot."),
    _offline: bool = typer.Option(False, "--offline", **Ignored),
):
    """Draw the lab (containerlab graph): --mermaid, --drawio or --dot write TOPO.clab.EXT beside the file;
    without one, the live page is served (nestlab graph --serve)."""
    from .observe import graph as nestlab_graph

    fmt = "mermaid" if mermaid else "drawio" if drawio else "dot" if dot else None
    if fmt is None:
        nestlab_graph(topo=topo, lab=name, fmt="json", serve=True, host="127.0.0.1", port=50080, output=None)
        return
    where = Path(str(topo).rsplit(".", 1)[0] + {"mermaid": ".mermaid", "drawio": ".drawio", "dot": ".dot"}[fmt]) if topo else None
    nestlab_graph(topo=topo, lab=name, fmt=fmt, serve=False, host="127.0.0.1", port=50080, output=where)


@clab_app.command()
def version():
    """The version, in containerlab's form (tools compare it against the containerlab they need)."""
    from .. import __version__

    out.line(
        f"  version: {COMPATIBLE}\n   commit: nestlab-{__version__}\n     date: -\n   source: nestlab (containerlab-compatible commands)"
    )


@compat_app.command("install-cli")
def install_cli(
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the `containerlab` command."),
    force: bool = typer.Option(False, "--force", help="Replace a `containerlab` that is not nestlab's."),
):
    """Install a `containerlab` command that runs `nestlab clab ...`, for tools that call containerlab."""
    with reported():
        target = directory / "containerlab"
        if target.exists() and "nestlab" not in target.read_text(errors="replace") and not force:
            raise LabError(f"{target} exists and is not nestlab's; --force replaces it")
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f'#!/bin/sh\n# nestlab\'s containerlab-compatible command (nestlab compat install-cli)\nexec {sys.executable} -m nestlab.cli.app clab "$@"\n'
        )
        target.chmod(0o755)
        err.line(f"installed {target}: `containerlab deploy -t F` now runs nestlab")

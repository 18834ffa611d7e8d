"""`nestlab inspect`, `exec`, `shell`: look at and work in a running lab."""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..engine import cleanup, state
from ..errors import LabError
from .common import KubeconfigOpt, LabOpt, NamespaceOpt, TopoOpt, err, node_of, print_json, reported, resolve
from .quick_inspect import trace_warnings
from .tables import print_table, show

if TYPE_CHECKING:
    from ..lab.lab import Lab

commands = typer.Typer()


@commands.command(name="inspect")
def inspect_cmd(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    all_labs: bool = typer.Option(False, "--all", help="List every lab on this machine."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
    node: list[str] = typer.Option([], "--node", help="Only this node (repeat for more)."),
    pattern: str | None = typer.Option(
        None, "--filter", help="Only nodes whose name matches this pattern, e.g. 'drone1*' or '*/gnab'."
    ),
    page: int = typer.Option(1, "--page", min=1, help="Which page of the table (of --per-page nodes)."),
    per_page: int = typer.Option(50, "--per-page", min=1, help="Nodes per page of the table (JSON has every match)."),
):
    """Show nodes, interfaces, addresses and states of a running lab, read from the kernel; with MPTCP, each connection's subflows.

    Large labs: pick nodes with --node or --filter (only their namespaces are read), and page
    through the table with --page.
    """

    with reported():
        if all_labs:
            rows = []
            for name in state.labs():
                try:
                    current = state.read(name)
                    status = current.status if current else "orphaned (run nestlab cleanup)"
                except LabError:
                    current, status = None, "damaged state (run nestlab cleanup)"
                nodes = len(cleanup.marked_namespaces(name))
                rows.append({"lab": name, "status": status, "namespaces": nodes, "source": current.source if current else None})
            if fmt == "json":
                print_json(rows)
            else:
                cells = [[row["lab"], row["status"], str(row["namespaces"]), row["source"] or ""] for row in rows]
                print_table(("lab", "status", "namespaces", "source"), cells, overflow="ellipsis")
            return
        found = resolve(topo, lab, kubeconfig, namespace)
        wanted = _matching(found, node, pattern)
        report = found.inspect(wanted)
        for warning in trace_warnings(report):
            err.print(warning, markup=False, highlight=False)
        if fmt == "table" and len(report["nodes"]) > per_page:
            pages = -(-len(report["nodes"]) // per_page)
            if page > pages:
                raise LabError(f"--page {page}: there are {pages} pages of {per_page} nodes")
            report["nodes"] = report["nodes"][(page - 1) * per_page : page * per_page]
            show(report, fmt)
            err.line(
                f"page {page} of {pages} ({per_page} nodes a page): --page {page + 1 if page < pages else 1} for more, --node/--filter to pick"
            )
            return
        show(report, fmt, every_interface=bool(node))


def _matching(lab_obj: Lab, nodes: list[str], pattern: str | None) -> set[str] | None:
    """The node names --node and --filter pick (None: every node)."""
    if not nodes and pattern is None:
        return None

    known = set(lab_obj.plan.nodes)
    missing = [n for n in nodes if n not in known]
    if missing:
        raise LabError(f"lab {lab_obj.name} has no node {', '.join(missing)}")
    picked = set(nodes) | ({n for n in known if fnmatch.fnmatchcase(n, pattern)} if pattern else set())
    if not picked:
        raise LabError(f"no node of lab {lab_obj.name} matches '{pattern}'")
    return picked


@commands.command(
    name="exec",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def exec_cmd(
    node: str = typer.Argument(..., help="Node, component (drone1/gnab) or emulated host."),
    command: list[str] = typer.Argument(..., help="Command and its arguments (put them after --)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    env: list[str] = typer.Option(
        [], "--env", "-e", metavar="NAME[=VALUE]", help="Pass NAME from your environment (or set it to VALUE); repeat for more."
    ),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
):
    """Run a command inside a node; its exit code becomes nestlab's.

    The command gets the node's `env:` and, of your environment, only PATH, HOME, USER, SHELL,
    TERM, locale, PYTHONPATH and NESTLAB_* settings: tokens and keys stay out unless passed with --env.

    Example: nestlab exec --lab quickstart h1 -- ping -c1 10.0.0.2
    A component of a nested node: nestlab exec --lab manet drone1/gnab -- ps ax
    Passing a variable: nestlab exec -e API_TOKEN --lab quickstart h1 -- ./client.sh
    A lab an operator made (a NestLab): nestlab exec --lab nl-demo --kubeconfig kc.yaml h1 -- ping -c1 10.0.5.2
    """
    with reported():
        target = node_of(resolve(topo, lab, kubeconfig, namespace), node)
        if command and command[0] == "--":
            command = command[1:]
        passed = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item, "")) for item in env)
        try:
            proc = target.popen(command, env=passed)
        except FileNotFoundError:
            err.print(f"[red]error[/red] {command[0]}: command not found in node {node}")
            raise typer.Exit(127) from None
        raise typer.Exit(_wait(proc))


@commands.command()
def shell(
    node: str = typer.Argument(..., help="Node, component (drone1/gnab) or emulated host."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
):
    """Open an interactive shell inside a node (exit it to come back)."""

    with reported():
        the_lab = resolve(topo, lab, kubeconfig, namespace)
        target = node_of(the_lab, node)
        if remote := the_lab.site().remote(node):  # on its server, with a terminal
            raise typer.Exit(remote.run(remote.nestlab_cmd("shell", "--lab", the_lab.name, node), tty=True).returncode)
        prompt = f"[{the_lab.name}/{node}] \\w# "
        proc = target.popen([os.environ.get("SHELL", "/bin/sh")], env={"PS1": prompt})
        raise typer.Exit(_wait(proc))


def _wait(proc) -> int:
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # the child got the same SIGINT and decides for itself


@commands.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def ssh(
    node: str = typer.Argument(..., help="Node with a management address (mgmt:)."),
    command: list[str] = typer.Argument(None, help="A command to run there instead of a login shell (after --)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    stdio: bool = typer.Option(
        False,
        "--stdio",
        help="Relay standard input and output to the node's SSH port, as `ssh -W` does: the ProxyCommand through "
        "which an ssh of yours reaches a rootless lab's nodes (docs/rootless.md).",
    ),
):
    """SSH into a node on its management address, as root with the lab's key (what `ssh clab-LAB-NODE` does).
    A node on an SSH server or a pod is reached from there (its server's nestlab runs this command).
    Rootless without subordinate ids, where no SSH server can run, it enters the node as `nestlab exec` does.

    Example: nestlab ssh --lab srl01 r1 -- ip -br addr
    """
    from ..engine import access, handout, sshgate  # ssh alone: 35 ms of start-up the other commands here do without

    with reported():
        the_lab = resolve(topo, lab)
        rest = list(command or [])
        rest = rest[1:] if rest[:1] == ["--"] else rest
        if remote := the_lab.site().remote(node):  # relayed by the node's server or pod
            args = remote.nestlab_cmd("ssh", "--lab", the_lab.name, node, *(["--", *rest] if rest else []))
            raise typer.Exit(remote.popen(args, tty=sys.stdin.isatty()).wait())
        found = {m.node: m for m in access.managed(the_lab.blueprint)}
        if node not in found:
            raise LabError(
                f"node {node} of lab {the_lab.name} has no management address"
                + ("" if found else " (the lab has no management network: add mgmt: to its file)")
            )

        if not handout.machine().serves_ssh:  # rootless without subordinate ids: into the node as `nestlab exec` goes
            if stdio:
                raise LabError(sshgate.NO_SERVER)
            shell = [os.environ.get("SHELL", "/bin/sh"), "-l"]
            proc = node_of(the_lab, node).popen(["sh", "-c", " ".join(rest)] if rest else shell)
            raise typer.Exit(_wait(proc))
        if stdio:
            raise typer.Exit(access.relay(str(found[node].ipv4.ip), 22))
        args = [
            "ssh",
            "-i",
            sshgate.client_key(the_lab.name),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ]
        args += ["-o", "LogLevel=ERROR", f"root@{found[node].ipv4.ip}"]
        os.execvp("ssh", args + rest)

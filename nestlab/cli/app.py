"""The ``nestlab`` command line."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .. import names
from ..errors import LabError
from .bench import bench_app, compare_cmd, report_cmd
from .k8s import k8s_app
from .servers import ServersOpt, plan, servers_app
from .common import NEEDS_ROOT, LabOpt, TopoOpt, err, node_of, notices, out, print_json, progress_bar, reported, resolve

if TYPE_CHECKING:
    from rich.table import Table

    from ..backends import spares
    from ..lab.lab import Lab
    from ..model.glance import Glance

app = typer.Typer(
    help="Build, use and tear down networks of namespace containers.\n\n"
    "Typical session:  nestlab deploy -t lab.yml ; nestlab exec --lab NAME h1 -- ping -c1 10.0.0.2 ; nestlab destroy --lab NAME",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


# Commands that only read files or what any user may see; every other one changes the machine.
_READ_ONLY = {"inspect", "plan", "version", "report", "compare", "modes", "graph", "k8s", "mobility", "link", "node"}


@app.callback()
def _needs_root(ctx: typer.Context) -> None:
    """Refuse a command that changes the machine before it starts, when not run as root."""
    if ctx.invoked_subcommand not in _READ_ONLY and os.geteuid() != 0 and not {"--help", "-h"} & set(sys.argv):
        err.print(f"[red]error[/red] nestlab {ctx.invoked_subcommand} {NEEDS_ROOT}")
        raise typer.Exit(1)


IFACES_SHOWN = 12  # in a table, a node with more interfaces (a switch's ports) shows this many and a count


def _table(report: dict, every_interface: bool = False) -> Table:
    from rich.table import Table

    table = Table(title=f"lab {report['lab']}", title_justify="left")
    for column in ("node", "kind", "host", "state", "cpu s", "memory", "interface", "mode", "if-state", "mtu", "addresses", "bridge"):
        table.add_column(column, overflow="fold")
    for node in report["nodes"]:
        ifaces = node["interfaces"] or [None]
        kind = node["kind"] + (f" ({node['ovs']['datapath']}, {node['ovs']['checksums']})" if node.get("ovs") else "")
        kind += f" [{node['runtime']}]" if node.get("runtime", "namespace") != "namespace" else ""
        kind += f" holding {len(node['components'])} components" if node.get("components") else ""
        usage = node.get("usage") or {}
        cpu = f"{usage['cpu_s']:.2f}" if usage else ""
        memory = f"{usage['memory_bytes'] / 2**20:.1f} MiB" if usage else ""
        more = len(ifaces) - IFACES_SHOWN + 1 if len(ifaces) > IFACES_SHOWN and not every_interface else 0
        for i, iface in enumerate(ifaces[:len(ifaces) - more]):
            head = [node["name"], kind, node["host"] or node.get("server") or "", node["state"], cpu, memory] if i == 0 else [""] * 6
            if iface is None:
                table.add_row(*head, "", "", "", "", "", "")
            else:
                table.add_row(
                    *head,
                    iface["name"],
                    iface["mode"] or "",
                    str(iface["state"]),
                    str(iface["mtu"]),
                    " ".join(iface["addresses"]),
                    iface["master"] or "",
                )
        if more:
            table.add_row(*[""] * 6, f"... {more} more", "", "", "", f"(--node {node['name']} lists them all)", "")
    return table


def _subflow_table(report: dict) -> Table:
    from rich.table import Table

    table = Table(title="MPTCP connections and their subflows", title_justify="left")
    for column in ("node", "token", "subflow", "device", "sent", "received", "retransmits"):
        table.add_column(column, overflow="fold")
    for node in report["nodes"]:
        for conn in node.get("mptcp") or []:
            for i, sub in enumerate(conn["subflows"]):
                head = [node["name"], conn["token"]] if i == 0 else ["", ""]
                table.add_row(*head, f"{sub['local']} -> {sub['remote']}", sub["device"] or "", _bytes(sub["bytes_sent"]),
                              _bytes(sub["bytes_received"]), str(sub["retransmits"] if sub["retransmits"] is not None else ""))
    return table


def _bytes(count: int | None) -> str:
    return "" if count is None else f"{count / 2**20:.1f} MiB"


@app.command()
def deploy(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file (YAML), or a Kathará lab: its folder or lab.conf (docs/compat.md)."),
    reconfigure: bool = typer.Option(False, "--reconfigure", help="Destroy the running lab first, then deploy from scratch."),
    fmt: str = typer.Option("summary", "--format", help="Output: summary (the table too for small labs), table or json (what inspect says)."),
    table: bool = typer.Option(False, "--table", help="Print the full table of nodes and interfaces, whatever the lab's size."),
    vars_files: list[Path] = typer.Option([], "--vars", help="Variables (YAML/JSON) for a Go-template topology, as containerlab's --vars; "
                                                             "repeat to merge. Default: NAME_vars.yml beside the file."),
    servers: Path | None = ServersOpt,
):
    """Create the lab described by a topology file.

    Deploying a lab that already runs reconciles it: nodes and links that
    changed are recreated, new ones added, removed ones deleted; an unchanged
    lab is left alone.  A deploy that fails half-way removes what it created.
    It ends with a summary (counts by kind and mode, time, what to run next); the
    table of nodes and interfaces follows for labs of up to 40 nodes, or with --table.

    Example: nestlab deploy -t examples/quickstart.yml
    (the file format is described in docs/topology.md)
    """
    from ..backends import spares
    from ..model.glance import glance

    started = time.perf_counter()
    if not servers:  # this machine's namespaces are made while the rest loads (backends/spares.py)
        spares.start(lambda: _ahead(glance(topo), reconfigure))
    with reported():
        try:
            _deploy(topo, reconfigure, fmt, table, vars_files, servers, started)
        finally:
            spares.stop()


def _deploy(topo: Path, reconfigure: bool, fmt: str, table: bool, vars_files: list[Path], servers: Path | None, started: float) -> None:
    """What `deploy` does once its helper is started: load, deploy (here or on servers), say what was made."""
    from ..lab.lab import Lab

    if servers:  # known before the topology: each server's nestlab starts while it loads
        _deploy_split(topo, vars_files, servers, reconfigure, started)
        return
    lab = Lab.from_file(topo, vars_files)
    notices(lab)
    if reconfigure:
        lab.destroy()
    started = time.perf_counter()
    if lab.topology.servers:
        _deploy_split(topo, vars_files, None, False, started, lab)
        return
    with progress_bar("deploying") as progress:
        changes = lab.deploy(progress=progress, on_exec=_print_exec)
    took = time.perf_counter() - started
    if not changes:
        err.line(f"lab {lab.name} is already running as described; nothing to change")
    else:
        err.line(f"lab {lab.name}: {changes.summary()} in {took:.2f} s")
    if fmt == "summary":
        out.line(_summary(lab))
    if fmt != "summary" or table or len(lab.plan.nodes) <= SMALL_LAB:
        from ..lab.inspect import inspect

        _show(inspect(lab), "table" if table or fmt == "summary" else fmt)


SMALL_LAB = 40  # nodes: up to this many, deploy prints the whole table


def _ahead(glanced: Glance, reconfigure: bool) -> spares.Ahead:
    """What a deploy will make, from a glance at its file: nothing to reconcile a running lab."""
    from ..backends import spares  # imported before the fork: no import lock is taken here

    if not glanced.name or (os.path.isdir(names.lab_dir(glanced.name)) and not reconfigure):
        return spares.Ahead("", ())
    return spares.Ahead(names.alias(glanced.name), glanced.nodes, glanced.extra, glanced.bridges, glanced.cables)


def _deploy_split(topo: Path, vars_files: list[Path], servers: Path | None, reconfigure: bool, started: float, lab: Lab | None = None) -> None:
    """Deploy a lab on servers (an inventory's, or its file's) and say where everything went."""
    from collections import Counter

    from ..lab import multi
    from ..lab.lab import Lab
    from ..model.servers import load_inventory

    starting = None
    if servers:
        found, _ = load_inventory(servers)
        starting = multi.Starting({name: spec.model_dump() for name, spec in found.items()}, str(servers.parent.resolve()))
    try:
        if lab is None:
            lab = Lab.from_file(topo, vars_files, servers)
            notices(lab)
        if reconfigure:
            lab.destroy()
    except BaseException:
        if starting:
            starting.abandon()
        raise
    split = multi.deploy(lab, starting=starting)
    counts = Counter(split.placement.server(n) for n in lab.plan.nodes)
    tunnels = sum(len(s.stitched) for s in split.shares.values()) // 2
    err.line(f"lab {lab.name}: {len(lab.plan.nodes)} nodes on {len(lab.topology.servers)} servers "
             f"({', '.join(f'{s}: {counts.get(s, 0)}' for s in sorted(lab.topology.servers))}), "
             f"{tunnels} VXLAN tunnels (MTU {split.mtu}) in {time.perf_counter() - started:.2f} s")
    out.line(f"next: nestlab inspect --lab {lab.name};  nestlab exec --lab {lab.name} NODE -- CMD (runs on the node's server);  "
             f"nestlab destroy --lab {lab.name}")


def _summary(lab: Lab) -> str:
    """What the lab holds, counted by kind and mode, and where to look next."""
    from collections import Counter

    plan = lab.plan
    kinds = Counter(o.kind if o.runtime == "namespace" else f"{o.kind} [{o.runtime}]" for o in plan.nodes.values())
    modes = Counter(x.mode for x in plan.links.values()) + Counter(x.mode for x in plan.attachments.values())
    counted = lambda c: ", ".join(f"{n} {k}" for k, n in c.most_common())  # noqa: E731
    return (f"lab {lab.name}: {len(plan.nodes)} namespaces ({counted(kinds)}); "
            f"{len(plan.links) + len(plan.attachments)} links ({counted(modes) or 'none'})\n"
            f"next: nestlab inspect --lab {lab.name} [--node NAME | --filter 'h1*'];  nestlab graph --lab {lab.name} --serve;  "
            f"nestlab exec --lab {lab.name} NODE -- CMD;  nestlab destroy --lab {lab.name}")


def _print_exec(node: str, command: str, code: int, output: str) -> None:
    colour = "green" if code == 0 else "red"
    err.print(f"[{colour}]exec[/{colour}] {node}: {command} (exit {code})", soft_wrap=True)
    if output.strip():
        err.print(output.rstrip(), markup=False, soft_wrap=True)


def _show(report: dict, fmt: str, every_interface: bool = False) -> None:
    if fmt == "json":
        print_json(report)
    elif fmt == "table":
        out.print(_table(report, every_interface))
        if any(node.get("mptcp") for node in report["nodes"]):
            out.print(_subflow_table(report))
    else:
        raise LabError(f"--format must be table or json, not '{fmt}'")


@app.command(name="inspect")
def inspect_cmd(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    all_labs: bool = typer.Option(False, "--all", help="List every lab on this machine."),
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
    node: list[str] = typer.Option([], "--node", help="Only this node (repeat for more)."),
    pattern: str | None = typer.Option(None, "--filter", help="Only nodes whose name matches this pattern, e.g. 'drone1*' or '*/gnab'."),
    page: int = typer.Option(1, "--page", min=1, help="Which page of the table (of --per-page nodes)."),
    per_page: int = typer.Option(50, "--per-page", min=1, help="Nodes per page of the table (JSON has every match)."),
):
    """Show nodes, interfaces, addresses and states of a running lab, read from the kernel; with MPTCP, each connection's subflows.

    Large labs: pick nodes with --node or --filter (only their namespaces are read), and page
    through the table with --page.
    """
    from ..lab import cleanup
    from ..lab import state
    from ..lab.inspect import inspect

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
                from rich.table import Table

                table = Table("lab", "status", "namespaces", "source")
                for row in rows:
                    table.add_row(row["lab"], row["status"], str(row["namespaces"]), row["source"] or "")
                out.print(table)
            return
        found = resolve(topo, lab)
        wanted = _matching(found, node, pattern)
        report = inspect(found, wanted)
        if fmt == "table" and len(report["nodes"]) > per_page:
            pages = -(-len(report["nodes"]) // per_page)
            if page > pages:
                raise LabError(f"--page {page}: there are {pages} pages of {per_page} nodes")
            report["nodes"] = report["nodes"][(page - 1) * per_page : page * per_page]
            _show(report, fmt)
            err.print(f"page {page} of {pages} ({per_page} nodes a page): --page {page + 1 if page < pages else 1} for more, --node/--filter to pick")
            return
        _show(report, fmt, every_interface=bool(node))


def _matching(lab: Lab, nodes: list[str], pattern: str | None) -> set[str] | None:
    """The node names --node and --filter pick (None: every node)."""
    if not nodes and pattern is None:
        return None
    import fnmatch

    known = set(lab.plan.nodes)
    missing = [n for n in nodes if n not in known]
    if missing:
        raise LabError(f"lab {lab.name} has no node {', '.join(missing)}")
    picked = set(nodes) | ({n for n in known if fnmatch.fnmatchcase(n, pattern)} if pattern else set())
    if not picked:
        raise LabError(f"no node of lab {lab.name} matches '{pattern}'")
    return picked


@app.command(
    name="exec",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def exec_cmd(
    node: str = typer.Argument(..., help="Node, component (drone1/gnab) or emulated host."),
    command: list[str] = typer.Argument(..., help="Command and its arguments (put them after --)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    env: list[str] = typer.Option([], "--env", "-e", metavar="NAME[=VALUE]", help="Pass NAME from your environment (or set it to VALUE); repeat for more."),
):
    """Run a command inside a node; its exit code becomes nestlab's.

    The command gets the node's `env:` and, of your environment, only PATH, HOME, USER, SHELL,
    TERM, locale, PYTHONPATH and NESTLAB_* settings: tokens and keys stay out unless passed with --env.

    Example: nestlab exec --lab quickstart h1 -- ping -c1 10.0.0.2
    A component of a nested node: nestlab exec --lab manet drone1/gnab -- ps ax
    Passing a variable: nestlab exec -e API_TOKEN --lab quickstart h1 -- ./client.sh
    """
    with reported():
        target = node_of(resolve(topo, lab), node)
        if command and command[0] == "--":
            command = command[1:]
        passed = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item, "")) for item in env)
        try:
            proc = target.popen(command, env=passed)
        except FileNotFoundError:
            err.print(f"[red]error[/red] {command[0]}: command not found in node {node}")
            raise typer.Exit(127)
        raise typer.Exit(_wait(proc))


@app.command()
def shell(node: str = typer.Argument(..., help="Node, component (drone1/gnab) or emulated host."), topo: Path | None = TopoOpt, lab: str | None = LabOpt):
    """Open an interactive shell inside a node (exit it to come back)."""
    from ..lab import k8s, multi

    with reported():
        the_lab = resolve(topo, lab)
        target = node_of(the_lab, node)
        if remote := multi.remote_for(the_lab.name, node) or k8s.remote_for(the_lab.name, node):  # on its server, with a terminal
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


@app.command()
def destroy(topo: Path | None = TopoOpt, lab: str | None = LabOpt):
    """Remove a lab: its processes, namespaces, links and state (on every server, for a lab split
    across servers). Nothing else is touched."""
    from ..lab import cleanup, k8s, multi
    from ..lab import state

    with reported():
        if lab and not topo:
            name = lab
        else:
            name = resolve(topo, lab).name
        split = multi.record(name)
        pods = k8s.record(name)
        with state.locked(name):
            removed = cleanup.remove_lab(name)
        if split:
            err.line(f"lab {name}: removed from servers {', '.join(sorted(split['servers']))}")
        elif pods:
            err.line(f"lab {name}: pods {', '.join(sorted(pods['pods'].values()))} deleted (namespace {pods['namespace']})")
        else:
            err.print(f"lab {name}: removed {removed} namespaces" if removed else f"lab {name}: nothing to remove")


@app.command()
def save(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    to: Path | None = typer.Option(None, "--to", help="Also write DIR/NODE/frr.conf (e.g. beside the topology, to deploy from next time)."),
):
    """Save each router's running configuration (like clab save).

    Every kind: frr node's `show running-config` replaces its frr.conf in the lab's folder
    (what `vtysh -c "write memory"` in the node would do), and with --to goes to DIR/NODE/frr.conf.
    Example: nestlab save --lab ospf --to saved/
    """
    with reported():
        written = resolve(topo, lab).save(to)
        if not written:
            raise LabError("this lab has no router (kind: frr) to save")
        for node, path in written.items():
            err.line(f"{node}: {path}")


@app.command(name="cleanup")
def cleanup_cmd(
    name: str | None = typer.Argument(None, help="Lab to clean up."),
    all_labs: bool = typer.Option(False, "--all", help="Every nestlab lab on this machine, running or not."),
):
    """Remove what a lab left behind after its process died (e.g. a deploy killed half-way).

    Only objects carrying nestlab's marker are removed: namespaces named
    nestlab.LAB.*, mounts and state under /run/nestlab/LAB, and processes
    running inside those namespaces.
    """
    from ..lab import cleanup
    from ..lab import state

    with reported():
        if bool(name) == all_labs:
            raise LabError("name one lab, or pass --all")
        for lab in state.labs() if all_labs else [name]:
            with state.locked(lab):
                removed = cleanup.remove_lab(lab)
            err.print(f"lab {lab}: removed {removed} namespaces")


link_app = typer.Typer(help="Change or show a running lab's links live (shaping, up/down).", no_args_is_help=True)
app.add_typer(link_app, name="link")


@link_app.command("set")
def link_set(
    a: str = typer.Argument(..., help="One endpoint, NODE:IFACE."),
    b: str = typer.Argument(..., help="The other endpoint."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    rate: str | None = typer.Option(None, help="e.g. 10mbit, 20gbit (HTB, 64-bit)."),
    burst: str | None = typer.Option(None, help="HTB burst, e.g. 64kb."),
    queue: int | None = typer.Option(None, help="Queue length in packets."),
    delay: str | None = typer.Option(None, help="e.g. 20ms (netem)."),
    jitter: str | None = typer.Option(None, help="e.g. 5ms (netem, needs --delay)."),
    distribution: str | None = typer.Option(None, help="Of the jitter: uniform, normal, pareto, paretonormal."),
    loss: str | None = typer.Option(None, help="e.g. 10% (netem)."),
    corrupt: str | None = typer.Option(None, help="e.g. 1% (netem)."),
    duplicate: str | None = typer.Option(None, help="e.g. 1% (netem)."),
    reorder: str | None = typer.Option(None, help="e.g. 25% (netem, needs --delay)."),
    mtu: int | None = typer.Option(None, help="MTU of both ends."),
    qdisc: str | None = typer.Option(None, help="htb (default) or tbf: what enforces the rate."),
    down: bool = typer.Option(False, "--down", help="Take the link down (both ends)."),
    up: bool = typer.Option(False, "--up", help="Bring the link up again."),
    direction: str = typer.Option("both", help="both, a (what A sends) or b (what B sends)."),
):
    """Change a link while the lab runs; the new setting replaces the old one in place.

    Only the options given change; "none" removes one (e.g. --delay none).

    Example: nestlab link set --lab manet n1:eth1 n2:eth1 --rate 10mbit --delay 20ms
    """
    with reported():
        given = dict(rate=rate, burst=burst, queue=queue, delay=delay, jitter=jitter, distribution=distribution, loss=loss, corrupt=corrupt,
                     duplicate=duplicate, reorder=reorder, mtu=mtu, qdisc=qdisc)
        params = {k: v for k, v in given.items() if v is not None}
        if down and up:
            raise LabError("give --down or --up, not both")
        if down or up:
            params["state"] = "down" if down else "up"
        if not params:
            raise LabError("nothing to change: give e.g. --rate 10mbit, --delay 20ms, --down or --up")
        spent = resolve(topo, lab).link(a, b).set(direction=direction, **params)
        err.print(f"link {a} {b}: {', '.join(f'{k}={v}' for k, v in params.items())} applied in {spent:.1f} ms")


@link_app.command("show")
def link_show(
    a: str | None = typer.Argument(None, help="One endpoint (omit to show every link)."),
    b: str | None = typer.Argument(None, help="The other endpoint."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
):
    """Show links' shaping as planned and as the kernel has it."""
    from ..lab import state
    from rich.table import Table

    with reported():
        the_lab = resolve(topo, lab)
        current = state.read(the_lab.name)
        links = current.plan.links.values() if current else the_lab.plan.links.values()
        chosen = [x for x in links if a is None or {x.a.ref, x.b.ref} == {a, b}]
        if a is not None and not chosen:
            raise LabError(f"lab {the_lab.name} has no link between {a} and {b}")
        from ..backends.shaping import Shaper
        from ..lab.links import LinkHandle

        shaper = Shaper()  # one for every link, and each link as already read (not the state again per link)
        try:
            shown = [LinkHandle(the_lab, x.a.ref, x.b.ref, shaper, obj=x).show() for x in chosen]
        finally:
            shaper.close()
        if fmt == "json":
            print_json(shown)
            return
        table = Table("link", "state", "sender", "planned", "kernel", title=f"links of {the_lab.name}", title_justify="left")
        for item in shown:
            for i, (sender, shape) in enumerate(item["sends"].items()):
                kernel = item["kernel"][sender]
                seen = ", ".join(f"{k}={v}" for k, v in kernel.items())
                table.add_row(item["link"] if i == 0 else "", item["state"] if i == 0 else "", sender,
                              ", ".join(f"{k}={v}" for k, v in shape.items()) or "unshaped", seen)
        out.print(table)


@app.command()
def run(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file with a schedule: section."),
    loops: int = typer.Option(1, "--loops", min=1, help="Play the schedule this many times."),
    keep: bool = typer.Option(False, "--keep", help="Leave the lab running afterwards."),
):
    """Deploy a lab and play its schedule: timed link changes on a drift-free clock.

    Each change is printed and logged (/run/nestlab/LAB/events.jsonl) with how late it was
    applied. Ctrl-C stops; the lab is destroyed unless --keep.

    Example schedule entry:  - {at: 2.5s, link: ["a:eth1", "b:eth1"], set: {rate: 10mbit}}
    """
    from ..lab.lab import Lab

    from ..lab.schedule import play

    with reported():
        lab = Lab.from_file(topo)
        notices(lab)
        if not lab.topology.schedule and not lab.topology.dynamics:
            raise LabError(f"{topo} has no schedule: or dynamics: section; see docs/shaping.md")
        lab.deploy()
        try:
            played = play(lab, loops, lambda p: err.print(f"t={p.at:7.3f}s  {p.what}  (late {p.late_ms:.2f} ms, applied in {p.apply_ms:.2f} ms)"))
            worst = max(p.late_ms + p.apply_ms for p in played)
            err.print(f"{len(played)} changes; worst lateness including apply time {worst:.2f} ms")
        except KeyboardInterrupt:
            err.print("stopped")
        finally:
            if not keep:
                lab.destroy()


node_app = typer.Typer(help="Change or show a running node's cgroup limits and usage; restart its cmd.", no_args_is_help=True)
app.add_typer(node_app, name="node")


@node_app.command("set")
def node_set(
    node: str = typer.Argument(..., help="A node or component, e.g. drone1 or drone1/gnab."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    cpus: str | None = typer.Option(None, help="CPU time in cores, e.g. 0.5 (CFS quota; none lifts it)."),
    cpu_shares: str | None = typer.Option(None, "--cpu-shares", help="Weight under contention, 2..262144 (1024 = default)."),
    memory: str | None = typer.Option(None, help="Hard memory limit, e.g. 256m (none lifts it)."),
    pids: str | None = typer.Option(None, help="Most processes and threads at once."),
    cpuset: str | None = typer.Option(None, help='CPUs allowed, e.g. "0" or "0-1".'),
):
    """Change a node's or component's limits while the lab runs (written to its cgroup at once).

    A node's limits bound all its components. Example: nestlab node set drone1/gnab --cpus 0.5 --memory 128m
    """
    with reported():
        given = {k: v for k, v in dict(cpus=cpus, cpu_shares=cpu_shares, memory=memory, pids=pids, cpuset=cpuset).items() if v is not None}
        if not given:
            raise LabError("nothing to change: give e.g. --cpus 0.5 or --memory 256m")
        the_lab = resolve(topo, lab)
        if node not in the_lab.nodes:
            raise LabError(f"lab {the_lab.name} has no node {node} (nodes: {', '.join(the_lab.nodes)})")
        limits = the_lab.nodes[node].set(**given)
        err.print(f"node {node}: limits now " + ", ".join(f"{k}={v}" for k, v in limits.items()))


@node_app.command("restart")
def node_restart(
    node: str = typer.Argument(..., help="The node whose cmd: to restart."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
):
    """Restart a node's main process (its cmd:, as containerlab's), e.g. after editing a file it reads.

    Its whole session gets SIGTERM, then SIGKILL after 5 s; the new one appends to
    /run/nestlab/LAB/nodes/NODE/cmd.log.  Example: nestlab node restart --lab web srv
    """
    from ..lab.startup import restart_cmd

    with reported():
        the_lab = resolve(topo, lab)
        pid = restart_cmd(the_lab, node)
        err.line(f"{node}: cmd restarted (pid {pid})")


@node_app.command("show")
def node_show(
    node: str | None = typer.Argument(None, help="A node or component (omit for every node with a cgroup)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
):
    """Show CPU seconds, memory in use and limits per node and component, read from their cgroups."""
    from rich.table import Table

    with reported():
        the_lab = resolve(topo, lab)
        chosen = [n for name, n in the_lab.nodes.items() if (node is None or name == node) and n.obj.cgroup]
        if node is not None and not chosen:
            raise LabError(f"lab {the_lab.name} has no node {node} with a cgroup")
        rows = [{"node": n.name, **n.usage(), "limits": n.limits()} for n in chosen]
        if fmt == "json":
            print_json(rows)
            return
        table = Table("node", "cpu s", "memory MiB", "cpus limit", "memory limit", "pids limit", title=f"lab {the_lab.name}", title_justify="left")
        for row in rows:
            lim = row["limits"]
            table.add_row(row["node"], f"{row.get('cpu_s', 0):.2f}", f"{row.get('memory_bytes', 0) / 2**20:.1f}", lim.get("cpus", ""), lim.get("memory", ""), lim.get("pids", ""))
        out.print(table)


image_app = typer.Typer(help="Root filesystems for image: nodes (runc).", no_args_is_help=True)
app.add_typer(image_app, name="image")


@image_app.command("build")
def image_build(
    name: str = typer.Argument(..., help="Image name; nodes use it as image: NAME."),
    debian: str = typer.Option("bookworm", "--debian", help="Debian suite to bootstrap."),
    packages: str = typer.Option("iproute2,iputils-ping", "--packages", help="Comma-separated extra packages, e.g. iperf3,iproute2."),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian archive to fetch from."),
):
    """Build a Debian base image with debootstrap (minbase + --packages) into /var/lib/nestlab/images/NAME.

    Example: nestlab image build radio --debian bookworm --packages iperf3,iproute2
    """
    from ..backends import rootfs

    with reported():
        import re

        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name):
            raise LabError(f"image name '{name}' may use only letters, digits, '.', '-' and '_'")
        started = time.perf_counter()
        with err.status(f"debootstrap {debian} for image {name}") as status:
            path = rootfs.build(name, debian, [p for p in packages.split(",") if p], mirror, lambda line: status.update(f"debootstrap: {line[:100]}"))
        err.print(f"image {name}: {path} in {time.perf_counter() - started:.0f} s; use it as image: {name}")


@image_app.command("ls")
def image_ls(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """List images made by nestlab image build."""
    from ..backends import rootfs
    from rich.table import Table

    with reported():
        images = rootfs.listing()
        if fmt == "json":
            print_json(images)
            return
        table = Table("name", "suite", "packages", "path")
        for image in images:
            table.add_row(image["name"], image.get("suite", ""), ",".join(image.get("packages", [])), image["path"])
        out.print(table)


@image_app.command("rm")
def image_rm(name: str = typer.Argument(..., help="Image to delete.")):
    """Delete an image made by nestlab image build (nodes running on it keep their copy-on-write view until destroyed)."""
    from ..backends import rootfs

    with reported():
        rootfs.remove(name)
        err.print(f"image {name} removed")



app.add_typer(bench_app, name="bench")
app.command(name="plan")(plan)
app.add_typer(servers_app, name="servers")
app.add_typer(k8s_app, name="k8s")


@app.command()
def version():
    """Print nestlab's version."""
    from .. import __version__

    out.line(__version__)


app.command("report")(report_cmd)
app.command("compare")(compare_cmd)


mobility_app = typer.Typer(help="Generate visibility graphs for dynamics: (MANETs).", no_args_is_help=True)
app.add_typer(mobility_app, name="mobility")


@mobility_app.command("random-waypoint")
def random_waypoint_cmd(
    nodes: int = typer.Option(12, "--nodes", min=2, help="Number of nodes, named n1..nN."),
    area: str = typer.Option("1000x1000", "--area", help="WIDTHxHEIGHT in metres."),
    radio_range: float = typer.Option(250, "--range", help="Radio range in metres."),
    duration: float = typer.Option(300, "--duration", help="Seconds."),
    step: float = typer.Option(1.0, "--step", help="Seconds between positions."),
    speed: str = typer.Option("1-20", "--speed", help="MIN-MAX speed in m/s."),
    pause: float = typer.Option(2.0, "--pause", help="Seconds nodes wait at each waypoint."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed, for a reproducible graph."),
):
    """Write a random-waypoint visibility graph (YAML) to stdout.

    Example: nestlab mobility random-waypoint --nodes 12 --area 1000x1000 --range 250 --duration 300 > graph.yml
    """
    import yaml

    from ..model.visibility import random_waypoint

    with reported():
        try:
            width, height = (float(x) for x in area.lower().split("x"))
            low, high = (float(x) for x in speed.split("-"))
        except ValueError:
            raise LabError("--area is WIDTHxHEIGHT (e.g. 1000x1000) and --speed MIN-MAX (e.g. 1-20)") from None
        graph = random_waypoint(nodes, width, height, radio_range, duration, step, (low, high), pause, seed)
        sys.stdout.write(yaml.safe_dump(graph, default_flow_style=None, sort_keys=False))


@app.command()
def doctor(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """What this kernel and machine support: attachment modes, qdiscs, MPTCP, cgroups, OVS, tools.

    Each kernel feature is tried in a throw-away namespace; a missing one names
    the kernel option that provides it, a missing tool the Debian package.
    A deploy that needs something listed as missing stops before creating anything.
    """
    from rich.table import Table

    from ..backends import probe

    with reported():
        features = probe.features()
        if fmt == "json":
            print_json([f.to_json() for f in features])
            return
        table = Table("group", "feature", "", "detail", "fix", title="nestlab doctor", title_justify="left")
        for f in features:
            table.add_row(f.group, f.name, "[green]yes[/green]" if f.ok else "[red]no[/red]", f.detail, f.fix)
        out.print(table)


@app.command()
def graph(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("mermaid", "--format", help="mermaid, dot, drawio or json (Cytoscape.js elements)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of standard output."),
    serve: bool = typer.Option(False, "--serve", help="Serve a live page of the running lab instead (Ctrl-C stops it)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the live page listens on (loopback unless you say otherwise)."),
    port: int = typer.Option(8080, "--port", help="Port of the live page (0: any free port)."),
):
    """Draw the lab: export its topology, or serve a live page of it.

    Nodes by kind, links labelled with their interfaces, mode and shaping, nested nodes as
    groups and emulated hosts as clusters.  Exports work from a file alone; --serve needs
    the lab running and shows each link's state (up/down) and rate, updated twice a second;
    click a node for its interfaces, a link to set it down or up.

    Examples:
      nestlab graph -t examples/twohosts.yml --format dot | dot -Tsvg > lab.svg
      nestlab graph --lab quickstart --format drawio -o lab.drawio
      nestlab graph --lab quickstart --serve --port 8080     # then open http://127.0.0.1:8080/
    """
    from ..lab.lab import Lab

    from ..observe import graph as exports

    with reported():
        found = resolve(topo, lab)
        if serve:
            from ..observe import live

            if not found.is_running:
                raise LabError(f"lab {found.name} is not running; deploy it first (exports work without: drop --serve)")
            try:
                live.serve(Lab.running(found.name), host, port, lambda url: err.print(f"live view of lab {found.name} at {url} (Ctrl-C stops it)"))
            except KeyboardInterrupt:
                pass
            except OSError as exc:
                raise LabError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            return
        if fmt not in exports.EXPORTS:
            raise LabError(f"--format must be one of {', '.join(exports.EXPORTS)}, not '{fmt}'")
        text = exports.EXPORTS[fmt](found.plan)
        if output:
            output.write_text(text)
            err.print(f"wrote {output}")
        else:
            sys.stdout.write(text)


@app.command(no_args_is_help=True)
def capture(
    interfaces: list[str] = typer.Argument(..., help="NODE:IF to capture on (a node, component, switch or emulated host); several go into one file."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    write: str | None = typer.Option(None, "-w", "--write", help="pcapng file to write, or - for standard output (a pipe)."),
    bpf: str | None = typer.Option(None, "-f", "--filter", help='Capture filter in tcpdump syntax, e.g. "icmp" or "tcp port 5201".'),
    count: int | None = typer.Option(None, "-c", "--count", min=1, help="Stop after this many packets."),
    duration: float | None = typer.Option(None, "-d", "--duration", min=0.0, help="Stop after this many seconds."),
    whole_link: bool = typer.Option(False, "--link", help="Also capture the far end of each interface's link."),
):
    """Capture packets on interfaces of a running lab, as pcapng (nothing is installed in the nodes).

    The packet socket is opened inside each interface's namespace; the filter is compiled by
    libpcap and applied in the kernel.  Ctrl-C, -c or -d ends the capture; the file is complete
    at any point.

    Examples:
      nestlab capture --lab quickstart h1:eth1 -f icmp -c 10 -w ping.pcapng
      nestlab capture --lab quickstart h1:eth1 --link -w - | tshark -r -
      nestlab capture --lab quickstart s1:p1 -w - | wireshark -k -i -
    """
    import contextlib

    from ..lab import k8s
    from ..observe import capture as cap

    with reported():
        found = resolve(topo, lab)
        if write is None:
            raise LabError("say where the packets go: -w FILE.pcapng, or -w - to pipe them (| tshark -r -, | wireshark -k -i -)")
        ends = []
        for ref in interfaces:
            node, sep, iface = ref.partition(":")
            if not sep or not iface:
                raise LabError(f"'{ref}' is not NODE:INTERFACE (e.g. h1:eth1)")
            ends.append((node, iface))
            if whole_link:
                far = [x.b if x.a.ref == ref else x.a for x in found.plan.links.values() if ref in (x.a.ref, x.b.ref)]
                if not far:
                    raise LabError(f"{ref} is not an end of a link between two nodes; --link needs one")
                ends.append((far[0].node, far[0].iface))
        if k8s.record(found.name):  # in the pods holding them
            by_pod = k8s.pods_of(found.name, [f"{node}:{iface}" for node, iface in dict.fromkeys(ends)])
            if len(by_pod) > 1:
                raise LabError(f"those interfaces are in pods {', '.join(sorted(by_pod))}: capture each pod's in a command of its own")
            (pod, refs), = by_pod.items()
            args = ["capture", "--lab", found.name, *refs, "-w", "-", *(["-f", bpf] if bpf else []),
                    *(["-c", str(count)] if count else []), *(["-d", str(duration)] if duration is not None else [])]
            with open(write, "wb") if write != "-" else contextlib.nullcontext(sys.stdout.buffer) as fh:
                raise typer.Exit(k8s.relay(found.name, {pod: args}, fh, by_line=False))
        taps = []
        try:
            for node, iface in dict.fromkeys(ends):
                taps.append(cap.open_tap(found.name, node, iface, bpf))
        except BaseException:
            for tap in taps:
                tap.sock.close()
            raise
        where = ", ".join(t.ref for t in taps)
        err.print(f"capturing on {where}" + (f" ({bpf})" if bpf else "") + "; Ctrl-C stops")
        if write == "-":
            written = cap.capture(taps, sys.stdout.buffer, count=count, duration=duration)
        else:
            with open(write, "wb") as fh:
                written = cap.capture(taps, fh, count=count, duration=duration)
        err.print(f"{written} packets from {where}" + ("" if write == "-" else f" in {write}"))


@app.command(name="events")
def events_cmd(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("text", "--format", help="text (a line each) or json (JSON lines)."),
    since: str | None = typer.Option(None, "--since", help="First replay the lab's event log from this long ago (e.g. 600s; 0: all of it)."),
    follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep streaming live events (--no-follow: only replay)."),
    count: int | None = typer.Option(None, "-c", "--count", min=1, help="Stop after this many events."),
    duration: float | None = typer.Option(None, "-d", "--duration", min=0.0, help="Stop after this many seconds."),
):
    """Stream what happens in a running lab, until Ctrl-C or the lab is destroyed.

    Interfaces added/removed, set up/down, carrier lost/back, addresses; processes exiting
    inside nodes; nodes and components starting and stopping; and every change nestlab makes
    (link set, schedules, node stop/start, bench cells), which --since replays from the log.

    Examples:
      nestlab events --lab manet
      nestlab events --lab manet --format json --since 0 --no-follow > changes.jsonl
    """
    from ..lab import k8s
    from ..model.units import parse_time
    from ..observe.stream import Stream

    with reported():
        found = resolve(topo, lab)
        if fmt not in ("text", "json"):
            raise LabError(f"--format must be text or json, not '{fmt}'")
        if (pods := k8s.record(found.name)):  # every pod's events, merged as they come
            args = ["events", "--lab", found.name, "--format", fmt, *(["--since", since] if since is not None else []),
                    "--follow" if follow else "--no-follow", *(["-d", str(duration)] if duration is not None else [])]
            raise typer.Exit(k8s.relay(found.name, {pod: args for pod in pods["pods"].values()}, sys.stdout.buffer, count, duration=duration))
        if not found.is_running:
            raise LabError(f"lab {found.name} is not running here; deploy it first")
        start = time.time()
        try:
            since_at = None if since is None else 0.0 if since == "0" else start - parse_time(since) / 1e6
        except ValueError as exc:
            raise LabError(f"--since: {exc}") from None
        stream = Stream(found.name, since_at)
        if follow:
            err.print(f"streaming events of lab {found.name} (Ctrl-C stops)")
        seen = 0
        try:
            events = stream.replay() if not follow else stream
            for event in events:
                if duration is not None and time.time() - start > duration:
                    break
                if fmt == "json":
                    sys.stdout.write(json.dumps(event) + "\n")
                else:
                    sys.stdout.write(_event_line(event) + "\n")
                sys.stdout.flush()
                seen += 1
                if count is not None and seen >= count:
                    break
        except (KeyboardInterrupt, BrokenPipeError):
            pass
        finally:
            stream.close()


def _event_line(event: dict) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(event["time"])) + f".{int(event['time'] % 1 * 1000):03d}"
    where = ":".join(x for x in (event.get("node"), event.get("interface")) if x)
    rest = {k: v for k, v in event.items() if k not in ("time", "lab", "node", "interface", "event") and v is not None}
    return f"{stamp}  {where or event['lab']:<24} {event['event']:<16} {json.dumps(rest) if rest else ''}".rstrip()


@app.command()
def modes(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """Every link mode (the words of a link's mode:) and node runtime (runtime:), from their registries.

    Per mode: how many endpoints it takes, the link keys it owns, the kernel features it needs and
    whether this machine has them (tried as `nestlab doctor` does).  docs/architecture.md shows how
    to add one: a module in nestlab/links or nestlab/runtimes.
    """
    from rich.table import Table

    from .. import links, runtimes
    from ..backends import probe

    with reported():
        probed = probe.kernel()
        rows = [{"mode": m.name, "endpoints": m.ends, "keys": list(m.options), "summary": m.summary,
                 "kernel": {name: {"config": f.config, "here": probed[name][0]} for name, f in m.features.items()}}
                for m in map(links.get, links.names())]
        kinds = [{"runtime": r.name, "selectable": r.selectable, "summary": r.summary} for r in map(runtimes.get, sorted(runtimes.REGISTRY))]
        if fmt == "json":
            print_json({"modes": rows, "runtimes": kinds})
            return
        table = Table("mode", "ends", "keys", "kernel (here)", "what it is", title="link modes (nestlab/links)", title_justify="left")
        for r in rows:
            kernel = " ".join(f"{f['config']} ({'yes' if f['here'] else '[red]no[/red]'})" for f in r["kernel"].values())
            table.add_row(r["mode"], str(r["endpoints"]), ", ".join(r["keys"]), kernel, r["summary"])
        out.print(table)
        table = Table("runtime", "what it is", title="node runtimes (nestlab/runtimes)", title_justify="left")
        for k in kinds:
            table.add_row(k["runtime"] + ("" if k["selectable"] else " (chosen by nestlab)"), k["summary"])
        out.print(table)


@app.command()
def demo(topo: Path = typer.Option(Path("examples/quickstart.yml"), "-t", "--topo", help="Topology to demonstrate.")):
    """Deploy a topology, measure ping and TCP between its first two hosts, destroy it."""
    from ..lab.lab import Lab
    from rich.table import Table

    from ..bench import tools

    with reported():
        lab = Lab.from_file(topo)
        notices(lab)
        hosts = [n for n in lab.nodes.values() if n.kind == "linux" and n.intfs()]
        if len(hosts) < 2:
            raise LabError(f"{topo}: the demo needs two linux nodes with links")
        a, b = hosts[:2]
        target = b.intfs()[0].ip
        started = time.perf_counter()
        with lab.deployed():
            err.print(f"deployed lab {lab.name} ({len(lab.nodes)} nodes) in {time.perf_counter() - started:.2f} s")
            rtt = tools.ping(a, target, count=10)
            tcp = tools.iperf3(a, b, target, seconds=3)
        table = Table("measurement", "value", title=f"{a.name} -> {b.name} ({target})", title_justify="left")
        table.add_row("ping received", f"{rtt['received']}/{rtt['sent']}")
        table.add_row("RTT min/avg/max", f"{rtt['rtt_min_ms']:.3f} / {rtt['rtt_avg_ms']:.3f} / {rtt['rtt_max_ms']:.3f} ms")
        table.add_row("TCP throughput (iperf3, 3 s)", f"{tcp['mbps']:.0f} Mbit/s")
        table.add_row("TCP retransmits", str(tcp["retransmits"]))
        out.print(table)
        err.print(f"lab {lab.name} destroyed; nothing left behind")


def main() -> None:
    """Run the command, then leave without tearing the interpreter down: freeing every object of a
    large lab one by one took 0.05-0.2 s after a 500-node deploy had printed everything."""
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that went away (| head)
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    main()

"""`nestlab link ...`, `run`, `node ...`: change a running lab's links and nodes, run schedules."""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import typer
from rich.table import Table

from ..engine import stop_start
from ..engine.startup import restart_cmd
from ..errors import LabError
from ..lab.fidelity import Watch, summary_line
from ..lab.lab import Lab
from ..lab.schedule import play
from ..lab.wireless import any_mobility
from ..lab.wireless import move as move_stations
from .common import KubeconfigOpt, LabOpt, NamespaceOpt, TopoOpt, err, notices, out, print_json, reported, resolve
from .lifecycle import ExecReport
from .link_options import OPTIONS, SHAPING

commands = typer.Typer()


link_app = typer.Typer(help="Change or show a running lab's links live (shaping, up/down).", no_args_is_help=True)
commands.add_typer(link_app, name="link")


def link_set(
    ctx: typer.Context,
    a: str = typer.Argument(..., help="One endpoint, NODE:IFACE."),
    b: str = typer.Argument(..., help="The other endpoint."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
    **options: object,
):
    """Change a link while the lab runs; the new setting replaces the old one in place.

    Only the options given change; "none" removes one (e.g. --delay none).

    Example: nestlab link set --lab manet n1:eth1 n2:eth1 --rate 10mbit --delay 20ms
    Example: nestlab link set --lab lte ue:eth1 enb:eth1 --direction b --trace traces/Verizon-LTE-down.trace
    Example (a lab an operator made): nestlab link set --lab nl-demo --kubeconfig kc.yaml h1:eth1 r1:eth1 --rate 10mbit
    """

    with reported():
        params = _changes(ctx.params)
        found = resolve(topo, lab, kubeconfig, namespace)
        done = found.site().link_set(found.blueprint, a, b, params, str(options["direction"]), sys.stdout.buffer)
        if done.said is None:  # the share holding the link changed it; its own line said what it did
            raise typer.Exit(done.code)
        err.print(done.said)


def _with_link_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with link set's options (cli/link_options.py) as its parameters, after ``--lab``."""
    given = list(inspect.signature(command).parameters.values())[:-1]  # all but **options
    at = [p.name for p in given].index("lab") + 1
    made = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=typer.Option(option.default, *([f"--{option.name}"] if option.kind is bool else []), help=option.help),
            annotation=option.kind if option.default is not None else option.kind | None,
        )
        for option in OPTIONS
    ]
    command.__signature__ = inspect.Signature([*given[:at], *made, *given[at:]])  # type: ignore[attr-defined]
    return command


link_app.command("set")(_with_link_options(link_set))


def _changes(given: dict) -> dict:
    """What ``link set`` changes: the shaping options given (a trace file made absolute) and --down or --up as a state."""
    params = {key: given[key] for key in SHAPING if given[key] is not None}
    if params.get("trace") not in (None, "none"):
        params["trace"] = os.path.abspath(params["trace"])
    if given["down"] and given["up"]:
        raise LabError("give --down or --up, not both")
    if given["down"] or given["up"]:
        params["state"] = "down" if given["down"] else "up"
    if not params:
        raise LabError("nothing to change: give e.g. --rate 10mbit, --delay 20ms, --down or --up")
    return params


@link_app.command("show")
def link_show(
    a: str | None = typer.Argument(None, help="One endpoint (omit to show every link)."),
    b: str | None = typer.Argument(None, help="The other endpoint."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
):
    """Show links' shaping as planned and as the kernel has it."""

    with reported():
        the_lab = resolve(topo, lab)
        shown = the_lab.links_shown(a, b)
        if fmt == "json":
            print_json(shown)
            return
        table = Table("link", "state", "sender", "planned", "kernel", title=f"links of {the_lab.name}", title_justify="left")
        for item in shown:
            for i, (sender, shape) in enumerate(item["sends"].items()):
                kernel = item["kernel"][sender]
                seen = ", ".join(f"{k}={v}" for k, v in kernel.items())
                table.add_row(
                    item["link"] if i == 0 else "",
                    item["state"] if i == 0 else "",
                    sender,
                    ", ".join(f"{k}={v}" for k, v in shape.items()) or "unshaped",
                    seen,
                )
        out.print(table)


@commands.command()
def run(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file with a schedule: section."),
    loops: int = typer.Option(1, "--loops", min=1, help="Play the schedule this many times."),
    keep: bool = typer.Option(False, "--keep", help="Leave the lab running afterwards."),
):
    """Deploy a lab and play its schedule: timed link changes on a drift-free clock, and its wireless
    stations' mobility: (docs/wireless.md).

    Each change is printed and logged (/run/nestlab/LAB/events.jsonl) with how late it was
    applied. With checks: (docs/checks.md) the schedule starts once they hold, and after each change
    the time until every check holds again is printed. Ctrl-C stops; the lab is destroyed unless --keep.

    Example schedule entry:  - {at: 2.5s, link: ["a:eth1", "b:eth1"], set: {rate: 10mbit}}
    """

    with reported():
        lab = Lab.from_file(topo)
        notices(lab)
        if not lab.topology.schedule and not lab.topology.dynamics and not any_mobility(lab):
            raise LabError(f"{topo} has no schedule:, dynamics: or wireless mobility: section; see docs/shaping.md")
        lab.deploy()
        watcher = None
        try:
            if lab.topology.checks:  # the schedule starts on a lab that works, and each change is timed until it works again
                watcher = _converged(lab)
            with Watch(lab) as fidelity:
                played = play(
                    lab,
                    loops,
                    lambda p: (
                        err.print(f"t={p.at:7.3f}s  {p.what}  (late {p.late_ms:.2f} ms, applied in {p.apply_ms:.2f} ms)"),
                        watcher.changed(p.applied, f"t={p.at:.3f}s {p.what}") if watcher else None,
                    ),
                )
            err.line(summary_line([fidelity.verdict.to_json()]) or "fidelity: ok (the emulation kept up with the schedule)")
            worst = max(p.late_ms + p.apply_ms for p in played)
            err.print(f"{len(played)} changes; worst lateness including apply time {worst:.2f} ms")
            if watcher:
                times = watcher.finish()
                settled = [t for t in times if t is not None]
                err.print(
                    f"reconvergence after {len(times)} changes with an effect: {len(settled)} settled"
                    + (f", slowest {max(settled):.2f} s" if settled else "")
                    + (f"; {watcher.no_effect} with no effect seen" if watcher.no_effect else "")
                )
        except KeyboardInterrupt:
            err.print("stopped")
        finally:
            if not keep:
                lab.destroy()


def _converged(running):
    """Wait until every check of the lab holds (or fail), saying when; returns the watcher of the changes to come."""

    from ..verify.checks import Reconvergence, run

    started = time.time()
    results = run(running, running.topology.checks, started, wait=120)
    failing = [r.title for r in results if not r.held]
    if failing:
        raise LabError(f"lab {running.name}: before the schedule, {len(failing)} checks do not hold: {'; '.join(failing)}")
    err.print(
        f"every check holds ({len(results)}), {max(r.first_held or 0 for r in results):.2f} s after the deploy; the schedule starts"
    )
    return Reconvergence(running, running.topology.checks, err.line)


node_app = typer.Typer(
    help="Stop, start, restart or move (wireless) nodes of a running lab; change or show their cgroup limits and usage.",
    no_args_is_help=True,
)
commands.add_typer(node_app, name="node")


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
        given = {
            k: v
            for k, v in dict(cpus=cpus, cpu_shares=cpu_shares, memory=memory, pids=pids, cpuset=cpuset).items()
            if v is not None
        }
        if not given:
            raise LabError("nothing to change: give e.g. --cpus 0.5 or --memory 256m")
        the_lab = resolve(topo, lab)
        if node not in the_lab.nodes:
            raise LabError(f"lab {the_lab.name} has no node {node} (nodes: {', '.join(the_lab.nodes)})")
        limits = the_lab.nodes[node].set(**given)
        err.print(f"node {node}: limits now " + ", ".join(f"{k}={v}" for k, v in limits.items()))


@node_app.command("move", context_settings={"ignore_unknown_options": True})  # -15 is a coordinate, not an option
def node_move(
    node: str = typer.Argument(..., help="A station: a node linked to a wireless medium (kind: wireless)."),
    x: float = typer.Argument(..., help="Metres east."),
    y: float = typer.Argument(..., help="Metres north."),
    z: float = typer.Argument(0.0, help="Metres up (default 0)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
):
    """Put a wireless station somewhere else, live: its medium recomputes every pair's signal, rate and
    range at once (docs/wireless.md).  Coordinates may be negative as typed.
    Example: nestlab node move --lab wl c 60 -15
    """
    with reported():
        the_lab = resolve(topo, lab)
        changed = move_stations(the_lab, {node: [x, y, z]})
        err.line(f"{node}: now at ({x:g}, {y:g}, {z:g}) m on {', '.join(changed)}")


NodesArg = typer.Argument(..., help="Nodes (a node's components go with it), or NODE/COMPONENT alone.")
ExecOpt = typer.Option(False, "--exec", help="Also run the nodes' exec: commands again (their routes and addresses are kept).")


@node_app.command("stop")
def node_stop(nodes: list[str] = NodesArg, topo: Path | None = TopoOpt, lab: str | None = LabOpt):
    """Stop nodes of a running lab: their processes end (cmd, FRR, whatever runs in them) and their
    interfaces go down, so their peers see carrier loss; namespaces, files, addresses and the routes
    they were given are kept for `nestlab node start`.  Example: nestlab node stop --lab ring r2
    """
    power("stop", nodes, topo, lab)


@node_app.command("start")
def node_start(nodes: list[str] = NodesArg, topo: Path | None = TopoOpt, lab: str | None = LabOpt, exec_too: bool = ExecOpt):
    """Start stopped nodes: interfaces, addresses and routes back, then their kind's daemons (FRR reads
    its frr.conf, as saved if it was), forwarded ports and cmd.  Example: nestlab node start --lab ring r2
    """
    power("start", nodes, topo, lab, exec_too)


@node_app.command("restart")
def node_restart(
    nodes: list[str] = NodesArg,
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    exec_too: bool = ExecOpt,
    cmd_only: bool = typer.Option(
        False, "--cmd", help="Restart only the node's cmd: (SIGTERM to its session, SIGKILL after 5 s), links untouched."
    ),
):
    """Stop and start nodes (a running node is stopped first).  With --cmd, only the main process
    restarts, e.g. after editing a file it reads; it appends to /run/nestlab/LAB/nodes/NODE/cmd.log.
    Example: nestlab node restart --lab web srv --cmd
    """
    if not cmd_only:
        power("restart", nodes, topo, lab, exec_too)
        return

    with reported():
        the_lab = resolve(topo, lab)
        for node in nodes:
            err.line(f"{node}: cmd restarted (pid {restart_cmd(the_lab, node)})")


def power(action: str, refs: list[str], topo: Path | None, lab: str | None, exec_too: bool = False) -> None:
    """Stop, start or restart nodes where they run: here, or by each holding share's nestlab."""

    with reported():
        the_lab = resolve(topo, lab)
        stop_start.chosen(the_lab, refs)  # every name checked before anything stops
        execs = ExecReport()
        done = the_lab.site().power(the_lab.blueprint, action, refs, exec_too, sys.stdout.buffer, execs.show)
        if done.said is None:  # each holding share's nestlab said what it did
            raise typer.Exit(done.code)
        execs.summary(the_lab.name)
        err.line(done.said)


def _listed(nodes: list[str], shown: int = 10) -> str:
    return ", ".join(nodes[:shown]) + (f" and {len(nodes) - shown} more" if len(nodes) > shown else "")


@node_app.command("show")
def node_show(
    node: str | None = typer.Argument(None, help="A node or component (omit for every node with a cgroup)."),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
):
    """Show CPU seconds, memory in use and limits per node and component, read from their cgroups."""

    with reported():
        the_lab = resolve(topo, lab)
        chosen = [n for name, n in the_lab.nodes.items() if (node is None or name == node) and n.obj.cgroup]
        if node is not None and not chosen:
            raise LabError(f"lab {the_lab.name} has no node {node} with a cgroup")
        rows = [{"node": n.name, **n.usage(), "limits": n.limits()} for n in chosen]
        if fmt == "json":
            print_json(rows)
            return
        table = Table(
            "node",
            "cpu s",
            "memory MiB",
            "cpus limit",
            "memory limit",
            "pids limit",
            title=f"lab {the_lab.name}",
            title_justify="left",
        )
        for row in rows:
            lim = row["limits"]
            table.add_row(
                row["node"],
                f"{row.get('cpu_s', 0):.2f}",
                f"{row.get('memory_bytes', 0) / 2**20:.1f}",
                lim.get("cpus", ""),
                lim.get("memory", ""),
                lim.get("pids", ""),
            )
        out.print(table)

"""`nestlab deploy`, `destroy`, `save`, `cleanup`, `demo`: a lab's life."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import LabError
from .common import LabOpt, TopoOpt, err, here, notices, out, print_json, progress_bar, reported, resolve, split_list
from .servers import ServersOpt
from .tables import show

if TYPE_CHECKING:
    from ..lab.lab import Lab
    from ..model.overrides import Overrides
    from ..plan.diff import Step
    from ..plan.partition import Partition
    from ..sites.seam import Deployed, Site

commands = typer.Typer()


@commands.command()
def deploy(
    topo: Path = typer.Option(
        ..., "-t", "--topo", help="Topology file (YAML), or a Kathará lab: its folder or lab.conf (docs/compat.md)."
    ),
    reconfigure: bool = typer.Option(False, "--reconfigure", help="Destroy the running lab first, then deploy from scratch."),
    fmt: str = typer.Option(
        "summary", "--format", help="Output: summary (the table too for small labs), table or json (what inspect says)."
    ),
    table: bool = typer.Option(False, "--table", help="Print the full table of nodes and interfaces, whatever the lab's size."),
    vars_files: list[Path] = typer.Option(
        [],
        "--vars",
        help="Variables (YAML/JSON) for a Go-template topology, as containerlab's --vars; "
        "repeat to merge. Default: NAME_vars.yml beside the file.",
    ),
    servers: Path | None = ServersOpt,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what deploy would create, recreate (and why), reshape and remove; change nothing."
    ),
    name: str | None = typer.Option(
        None, "--name", help="Deploy the file under this lab name instead of its name: (as containerlab's)."
    ),
    node_filter: list[str] = typer.Option(
        [], "--node-filter", help="Only these nodes and the links between them (repeatable or comma-separated)."
    ),
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
    from ..model.overrides import Overrides

    overrides = Overrides(name=name, nodes=frozenset(split_list(node_filter)))
    deploy_with(DeployRequest(topo, overrides, tuple(vars_files), servers, reconfigure, dry_run, fmt, table))


@dataclass(frozen=True)
class DeployRequest:
    """What ``nestlab deploy`` is asked, its flags read (containerlab's and Kathará's deploy make one too)."""

    topo: Path
    overrides: Overrides
    vars_files: tuple[Path, ...] = ()
    servers: Path | None = None  # --servers FILE: an inventory whose servers replace the file's
    reconfigure: bool = False
    dry_run: bool = False
    fmt: str = "summary"
    table: bool = False


def deploy_with(request: DeployRequest) -> None:
    """Load the lab, have it deployed where it goes (or say what a deploy would change), say what was made."""
    from .. import sites
    from ..lab.lab import Lab

    with reported():
        lab = Lab.from_file(request.topo, request.vars_files, request.servers, request.overrides)
        notices(lab)
        if request.reconfigure and not request.dry_run:
            lab.destroy()
        site = sites.chosen(lab.blueprint)  # after a --reconfigure's destroy: its record as it is now
        if not request.dry_run:
            started, execs = time.perf_counter(), ExecReport()
            with progress_bar("deploying") as progress:
                done = lab.deploy(progress, execs.show, site)
            _deployed(lab, site, done, execs, request, started)
        else:
            _previewed(lab, site.preview(lab.blueprint), request.fmt)


def _deployed(lab_obj: Lab, site: Site, done: Deployed, execs: ExecReport, request: DeployRequest, started: float) -> None:
    """Say what a deploy made: where each node went (on servers), or what changed here, the summary and table."""
    for note in done.notes:
        err.line(f"note {note}")
    if done.partition is not None:  # on servers: where each node went
        _placed(lab_obj, done.partition, started)
        return
    took = time.perf_counter() - started
    if not done.changes:
        err.line(f"lab {lab_obj.name} is already running as described; nothing to change")
    else:
        err.line(f"lab {lab_obj.name}: {done.changes.summary()} in {took:.2f} s")
    execs.summary(lab_obj.name)
    if request.fmt == "summary":
        out.line(_summary(lab_obj))
    if request.fmt != "summary" or request.table or len(lab_obj.plan.nodes) <= SMALL_LAB:
        show(site.inspect(lab_obj.blueprint), "table" if request.table or request.fmt == "summary" else request.fmt)


SMALL_LAB = 40  # nodes: up to this many, deploy prints the whole table


def _previewed(lab_obj: Lab, found: list[Step], fmt: str) -> None:
    """What a deploy would change, object by object, as the lab's site sees the running lab."""
    if fmt == "json":
        print_json({"lab": lab_obj.name, "changes": [step.to_json() for step in found]})
        return
    counted = Counter((step.action, step.what) for step in found)
    summary = ", ".join(f"{n} {what}{'s' if n > 1 else ''} to {action}" for (action, what), n in counted.items())
    err.line(f"dry run: lab {lab_obj.name}: {summary or 'nothing to change'}; nothing was changed")
    for step in found[:SHOWN] if len(found) > SHOWN else found:
        out.line(f"{step.action:9s} {step.what:10s} {step.name}" + (f": {step.why}" if step.why else ""))
    if len(found) > SHOWN:
        out.line(f"... and {len(found) - SHOWN} more (--format json lists every one)")


SHOWN = 60  # dry-run lines before the rest is only counted


@commands.command()
def validate(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file (YAML), or a Kathará lab (its folder or lab.conf)."),
    vars_files: list[Path] = typer.Option([], "--vars", help="Variables for a Go-template topology (as deploy's --vars)."),
    servers: Path | None = ServersOpt,
):
    """Check a topology file completely: every check deploy makes before it changes anything (schema,
    names, addresses, links, placement on servers, what this machine must have), and nothing is made.

    Exit 0: the file deploys as it is; 2: the file's problems, each with file:line:col;
    1: this machine lacks something the lab needs (said with how to get it).
    Example: nestlab validate -t examples/quickstart.yml
    """
    from ..lab.lab import Lab
    from ..sites import chosen

    with reported():
        lab = Lab.from_file(topo, vars_files, servers)
        notices(lab)
        plan = chosen(lab.blueprint).check(lab.blueprint).plan
        err.line(
            f"{topo}: lab {lab.name} is valid ({len(plan.nodes)} namespaces, {len(plan.links) + len(plan.attachments)} links)"
        )


def _placed(lab_obj: Lab, partition: Partition, started: float) -> None:
    """Say where each node of a lab deployed on servers went."""

    counts = Counter(partition.placement.server(n) for n in lab_obj.plan.nodes)
    tunnels = sum(len(s.stitched) for s in partition.shares.values()) // 2
    err.line(
        f"lab {lab_obj.name}: {len(lab_obj.plan.nodes)} nodes on {len(lab_obj.topology.servers)} servers "
        f"({', '.join(f'{s}: {counts.get(s, 0)}' for s in sorted(lab_obj.topology.servers))}), "
        f"{tunnels} VXLAN tunnels (MTU {partition.mtu}) in {time.perf_counter() - started:.2f} s"
    )
    out.line(
        f"next: nestlab inspect --lab {lab_obj.name};  nestlab exec --lab {lab_obj.name} NODE -- CMD (runs on the node's server);  "
        f"nestlab destroy --lab {lab_obj.name}"
    )


def _summary(lab_obj: Lab) -> str:
    """What the lab holds, counted by kind and mode, and where to look next."""

    plan = lab_obj.plan
    kinds = Counter(o.kind if o.runtime == "namespace" else f"{o.kind} [{o.runtime}]" for o in plan.nodes.values())
    modes = Counter(x.mode for x in plan.links.values()) + Counter(x.mode for x in plan.attachments.values())
    counted = lambda c: ", ".join(f"{n} {k}" for k, n in c.most_common())  # noqa: E731
    return (
        f"lab {lab_obj.name}: {len(plan.nodes)} namespaces ({counted(kinds)}); "
        f"{len(plan.links) + len(plan.attachments)} links ({counted(modes) or 'none'})\n"
        f"next: nestlab inspect --lab {lab_obj.name} [--node NAME | --filter 'h1*'];  nestlab graph --lab {lab_obj.name} --serve;  "
        f"nestlab exec --lab {lab_obj.name} NODE -- CMD;  nestlab destroy --lab {lab_obj.name}"
    )


class ExecReport:
    """A node's ``exec`` commands as they finish: a header, the output indented below it (so no line of it
    reads as nestlab's own), a cause for the kernel's terse refusals, and the failures counted at the end."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def show(self, node: str, command: str, code: int, output: str) -> None:
        colour = "green" if code == 0 else "yellow"
        err.print(f"[{colour}]exec[/{colour}] {node}: {command} (exit {code})", soft_wrap=True)
        for line in output.rstrip().splitlines():
            err.print(f"  │ {line}", markup=False, soft_wrap=True, highlight=False)
        if code:
            self.failed.append(node)
            cause = _exec_cause(command, output)
            if cause:
                err.print(f"  [yellow]→[/yellow] {cause}", soft_wrap=True)

    def summary(self, lab: str) -> None:
        if self.failed:
            nodes = sorted(set(self.failed))
            err.print(
                f"[yellow]lab {lab}: {len(self.failed)} exec command{'s' if len(self.failed) > 1 else ''} failed[/yellow] "
                f"(on {', '.join(nodes[:10])}{', ...' if len(nodes) > 10 else ''}); the lab is up, their output is above",
                soft_wrap=True,
            )


def _exec_cause(command: str, output: str) -> str | None:
    """Why the kernel refused an ``ip link add ... type KIND``: this kernel lacks KIND."""
    import re

    found = re.search(r"\btype\s+(\S+)", command)
    if "Unknown device type" in output and found:
        return f"this kernel has no '{found.group(1)}' interfaces (its module is missing); `nestlab doctor` lists what it has"
    return None


@commands.command()
def destroy(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    folder_too: bool = typer.Option(
        False, "--cleanup", help="Also remove the lab directory clab-LAB/ (inventories), which destroy otherwise keeps."
    ),
):
    """Remove a lab: its processes, namespaces, links and state (on every server, for a lab split
    across servers), its names (/etc/hosts, ip netns, ssh config) and management addresses.
    Nothing else is touched."""
    from .. import sites
    from ..engine import state
    from ..model.labname import name_of

    with reported():
        if topo and lab:
            raise LabError("give either -t FILE or --lab NAME, not both")
        name = name_of(topo) if topo else lab or resolve(None, None).name  # the file's name alone: it need not check
        site = sites.of(name)
        with state.locked(name):
            removed = site.remove(folder_too)
        err.line(site.removal(removed))


@commands.command()
def save(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    to: Path | None = typer.Option(
        None, "--to", help="Also write DIR/NODE/frr.conf (e.g. beside the topology, to deploy from next time)."
    ),
    node_filter: list[str] = typer.Option([], "--node-filter", help="Only these routers (repeatable or comma-separated)."),
):
    """Save each router's running configuration (like clab save).

    Every kind: frr node's `show running-config` replaces its frr.conf in the lab's folder
    (what `vtysh -c "write memory"` in the node would do), and with --to goes to DIR/NODE/frr.conf.
    Example: nestlab save --lab ospf --to saved/
    """
    with reported():
        only = set(split_list(node_filter)) or None
        written = resolve(topo, lab).save(to, only)
        if not written:
            raise LabError("this lab has no router (kind: frr) to save")
        for node, path in written.items():
            err.line(f"{node}: {path}")


@commands.command(name="cleanup")
def cleanup_cmd(
    name: str | None = typer.Argument(None, help="Lab to clean up."),
    all_labs: bool = typer.Option(False, "--all", help="Every nestlab lab on this machine, running or not."),
):
    """Remove what a lab left behind after its process died (e.g. a deploy killed half-way).

    Only objects carrying nestlab's marker are removed: namespaces named
    nestlab.LAB.*, mounts and state under /run/nestlab/LAB, and processes
    running inside those namespaces.
    """
    from .. import sites
    from ..engine import state

    with reported():
        if bool(name) == all_labs:
            raise LabError("name one lab, or pass --all")
        for lab in state.labs() if all_labs else [name]:
            with state.locked(lab):
                removed = sites.remove(lab)
            err.print(f"lab {lab}: removed {removed} namespaces")


@commands.command()
def demo(topo: Path = typer.Option(Path("examples/quickstart.yml"), "-t", "--topo", help="Topology to demonstrate.")):
    """Deploy a topology, measure ping and TCP between its first two hosts, destroy it."""
    from rich.table import Table

    from ..bench import tools
    from ..lab.lab import Lab
    from ..registry import KINDS

    with reported():
        lab = here(Lab.from_file(topo))
        notices(lab)
        hosts = [n for n in lab.nodes.values() if KINDS.get(n.kind).endpoint and n.intfs()]
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
        from ..engine import cleanup

        if left := cleanup.left(lab.name):
            raise LabError(f"lab {lab.name} destroyed, but {len(left)} of its objects are left: {', '.join(left[:5])}")
        err.print(f"lab {lab.name} destroyed; nothing left behind (namespaces, mounts, processes, cgroups, interfaces checked)")

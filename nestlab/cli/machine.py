"""`nestlab image ...`, `doctor`, `modes`, `version`, `mobility ...`: this machine, its images and what it offers."""

from __future__ import annotations

import shutil
import sys
import time

import typer
import yaml
from rich.table import Table

from .. import __version__
from ..backends.kernel import probe, rootfs
from ..backends.services import mpt_daemon
from ..engine import handout
from ..errors import LabError
from ..model.visibility import random_waypoint
from ..names import is_plain
from ..registry import KINDS, LINK_MODES, RUNTIMES
from .common import err, out, print_json, reported

commands = typer.Typer()


image_app = typer.Typer(help="Root filesystems for image: nodes (runc).", no_args_is_help=True)
commands.add_typer(image_app, name="image")


@image_app.command("build")
def image_build(
    name: str = typer.Argument(..., help="Image name; nodes use it as image: NAME."),
    debian: str = typer.Option("bookworm", "--debian", help="Debian suite to bootstrap."),
    packages: str = typer.Option(
        "iproute2,iputils-ping", "--packages", help="Comma-separated extra packages, e.g. iperf3,iproute2."
    ),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian archive to fetch from."),
):
    """Build a Debian base image with debootstrap (minbase + --packages) into /var/lib/nestlab/images/NAME.

    Example: nestlab image build radio --debian bookworm --packages iperf3,iproute2
    """

    with reported():
        if not is_plain(name):
            raise LabError(f"image name '{name}' may use only letters, digits, '.', '-' and '_'")
        started = time.perf_counter()
        with err.status(f"debootstrap {debian} for image {name}") as status:
            path = rootfs.build(
                name,
                debian,
                [p for p in packages.split(",") if p],
                mirror,
                lambda line: status.update(f"debootstrap: {line[:100]}"),
            )
        err.print(f"image {name}: {path} in {time.perf_counter() - started:.0f} s; use it as image: {name}")


@image_app.command("ls")
def image_ls(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """List images made by nestlab image build."""

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

    with reported():
        rootfs.remove(name)
        err.print(f"image {name} removed")


@commands.command()
def version():
    """Print nestlab's version."""

    out.line(__version__)


mobility_app = typer.Typer(help="Generate visibility graphs for dynamics: (MANETs).", no_args_is_help=True)
commands.add_typer(mobility_app, name="mobility")


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

    with reported():
        try:
            width, height = (float(x) for x in area.lower().split("x"))
            low, high = (float(x) for x in speed.split("-"))
        except ValueError:
            raise LabError("--area is WIDTHxHEIGHT (e.g. 1000x1000) and --speed MIN-MAX (e.g. 1-20)") from None
        graph = random_waypoint(nodes, width, height, radio_range, duration, step, (low, high), pause, seed)
        sys.stdout.write(yaml.safe_dump(graph, default_flow_style=None, sort_keys=False))


@commands.command()
def doctor(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """What this kernel and machine support: attachment modes, qdiscs, MPTCP, cgroups, OVS, tools.

    Each kernel feature is tried in a throw-away namespace; a missing one names
    the kernel option that provides it, a missing tool the Debian package.
    A deploy that needs something listed as missing stops before creating anything.
    """

    with reported():
        bpf, said = mpt_daemon.datapath()
        machine = handout.machine()
        features = probe.features(machine) + [
            probe.Feature(name, kind.name, ok, detail, fix)
            for kind in KINDS.values()
            for name, ok, detail, fix in kind.doctor(machine)
        ]
        features.append(
            probe.Feature(
                "mpt-bpf", "multipath", bpf, said, "" if bpf else "Linux 6.6+ with BPF; the daemon carries the tunnel meanwhile"
            )
        )
        if fmt == "json":
            print_json([f.to_json() for f in features])
            return
        table = Table("group", "feature", "", "detail", "fix", title="nestlab doctor", title_justify="left")
        for f in features:
            table.add_row(f.group, f.name, "[green]yes[/green]" if f.ok else "[red]no[/red]", f.detail, f.fix)
        out.print(table)


@commands.command()
def modes(fmt: str = typer.Option("table", "--format", help="Output: table or json.")):
    """Every node kind (kind:), link mode (a link's mode:) and node runtime (runtime:), from their registries.

    Per kind: the words a file may use for it, the node keys it owns and the programs it needs here.
    Per mode: how many endpoints it takes, the link keys it owns, the kernel features it needs and
    whether this machine has them (tried as `nestlab doctor` does).  docs/architecture.md shows how
    to add one: a module in nestlab/kinds, nestlab/links or nestlab/runtimes.
    """

    with reported():
        probed = probe.kernel()
        kind_rows = [
            {
                "kind": k.name,
                "aliases": list(k.aliases),
                "keys": list(k.options),
                "summary": k.summary,
                "tools": {tool: bool(shutil.which(tool)) for tool in k.tools},
            }
            for k in KINDS.values()
        ]
        mode_rows = [
            {
                "mode": m.name,
                "endpoints": m.ends,
                "keys": list(m.options),
                "summary": m.summary,
                "kernel": {name: {"config": f.config, "here": probed[name][0]} for name, f in m.features.items()},
            }
            for m in LINK_MODES.values()
        ]
        runtime_rows = [{"runtime": r.name, "selectable": r.selectable, "summary": r.summary} for r in RUNTIMES.values()]
        if fmt == "json":
            print_json({"kinds": kind_rows, "modes": mode_rows, "runtimes": runtime_rows})
            return
        table = Table("kind", "keys", "needs (here)", "what it is", title="node kinds (nestlab/kinds)", title_justify="left")
        for k in kind_rows:
            tools = " ".join(f"{t} ({'yes' if here else '[red]no[/red]'})" for t, here in k["tools"].items())
            table.add_row(
                k["kind"] + (f" ({', '.join(k['aliases'])})" if k["aliases"] else ""), ", ".join(k["keys"]), tools, k["summary"]
            )
        out.print(table)
        table = Table(
            "mode", "ends", "keys", "kernel (here)", "what it is", title="link modes (nestlab/links)", title_justify="left"
        )
        for r in mode_rows:
            kernel = " ".join(f"{f['config']} ({'yes' if f['here'] else '[red]no[/red]'})" for f in r["kernel"].values())
            table.add_row(r["mode"], str(r["endpoints"]), ", ".join(r["keys"]), kernel, r["summary"])
        out.print(table)
        table = Table("runtime", "what it is", title="node runtimes (nestlab/runtimes)", title_justify="left")
        for k in runtime_rows:
            table.add_row(k["runtime"] + ("" if k["selectable"] else " (chosen by nestlab)"), k["summary"])
        out.print(table)

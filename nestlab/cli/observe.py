"""`nestlab graph`, `capture`, `events`: see a lab (docs/observe.md); `fidelity-sample`, what a fidelity Watch runs on each server or pod."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from ..backends.kernel import files
from ..errors import LabError
from ..lab.fidelity import Watch
from ..lab.fidelity_shares import READY
from ..lab.lab import Lab
from ..model.endpoint import Endpoint
from ..observe import graph as exports
from ..observe import live
from .common import KubeconfigOpt, LabOpt, NamespaceOpt, TopoOpt, err, reported, resolve

commands = typer.Typer()


@commands.command()
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
    click a node for its interfaces, a link to set it down or up.  The page answers only
    requests that carry the token in the address it prints.

    Examples:
      nestlab graph -t examples/twohosts.yml --format dot | dot -Tsvg > lab.svg
      nestlab graph --lab quickstart --format drawio -o lab.drawio
      nestlab graph --lab quickstart --serve --port 8080     # then open the address it prints (with its token)
    """

    with reported():
        found = resolve(topo, lab)
        if serve:
            if not found.is_running():
                raise LabError(f"lab {found.name} is not running; deploy it first (exports work without: drop --serve)")
            try:
                live.serve(
                    Lab.running(found.name),
                    host,
                    port,
                    lambda url: err.print(f"live view of lab {found.name} at {url} (Ctrl-C stops it)"),
                )
            except KeyboardInterrupt:
                pass
            except OSError as exc:
                raise LabError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            return
        if fmt not in exports.EXPORTS:
            raise LabError(f"--format must be one of {', '.join(exports.EXPORTS)}, not '{fmt}'")
        text = exports.EXPORTS[fmt](found.plan)
        if output:
            files.write(output, text, 0o644)  # through no link another user planted
            err.print(f"wrote {output}")
        else:
            sys.stdout.write(text)


@commands.command(no_args_is_help=True)
def capture(
    interfaces: list[str] = typer.Argument(
        ..., help="NODE:IF to capture on (a node, component, switch or emulated host); several go into one file."
    ),
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    write: str | None = typer.Option(None, "-w", "--write", help="pcapng file to write, or - for standard output (a pipe)."),
    bpf: str | None = typer.Option(
        None, "-f", "--filter", help='Capture filter in tcpdump syntax, e.g. "icmp" or "tcp port 5201".'
    ),
    count: int | None = typer.Option(None, "-c", "--count", min=1, help="Stop after this many packets."),
    duration: float | None = typer.Option(None, "-d", "--duration", min=0.0, help="Stop after this many seconds."),
    whole_link: bool = typer.Option(False, "--link", help="Also capture the far end of each interface's link."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
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

    with reported():
        found = resolve(topo, lab, kubeconfig, namespace)
        if write is None:
            raise LabError("say where the packets go: -w FILE.pcapng, or -w - to pipe them (| tshark -r -, | wireshark -k -i -)")
        ends = []
        for ref in interfaces:
            end = Endpoint(ref)
            if not end.whole:
                raise LabError(f"'{ref}' is not NODE:INTERFACE (e.g. h1:eth1)")
            ends.append(end.key)
            if whole_link:
                far = [x.b if x.a.ref == ref else x.a for x in found.plan.links.values() if ref in (x.a.ref, x.b.ref)]
                if not far:
                    raise LabError(f"{ref} is not an end of a link between two nodes; --link needs one")
                ends.append((far[0].node, far[0].iface))
        done = found.site().capture(list(dict.fromkeys(ends)), write, bpf, count, duration, err.print)
        if done.said is not None:
            err.print(done.said)
        else:  # the share holding them captured, its pcapng relayed here
            raise typer.Exit(done.code)


@commands.command(name="events")
def events_cmd(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    fmt: str = typer.Option("text", "--format", help="text (a line each) or json (JSON lines)."),
    since: str | None = typer.Option(
        None, "--since", help="First replay the lab's event log from this long ago (e.g. 600s; 0: all of it)."
    ),
    follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep streaming live events (--no-follow: only replay)."),
    count: int | None = typer.Option(None, "-c", "--count", min=1, help="Stop after this many events."),
    duration: float | None = typer.Option(None, "-d", "--duration", min=0.0, help="Stop after this many seconds."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
):
    """Stream what happens in a running lab, until Ctrl-C or the lab is destroyed.

    Interfaces added/removed, set up/down, carrier lost/back, addresses; processes exiting
    inside nodes; nodes and components starting and stopping; and every change nestlab makes
    (link set, schedules, node stop/start, bench cells), which --since replays from the log.

    Examples:
      nestlab events --lab manet
      nestlab events --lab manet --format json --since 0 --no-follow > changes.jsonl
    """

    with reported():
        found = resolve(topo, lab, kubeconfig, namespace)
        if fmt not in ("text", "json"):
            raise LabError(f"--format must be text or json, not '{fmt}'")
        done = found.site().events(sys.stdout.buffer, fmt, since, follow, count, duration, err.print)
        if done.code:  # every share's events, merged as they came
            raise typer.Exit(done.code)


@commands.command(name="fidelity-sample", hidden=True)
def fidelity_sample(
    lab: str = typer.Option(..., "--lab", help="The lab (its share on this machine)."),
    period: float = typer.Option(0.05, "--period", min=0.001, help="Seconds between samples."),
):
    """Sample the lab here (docs/fidelity.md) until a line or the end of standard input; then print the verdict
    as one JSON line.  Says `sampling` once it samples.  What a Watch on another machine runs on each share."""

    with reported():
        found = resolve(None, lab)
        with Watch(found, period) as watch:
            print(READY, flush=True)
            sys.stdin.readline()
        print(json.dumps(watch.verdict.to_json()), flush=True)

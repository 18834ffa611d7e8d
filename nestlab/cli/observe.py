"""`nestlab graph`, `capture`, `events`: see a lab (docs/observe.md); `fidelity-sample`, what a fidelity Watch runs on each server or pod."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer

from ..errors import LabError
from .common import LabOpt, TopoOpt, err, reported, resolve

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
            output.write_text(text)
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

    from ..lab import where
    from ..model.endpoint import Endpoint
    from ..observe import capture as cap

    with reported():
        found = resolve(topo, lab)
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
        site = where.of(found.name)
        if not site.here:  # the share holding them captures, its pcapng relayed here
            refs = [f"{node}:{iface}" for node, iface in dict.fromkeys(ends)]
            share = site.one_share(refs, "capture each share's in a command of its own")
            args = [
                "capture",
                "--lab",
                found.name,
                *refs,
                "-w",
                "-",
                *(["-f", bpf] if bpf else []),
                *(["-c", str(count)] if count else []),
                *(["-d", str(duration)] if duration is not None else []),
            ]
            with open(write, "wb") if write != "-" else contextlib.nullcontext(sys.stdout.buffer) as fh:
                raise typer.Exit(site.forward({share: args}, fh, by_line=False))
        taps = []
        try:
            for node, iface in dict.fromkeys(ends):
                taps.append(cap.open_tap(found.name, node, iface, bpf))
        except BaseException:
            for tap in taps:
                tap.sock.close()
            raise
        tapped = ", ".join(t.ref for t in taps)
        err.print(f"capturing on {tapped}" + (f" ({bpf})" if bpf else "") + "; Ctrl-C stops")
        if write == "-":
            written = cap.capture(taps, sys.stdout.buffer, count=count, duration=duration)
        else:
            with open(write, "wb") as fh:
                written = cap.capture(taps, fh, count=count, duration=duration)
        err.print(f"{written} packets from {tapped}" + ("" if write == "-" else f" in {write}"))


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
):
    """Stream what happens in a running lab, until Ctrl-C or the lab is destroyed.

    Interfaces added/removed, set up/down, carrier lost/back, addresses; processes exiting
    inside nodes; nodes and components starting and stopping; and every change nestlab makes
    (link set, schedules, node stop/start, bench cells), which --since replays from the log.

    Examples:
      nestlab events --lab manet
      nestlab events --lab manet --format json --since 0 --no-follow > changes.jsonl
    """
    from ..lab import where
    from ..model.units import parse_time
    from ..observe.stream import Stream

    with reported():
        found = resolve(topo, lab)
        if fmt not in ("text", "json"):
            raise LabError(f"--format must be text or json, not '{fmt}'")
        site = where.of(found.name)
        if not site.here:  # every share's events, merged as they come
            args = [
                "events",
                "--lab",
                found.name,
                "--format",
                fmt,
                *(["--since", since] if since is not None else []),
                "--follow" if follow else "--no-follow",
                *(["-d", str(duration)] if duration is not None else []),
                *(["-c", str(count)] if count is not None else []),
            ]
            raise typer.Exit(site.forward({share: args for share in site.shares()}, sys.stdout.buffer, count, duration=duration))
        if not found.is_running:
            raise LabError(f"lab {found.name} is not running here; deploy it first")
        start = time.time()
        try:
            since_at = None if since is None else 0.0 if since == "0" else start - parse_time(since) / 1e6
        except ValueError as exc:
            raise LabError(f"--since: {exc}") from None
        stream = Stream(found.name, since_at, None if duration is None else time.monotonic() + duration)
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


@commands.command(name="fidelity-sample", hidden=True)
def fidelity_sample(
    lab: str = typer.Option(..., "--lab", help="The lab (its share on this machine)."),
    period: float = typer.Option(0.05, "--period", min=0.001, help="Seconds between samples."),
):
    """Sample the lab here (docs/fidelity.md) until a line or the end of standard input; then print the verdict
    as one JSON line.  Says `sampling` once it samples.  What a Watch on another machine runs on each share."""
    from ..lab.fidelity import Watch
    from ..lab.fidelity_shares import READY

    with reported():
        found = resolve(None, lab)
        with Watch(found, period) as watch:
            print(READY, flush=True)
            sys.stdin.readline()
        print(json.dumps(watch.verdict.to_json()), flush=True)


def _event_line(event: dict) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(event["time"])) + f".{int(event['time'] % 1 * 1000):03d}"
    where = ":".join(x for x in (event.get("node"), event.get("interface")) if x)
    rest = {k: v for k, v in event.items() if k not in ("time", "lab", "node", "interface", "event") and v is not None}
    return f"{stamp}  {where or event['lab']:<24} {event['event']:<16} {json.dumps(rest) if rest else ''}".rstrip()

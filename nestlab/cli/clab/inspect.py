"""containerlab's inspect (its table, JSON, CSV, --details, --wide), inspect interfaces, and events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from ...engine import state
from ...errors import LabError
from ...model.units import parse_time
from ...observe import clab_view
from ...observe.clab_events import Feed
from ..common import out, reported
from .base import NameOpt, TopoOpt, clab_app, lab_name

inspect_app = typer.Typer(invoke_without_command=True, help="The lab's containers (containerlab inspect).")
clab_app.add_typer(inspect_app, name="inspect")


@inspect_app.callback()
def inspect(
    ctx: typer.Context,
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    every: bool = typer.Option(False, "-a", "--all", help="Every lab."),
    fmt: str = typer.Option("table", "-f", "--format", help="table, json or csv."),
    details: bool = typer.Option(False, "--details", help="Every container's details, as Docker's (JSON, grouped by lab)."),
    wide: bool = typer.Option(False, "-w", "--wide", help="The table with the owner and one line per container."),
):
    """The lab's containers, as containerlab's inspect prints them (json: {lab: [container, ...]})."""

    if ctx.invoked_subcommand is not None:
        return
    with reported():
        labs = state.labs() if every else [lab_name(topo, name)]
        grouped = {lab: clab_view.containers(lab) for lab in sorted(labs)}
        if details:
            out.line(json.dumps({lab: [_details(c) for c in found] for lab, found in grouped.items()}, indent=2))
            return
        if fmt == "json":
            hidden = ("labels", "node", "full_id", "gateways")
            out.line(
                json.dumps(
                    {lab: [{k: v for k, v in c.items() if k not in hidden} for c in found] for lab, found in grouped.items()},
                    indent=2,
                )
            )
            return
        if fmt not in ("table", "csv"):
            raise LabError(f"--format must be table, json or csv, not '{fmt}'")
        rows = [c for found in grouped.values() for c in found]
        if fmt == "csv":
            fields = ("lab_name", "name", "kind", "image", "state", "ipv4_address")
            out.line("\n".join(",".join(r) for r in [fields, *([c[f] for f in fields] for c in rows)]))
            return

        sep = " " if wide else "\n"
        table = Table(*(["Owner"] if wide else []), "Lab Name", "Name", "Kind/Image", "State", "IPv4/6 Address")
        for c in rows:
            address = f"{c['ipv4_address'].split('/')[0]}{sep}{c['ipv6_address'].split('/')[0]}"
            table.add_row(
                *([c["owner"]] if wide else []),
                c["lab_name"],
                c["name"],
                f"{c['kind']}{sep}{c['image']}" if c["image"] else c["kind"],
                c["state"],
                address,
            )
        out.print(table)


def _details(c: dict) -> dict:
    """A container as containerlab's --details prints it (its runtime's GenericContainer)."""
    v4, _, v4len = c["ipv4_address"].partition("/")
    v6, _, v6len = c["ipv6_address"].partition("/")
    return {
        "Names": [c["name"]],
        "ID": c["full_id"],
        "ShortID": c["container_id"],
        "Image": c["image"],
        "State": c["state"],
        "Status": c["status"],
        "Labels": c["labels"],
        "Pid": 0,
        "NetworkName": "clab" if v4 != "N/A" else "",
        "NetworkSettings": {
            "IPv4addr": "" if v4 == "N/A" else v4,
            "IPv4pLen": int(v4len or 0),
            "IPv4Gw": c["gateways"][0].split("/")[0],
            "IPv6addr": "" if v6 == "N/A" else v6,
            "IPv6pLen": int(v6len or 0),
            "IPv6Gw": c["gateways"][1].split("/")[0],
        },
        "Mounts": [],
        "Ports": [],
    }


@inspect_app.command("interfaces")
def interfaces(
    topo: Path | None = TopoOpt,
    name: str | None = NameOpt,
    fmt: str = typer.Option("table", "-f", "--format", help="table or json."),
    node: str | None = typer.Option(None, "-n", "--node", help="Only this node (its name or clab-LAB-NODE)."),
):
    """Each container's interfaces (containerlab inspect interfaces): name, alias, MAC, index, MTU, type, state."""

    with reported():
        if fmt not in ("table", "json"):
            raise LabError(f"output format {fmt} is not supported, use 'table' or 'json'")
        found = clab_view.interfaces(lab_name(topo, name), node)
        if fmt == "json":
            out.line(json.dumps(found, indent=2))
            return

        table = Table("Container Name", "Name", "Alias", "MAC", "Ifindex", "MTU", "Type", "State")
        for container in found:
            for i in container["interfaces"]:
                table.add_row(
                    container["name"],
                    i["name"],
                    i["alias"] or "N/A",
                    i["mac"],
                    str(i["ifindex"]),
                    str(i["mtu"]),
                    i["type"],
                    i["state"],
                )
        out.print(table)


@clab_app.command()
def events(
    fmt: str = typer.Option("plain", "--format", help="plain (a line each, as docker events) or json (JSON lines)."),
    initial: bool = typer.Option(False, "--initial-state", help="First every running container and interface as it is."),
    stats: bool = typer.Option(False, "--interface-stats", help="Also each interface's counters and rates, periodically."),
    interval: str = typer.Option("1s", "--interface-stats-interval", help="How often the counters are read (500ms, 2s, 1m)."),
):
    """Stream every lab's containers and interfaces as containerlab's events do, until Ctrl-C: container
    start/stop/die/destroy, interface create/update/delete (and stats), labs deployed later included."""

    with reported():
        if fmt not in ("plain", "json"):
            raise LabError(f"--format must be plain or json, not '{fmt}'")
        try:
            every = parse_time(interval) / 1e6
        except ValueError as exc:
            raise LabError(f"--interface-stats-interval: {exc}") from None
        feed = Feed(initial, every if stats else None)
        try:
            for event in feed:
                sys.stdout.write((json.dumps(event) if fmt == "json" else _plain(event)) + "\n")
                sys.stdout.flush()
        except (KeyboardInterrupt, BrokenPipeError):
            pass
        finally:
            feed.close()


def _plain(event: dict) -> str:
    attributes = ", ".join(f"{k}={v}" for k, v in sorted(event["attributes"].items()))
    return f"{event['timestamp']} {event['type']} {event['action']} {event['actor_id']} ({attributes})"

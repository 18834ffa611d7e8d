"""`nestlab plan` and `nestlab servers ...`: labs split across machines (docs/servers.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from .. import __version__
from .common import err, here, out, print_json, reported

servers_app = typer.Typer(help="Machines a lab is split across: emulate some on this machine, check them.", no_args_is_help=True)

ServersOpt = typer.Option(
    None,
    "--servers",
    help="Inventory (YAML: servers: NAME: {address, user, port, key, weight, nestlab}) "
    "replacing the topology's servers: (docs/servers.md).",
)


def plan(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file."),
    servers: Path | None = ServersOpt,
    fmt: str = typer.Option(
        "table", "--format", help="Output: table, json, or yaml (each server's share, as it would deploy it)."
    ),
):
    """Show where each node of a lab would run and which links would be cut, without deploying.

    Nodes pinned with server: stay; the rest are split to balance the servers' weights and cut
    as few links as possible (a node and its components stay together).  Every cut link
    becomes a VXLAN tunnel between the two servers, 50 bytes of MTU less.

    Example: nestlab plan -t lab.yml --servers inventory.yml
    """
    import yaml

    from ..lab.lab import Lab
    from ..plan.partition import MGMT_STITCH
    from ..sites.shares import place_and_partition

    with reported():
        lab = here(Lab.from_file(topo, servers=servers))
        parts = place_and_partition(lab.blueprint)
        placed = parts.placement
        by_server: dict[str, list[str]] = {}
        for node in lab.plan.nodes:
            by_server.setdefault(placed.server(node), []).append(node)
        if fmt == "yaml":
            out.line(yaml.safe_dump({s: share.topology for s, share in sorted(parts.shares.items())}, sort_keys=False))
            return
        report = {
            "lab": lab.name,
            "servers": {s: sorted(by_server.get(s, [])) for s in sorted(lab.topology.servers)},
            "cut": [list(pair) for pair in placed.cut],
            "spans": placed.spans,
            "stitched_mtu": parts.mtu,
            "tunnels": {s: share.stitched for s, share in sorted(parts.shares.items())},
        }
        if fmt == "json":
            print_json(report)
            return
        for server, nodes in report["servers"].items():
            shown = ", ".join(nodes[:12]) + (f" and {len(nodes) - 12} more" if len(nodes) > 12 else "")
            out.line(f"{server} (weight {lab.topology.servers[server].weight:g}): {len(nodes)} nodes: {shown or '-'}")
        tunnels = sum(len(t) for t in report["tunnels"].values()) // 2
        out.line(
            f"cut links: {len(placed.cut)}; switches spanning servers: {len(placed.spans)}; "
            f"VXLAN tunnels: {tunnels} (MTU {parts.mtu}, UDP port {lab.topology.stitch.port})"
        )
        joined = [s for s, share in sorted(parts.shares.items()) if MGMT_STITCH in share.topology["topology"]["nodes"]]
        if joined:  # the servers' management bridges, one segment (docs/servers.md)
            out.line(f"management network: one segment over {', '.join(joined)} (its gateway on {joined[0]})")
        for a, b in placed.cut[:20]:
            out.line(f"  {a} ({placed.server(a.node)}) <-> {b} ({placed.server(b.node)})")
        if len(placed.cut) > 20:
            out.line(f"  ... and {len(placed.cut) - 20} more (--format json lists all)")


@servers_app.command("emulate")
def emulate(
    count: int = typer.Argument(3, help="How many servers."),
    name: str = typer.Option("servers", "--name", help="The emulation's name (it is a lab of that name)."),
    inventory: Path | None = typer.Option(None, "--inventory", help="Also write the inventory here."),
    destroy: bool = typer.Option(False, "--destroy", help="Remove the emulated servers and every lab inside them."),
):
    """Emulate servers on this machine: each a network namespace with its own sshd and its own
    /run/nestlab, /run/netns and /etc/ssh, on an underlay bridge this machine reaches (198.18.0.0/24).
    Nothing touches a real interface.

    Example: nestlab servers emulate 3 --inventory inv.yml ; nestlab deploy -t lab.yml --servers inv.yml
    """
    from ..testbeds import emulate as emu

    with reported():
        if destroy:
            emu.destroy(name)
            err.line(f"emulated servers '{name}' removed")
            return
        path = emu.emulate(count, name, copy_to=str(inventory) if inventory else None)
        err.line(f"{count} emulated servers up ({name}); inventory: {path}")
        out.line(path)


@servers_app.command("check")
def check(
    servers: Path = typer.Option(..., "--servers", help="Inventory file."),
    fmt: str = typer.Option("table", "--format", help="Output: table or json."),
):
    """Reach every server over SSH (in parallel): nestlab's version there, what its kernel lacks
    (nestlab doctor), and its clock's offset from this machine's."""

    from ..backends.remote.ssh import each
    from ..model.servers import load_inventory
    from ..sites.ssh import remotes

    def probe(remote):
        remote.run(["true"], timeout=30)  # the master connection first, so the clock is read in one round trip
        started = time.time()
        clock = remote.run(["date", "+%s.%N"], timeout=30)
        ended = time.time()
        if clock.returncode:
            return {"server": remote.name, "ok": False, "error": (clock.stderr.strip().splitlines() or ["no answer"])[-1]}
        answer = remote.run(remote.nestlab_cmd("doctor", "--format", "json"), timeout=120)
        try:
            features = json.loads(answer.stdout)
        except ValueError:
            return {"server": remote.name, "ok": False, "error": f"nestlab doctor did not answer: {answer.stderr.strip()[-200:]}"}
        missing = [f["name"] for f in features if not f["ok"]]
        version = remote.run(remote.nestlab_cmd("version")).stdout.strip()
        problem = (
            f"nestlab {version or '(none)'} there, {__version__} here"
            if version != __version__
            else "its kernel has no VXLAN, which stitches links between servers"
            if "vxlan" in missing
            else None
        )
        return {
            "server": remote.name,
            "ok": problem is None,
            "version": version,
            "skew_s": round(float(clock.stdout) - (started + ended) / 2, 3),
            "missing": missing,
            **({"error": problem} if problem else {}),
        }

    with reported():
        conns = remotes(load_inventory(servers).servers, str(servers.parent.resolve()))
        rows = [
            r if isinstance(r, dict) else {"server": name, "ok": False, "error": str(r)}
            for name, r in each(conns.values(), probe).items()
        ]
        if fmt == "json":
            print_json(rows)
        else:
            for row in rows:
                if row.get("error"):
                    out.line(f"{row['server']}: NOT READY: {row['error']}")
                else:
                    out.line(
                        f"{row['server']}: nestlab {row['version']}, clock {row['skew_s']:+.3f} s, "
                        f"kernel lacks: {', '.join(row['missing']) or 'nothing'}"
                    )
        if not all(row["ok"] for row in rows):
            raise typer.Exit(1)


commands = typer.Typer()
commands.command("plan")(plan)
commands.add_typer(servers_app, name="servers")

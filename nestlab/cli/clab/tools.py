"""containerlab's ``tools``: netem set/show/reset on a node's interface, veth create, vxlan create/delete.

A node is named as containerlab names its container (``clab-LAB-NODE``).  What these make outside a
lab's namespaces carries that lab's marker, so destroying the lab removes it.  The tools that need
containerlab's own machinery (certificates, gotty, sshx, API server, snapshots) are refused, saying so.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from ... import names
from ...backends.kernel import veths
from ...engine import state
from ...errors import LabError
from ...lab.lab import Lab
from ...lab.link_handle import LinkHandle
from ...model.endpoint import Endpoint
from ...model.units import parse_percent, parse_rate
from ...observe.clab_view import container_name
from ..common import err, out, reported
from .base import clab_app

tools_app = typer.Typer(
    help="containerlab's tools: netem, veth, vxlan (others are refused with the reason).", no_args_is_help=True
)
clab_app.add_typer(tools_app, name="tools")
netem_app = typer.Typer(help="Impairments on a node's interface (delay, jitter, loss, rate, corruption).", no_args_is_help=True)
tools_app.add_typer(netem_app, name="netem")
veth_app = typer.Typer(help="A veth pair between nodes, or a node and this machine.", no_args_is_help=True)
tools_app.add_typer(veth_app, name="veth")
vxlan_app = typer.Typer(help="A VXLAN tunnel for an interface of this machine (a node's host: link).", no_args_is_help=True)
tools_app.add_typer(vxlan_app, name="vxlan")

NodeOpt = typer.Option(..., "-n", "--node", help="The node, as clab-LAB-NODE.")


@netem_app.command("set")
def netem_set(
    node: str = NodeOpt,
    iface: str = typer.Option(..., "-i", "--interface", help="Its interface."),
    delay: str | None = typer.Option(None, "--delay", help="Delay of what it sends, e.g. 100ms."),
    jitter: str | None = typer.Option(None, "--jitter", help="Delay variation, e.g. 10ms (with --delay)."),
    loss: float | None = typer.Option(None, "--loss", help="Loss in percent, e.g. 0.1."),
    rate: int | None = typer.Option(None, "--rate", help="Rate in kbit/s."),
    corruption: float | None = typer.Option(None, "--corruption", help="Corruption in percent."),
):
    """Impair what a node's interface sends (containerlab tools netem set): the link it ends is shaped in that
    direction, as `nestlab link set --direction` would (a rate alone needs no netem)."""
    with reported():
        handle, direction = _end(node, iface)
        given = {"delay": delay, "jitter": jitter, "loss": None if loss is None else f"{loss:g}%"}
        given |= {"rate": None if rate is None else f"{rate}kbit", "corrupt": None if corruption is None else f"{corruption:g}%"}
        params = {k: v for k, v in given.items() if v is not None}
        if not params:
            raise LabError("nothing to set: give --delay, --jitter, --loss, --rate or --corruption")
        handle.set(direction=direction, **params)
        err.line(f"{node}:{iface}: {', '.join(f'{k}={v}' for k, v in params.items())}")


@netem_app.command("reset")
def netem_reset(node: str = NodeOpt, iface: str = typer.Option(..., "-i", "--interface", help="Its interface.")):
    """Remove every impairment from what a node's interface sends (containerlab tools netem reset)."""
    with reported():
        handle, direction = _end(node, iface)
        handle.set(direction=direction, **dict.fromkeys(("delay", "jitter", "loss", "rate", "corrupt"), "none"))
        err.line(f"{node}:{iface}: impairments removed")


@netem_app.command("show")
def netem_show(
    node: str = NodeOpt,
    fmt: str = typer.Option("table", "-f", "--format", help="table or json ({node: [{interface, delay, ...}]})."),
):
    """A node's interfaces and what shapes what they send (containerlab tools netem show)."""

    with reported():
        lab, short = _node(node)
        current = state.read(lab.name)
        plan = current.plan if current else lab.plan
        rows = []
        for link in plan.links.values():
            for end, shape in ((link.a, link.shape_a), (link.b, link.shape_b)):
                if end.node == short:
                    rows.append(_impairment(end.iface, dict(shape)))
        rows.sort(key=lambda r: r["interface"])  # as `link set` recorded them, which is what it gave the kernel
        if fmt == "json":
            out.line(json.dumps({node: rows}, indent=2))
            return

        table = Table("Interface", "Delay", "Jitter", "Packet Loss", "Rate (Kbit/s)", "Corruption")
        for r in rows:
            table.add_row(
                r["interface"],
                r["delay"] or "N/A",
                r["jitter"] or "N/A",
                f"{r['packet_loss']:.2f}%",
                str(r["rate"]),
                f"{r['corruption']:.2f}%",
            )
        out.print(table)


def _impairment(iface: str, shape: dict[str, str]) -> dict:
    """One interface as containerlab's netem show JSON has it."""

    return {
        "interface": iface,
        "delay": shape.get("delay", ""),
        "jitter": shape.get("jitter", ""),
        "packet_loss": parse_percent(shape["loss"]) if "loss" in shape else 0.0,
        "rate": parse_rate(shape["rate"]) // 1000 if "rate" in shape else 0,
        "corruption": parse_percent(shape["corrupt"]) if "corrupt" in shape else 0.0,
    }


def _node(container: str):
    """The running lab and node a containerlab container name (clab-LAB-NODE) stands for."""

    for name in state.labs():
        try:
            lab = Lab.running(name)
        except LabError:
            continue
        for node in lab.plan.nodes:
            if container_name(lab.document(), node) in (container, f"clab-{name}-{container}"):
                return lab, node
    raise LabError(f"no running lab has a node {container} (give it as `nestlab clab inspect --all` names it)")


def _end(container: str, iface: str):
    """The link ending on the node's interface, and the direction that is what the node sends."""

    lab, node = _node(container)
    ref = f"{node}:{iface}"
    for link in lab.plan.links.values():
        if ref in (link.a.ref, link.b.ref):
            return LinkHandle(lab, link.a.ref, link.b.ref), "a" if link.a.ref == ref else "b"
    raise LabError(f"{container} has no link on {iface} (impairments go on a link's end: `nestlab inspect` lists them)")


@veth_app.command("create")
def veth_create(
    a: str = typer.Option(..., "-a", "--a-endpoint", help="clab-LAB-NODE:IF, or host:IF (this machine)."),
    b: str = typer.Option(..., "-b", "--b-endpoint", help="clab-LAB-NODE:IF, or host:IF (this machine)."),
    mtu: int = typer.Option(9500, "-m", "--mtu", help="MTU of both ends."),
):
    """A veth pair between two nodes, or a node and this machine (containerlab tools veth create); it goes
    with the lab (a host end carries the lab's marker)."""

    with reported():
        ends = [_veth_end(x) for x in (a, b)]
        labs = {lab for lab, _, _ in ends if lab}
        if not labs:
            raise LabError("at least one end must be a node of a running lab (host:IF alone is not a lab's)")
        veths.create(ends[0][1:], ends[1][1:], labs.pop(), mtu)
        err.line(f"veth {a} <--> {b} created")


def _veth_end(text: str) -> tuple[str | None, str | None, str]:
    """(lab, the node's network namespace or None for this machine, interface) of ``CONTAINER:IF`` or ``host:IF``."""

    end = Endpoint(text)
    if not end.whole:
        raise LabError(f"{text!r}: give CONTAINER:IF or host:IF")
    if end.node == "host":
        return None, None, end.iface
    lab, node = _node(end.node)
    return lab.name, names.netns_path(lab.name, node), end.iface


@vxlan_app.command("create")
def vxlan_create(
    remote: str = typer.Option(..., "--remote", help="The far end's address."),
    link: str = typer.Option(..., "-l", "--link", help="This machine's interface whose traffic the tunnel carries."),
    vni: int = typer.Option(10, "-i", "--id", help="VXLAN ID."),
    dev: str | None = typer.Option(None, "--dev", help="The interface the tunnel leaves by (default: the route's)."),
    mtu: int = typer.Option(0, "-m", "--mtu", help="MTU (default: the link's, less 50)."),
    port: int = typer.Option(14789, "-p", "--dst-port", help="UDP port."),
    src_port: int = typer.Option(0, "-s", "--src-port", help="UDP source port (0: the kernel's)."),
):
    """A VXLAN tunnel named vx-LINK to ``remote``, joined to LINK both ways by tc redirects (containerlab tools
    vxlan create); it carries LINK's lab's marker and goes with that lab."""

    with reported():
        made = veths.vxlan_stitch(link, remote, vni, port, src_port, dev, mtu)
        err.line(f"vxlan {made} (VNI {vni}, to {remote}:{port}) joined to {link}")


@vxlan_app.command("delete")
def vxlan_delete(
    prefix: str = typer.Option("vx-", "-p", "--prefix", help="Delete this machine's VXLAN interfaces whose name starts so."),
):
    """Delete VXLAN interfaces of this machine by name prefix (containerlab tools vxlan delete): only ones
    nestlab made (they carry a lab's marker)."""

    with reported():
        gone = veths.delete_vxlans(prefix)
        err.line(f"deleted {len(gone)} VXLAN interface{'s' if len(gone) != 1 else ''}{': ' + ', '.join(gone) if gone else ''}")


REFUSED = {
    "cert": "certificates: use openssl (nestlab's nodes are reached by SSH with the lab's key, docs/management.md)",
    "gotty": "web terminals: use `nestlab shell` or `nestlab ssh`",
    "sshx": "shared terminals: use `nestlab shell` or `nestlab ssh`",
    "api-server": "the API server runs containerlab itself",
    "disable-tx-offload": "nestlab's veths need no offload change (checksums are filled in where it matters)",
    "snapshot": "snapshots are of vendor VMs' disks, which nestlab does not run",
}


def _refused(tool: str):
    def refuse() -> None:
        with reported():
            raise LabError(f"containerlab tools {tool} is not answered by nestlab: {REFUSED[tool]}")

    refuse.__doc__ = f"Refused: {REFUSED[tool]}."
    return refuse


for _tool in REFUSED:
    tools_app.command(_tool, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(_refused(_tool))

"""``nestlab kathara ...``: Kathará's commands on Kathará's labs (a folder with lab.conf, docs/compat.md), for
people and scripts that type them.  ``nestlab compat install-cli kathara`` installs it as ``kathara``.

``lstart``/``lclean``/``lrestart``/``linfo`` take the lab's folder (``-d``, default the current one);
``connect``/``exec`` a device of the lab in the current folder (or ``-d``); ``vstart``/``vclean`` make
single devices on collision domains of their own lab (``kathara-vlab``); ``list``, ``wipe`` and
``check`` look at every Kathará lab of this machine.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import typer
from rich.table import Table

from .. import __version__, sites
from ..backends.kernel import probe
from ..engine import handout, state
from ..errors import LabError
from ..lab.lab import Lab
from ..model.endpoint import Endpoint
from ..model.formats import kathara
from ..model.labname import name_of
from ..model.overrides import Overrides
from ..registry import KINDS
from .common import err, here, ignored, out, reported
from .lifecycle import DeployRequest, deploy_with
from .tables import show
from .use import exec_cmd as nestlab_exec
from .use import shell as nestlab_shell

kathara_app = typer.Typer(
    help="Kathará's commands (lstart, lclean, lrestart, linfo, lconfig, connect, exec, wipe, list, check, vstart, vclean) "
    "on Kathará labs: a folder with lab.conf.",
    no_args_is_help=True,
    add_completion=False,
)
DirOpt = typer.Option(Path("."), "-d", "--directory", help="The lab's folder (holding lab.conf); default: this one.")
VLAB = "kathara-vlab"  # the lab vstart's devices belong to


def _folder(directory: Path) -> Path:

    if not kathara.is_lab(directory):
        raise LabError(f"{directory.resolve()} holds no lab.conf: give the lab's folder with -d")
    return directory if directory.is_dir() else directory.parent


def _name(directory: Path) -> str:

    return name_of(_folder(directory))


@kathara_app.command()
def lstart(
    directory: Path = DirOpt,
    machines: list[str] = typer.Argument(None, help="Only these devices (and the collision domains between them)."),
    force: bool = typer.Option(False, "-F", "--force-lab", help="Start the lab anew even if it runs."),
    noterminals: bool = typer.Option(False, "--noterminals", help="Open no terminal (nestlab never opens one)."),
    terminals: bool = typer.Option(False, "--terminals", help="Kathará opens a terminal per device; nestlab does not."),
    privileged: bool = typer.Option(False, "--privileged", help="Devices are root in their namespaces anyway (a note says so)."),
    options: list[str] = typer.Option([], "-o", "--pass", help="Kathará's per-device options: not taken (a note says so)."),
    listing: bool = typer.Option(False, "-l", "--list", help="Show the devices once started (as linfo)."),
):
    """Start a Kathará lab (kathara lstart): every device of lab.conf with its collision domains and startup file."""

    if terminals:
        ignored("--terminals", "open a shell with `nestlab kathara connect DEVICE`")
    if privileged:
        ignored("--privileged", "devices run as root with every capability already")
    if options:
        ignored("-o", "set device options in lab.conf")
    with reported():
        folder = _folder(directory)
    deploy_with(DeployRequest(folder, Overrides(nodes=frozenset(machines or ())), reconfigure=force))
    if listing:
        linfo(directory=directory, device=None, conf=False, live=False)


@kathara_app.command()
def lclean(
    directory: Path = DirOpt,
    machines: list[str] = typer.Argument(None, help="Only these devices (the rest keeps running)."),
):
    """Stop a Kathará lab and remove everything of it (kathara lclean); with devices named, only those."""

    with reported():
        name = _name(directory)
        if machines:
            changes = Lab.running(name).without(list(machines))
            err.line(f"lab {name}: removed {', '.join(machines)} ({changes.summary()})")
            return
        with state.locked(name):
            removed = sites.remove(name)
        err.line(f"lab {name}: removed {removed} devices" if removed else f"lab {name}: nothing to remove")


@kathara_app.command()
def lrestart(
    directory: Path = DirOpt,
    noterminals: bool = typer.Option(False, "--noterminals", help="Open no terminal (nestlab never opens one)."),
    listing: bool = typer.Option(False, "-l", "--list", help="Show the devices once started."),
):
    """lclean, then lstart (kathara lrestart)."""
    lclean(directory=directory, machines=[])
    lstart(
        directory=directory,
        machines=[],
        force=False,
        noterminals=True,
        terminals=False,
        privileged=False,
        options=[],
        listing=listing,
    )


@kathara_app.command()
def linfo(
    directory: Path = DirOpt,
    device: str | None = typer.Option(None, "-n", "--name", help="Only this device."),
    conf: bool = typer.Option(False, "-c", "--conf", help="The lab as lab.conf describes it (it need not run)."),
    live: bool = typer.Option(
        False, "-l", "--live", help="Kathará refreshes the table; nestlab prints it once (a note says so)."
    ),
):
    """The lab's devices, their collision domains and interfaces (kathara linfo)."""

    if live:
        ignored("--live", "linfo prints the table once, read from the kernel; `watch nestlab kathara linfo` refreshes it")
    with reported():
        folder = _folder(directory)
        if conf:
            lab = here(Lab.from_file(folder))
            for link in lab.plan.links.values():
                out.line(f"{link.a.ref} -- {link.b.ref}")
            for name, obj in lab.plan.nodes.items():
                out.line(f"{name}: {obj.kind}")
            return
        lab = Lab.running(_name(directory))
        show(lab.inspect({device} if device else None), "table")


@kathara_app.command()
def lconfig(
    directory: Path = DirOpt,
    device: str = typer.Option(..., "-n", "--name", help="The device."),
    add: list[str] = typer.Option([], "--add", help="Collision domain to join."),
    rm: list[str] = typer.Option([], "--rm", help="Collision domain to leave."),
):
    """Join or leave collision domains on a running device (kathara lconfig): refused, with what to do instead."""
    with reported():
        raise LabError(
            "lconfig is not answered: add or remove the device's dev[N]=DOMAIN line in lab.conf and run "
            "`nestlab kathara lstart -d DIR` again; the running lab is reconciled (only what changed is made)"
        )


@kathara_app.command()
def connect(
    device: str = typer.Argument(..., help="The device."),
    directory: Path = DirOpt,
    shell: str | None = typer.Option(None, "--shell", help="The shell to run (default: yours)."),
    logs: bool = typer.Option(
        False, "-l", "--logs", help="Kathará shows the startup's output first; nestlab printed it at lstart."
    ),
):
    """A shell in a device (kathara connect)."""

    if shell:
        os.environ["SHELL"] = shell
    if logs:
        ignored("--logs", "the startup's output was printed by lstart")
    with reported():
        name = _name(directory)
    nestlab_shell(node=device, topo=None, lab=name, kubeconfig=None, namespace=None)


@kathara_app.command("exec", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def exec_cmd(
    device: str = typer.Argument(..., help="The device."),
    command: list[str] = typer.Argument(..., help="The command and its arguments."),
    directory: Path = DirOpt,
    vmachine: bool = typer.Option(False, "-v", "--vmachine", help="A device vstart made."),
):
    """Run a command in a device and print its output (kathara exec)."""

    with reported():
        name = VLAB if vmachine else _name(directory)
    nestlab_exec(
        node=device, command=[c for c in command if c != "--"], topo=None, lab=name, env=[], kubeconfig=None, namespace=None
    )


def _kathara_labs() -> list[str]:

    found = []
    for name in state.labs():
        try:
            current = state.read(name)
        except LabError:
            continue
        if current and (current.source or "").endswith("lab.conf") or name == VLAB:
            found.append(name)
    return found


@kathara_app.command("list")
def list_cmd(
    every: bool = typer.Option(False, "-a", "--all", help="Every Kathará lab (not only the one in this folder)."),
    device: str | None = typer.Option(None, "-n", "--name", help="Only this device."),
    directory: Path = DirOpt,
):
    """The running devices: lab, device, state, interfaces (kathara list)."""

    with reported():
        labs = _kathara_labs() if every or not (directory / "lab.conf").exists() else [_name(directory)]
        table = Table("LAB", "DEVICE", "STATE", "INTERFACES")
        for name in labs:
            for node in Lab.running(name).inspect({device} if device else None)["nodes"]:
                if KINDS.get(node["kind"]).switch:
                    continue  # a collision domain's bridge, not a device
                ifaces = ", ".join(f"{i['name']} {' '.join(i['addresses'])}".strip() for i in node["interfaces"])
                table.add_row(name, node["name"], node["state"], ifaces)
        out.print(table)


@kathara_app.command()
def wipe(
    force: bool = typer.Option(False, "-f", "--force", help="Do not ask."),
    settings: bool = typer.Option(False, "-s", "--settings", help="Kathará's settings: nestlab keeps none."),
    every: bool = typer.Option(False, "-a", "--all", help="Every user's labs (labs here are root's)."),
):
    """Remove every Kathará lab of this machine (kathara wipe); other nestlab labs are left alone."""

    with reported():
        labs = _kathara_labs()
        if settings:
            ignored("--settings", "nestlab keeps no Kathará settings")
        if every:
            ignored("-a", "labs here are root's: wipe removes every Kathará lab of this machine with or without it")
        if labs and not force and not typer.confirm(f"remove the Kathará labs {', '.join(labs)}?", err=True):
            raise LabError("nothing removed")
        for name in labs:
            with state.locked(name):
                sites.remove(name)
            err.line(f"lab {name}: removed")


@kathara_app.command()
def check():
    """What Kathará checks before it runs: here, nestlab's version and what this machine lacks (nestlab doctor)."""

    with reported():
        out.line(f"nestlab {__version__} answers Kathará's commands (no Docker needed)")
        missing = [f.name for f in probe.features(handout.machine()) if not f.ok]
        out.line("this kernel lacks: " + (", ".join(sorted(missing)) or "nothing nestlab uses") + " (see `nestlab doctor`)")
        out.line(f"python {sys.version.split()[0]}; running Kathará labs: {', '.join(_kathara_labs()) or 'none'}")


@kathara_app.command()
def vstart(
    name: str = typer.Option(..., "-n", "--name", help="The device."),
    eth: list[str] = typer.Option([], "--eth", help="N:DOMAIN: its ethN on that collision domain (repeat)."),
    image: str | None = typer.Option(None, "--image", help="Its image: one naming frr makes a router."),
    noterminals: bool = typer.Option(False, "--noterminals", help="Open no terminal (nestlab never opens one)."),
):
    """Start one device on collision domains of its own (kathara vstart); devices of several vstarts meet
    on a domain of the same name."""

    with reported():
        current = state.read(VLAB)
        doc = (
            Lab.running(VLAB).document() if current else {"name": VLAB, "ipv4_pool": None, "topology": {"nodes": {}, "links": []}}
        )
        nodes, links = doc["topology"]["nodes"], doc["topology"]["links"]
        if name in nodes:
            raise LabError(f"device {name} already runs (`nestlab kathara vclean -n {name}` first)")
        nodes[name] = {"kind": "frr"} if image and "frr" in image else {}
        for given in eth:
            found = re.fullmatch(r"(\d+):([A-Za-z0-9_-]+)", given)  # Kathará's N:DOMAIN
            if not found:
                raise LabError(f"--eth {given}: give N:DOMAIN, e.g. 0:A")
            number, domain = found.groups()
            nodes.setdefault(f"cd-{domain}", {"kind": "bridge"})
            links.append({"endpoints": [f"{name}:eth{number}", f"cd-{domain}:{name}-{number}"]})
        lab = Lab.from_document(doc, "<kathara vstart>")
        changes = lab.deploy().changes
        err.line(f"device {name} started in {VLAB} ({changes.summary()})")


@kathara_app.command()
def vclean(name: str = typer.Option(..., "-n", "--name", help="The device.")):
    """Remove a device vstart made (kathara vclean); its collision domains go with their last device."""

    with reported():
        running = Lab.running(VLAB)
        doc = running.document()
        if name not in doc["topology"]["nodes"]:
            raise LabError(f"no device {name} was started with vstart")
        keep = {n for n in doc["topology"]["nodes"] if n != name and not n.startswith("cd-")}
        if not keep:
            with state.locked(VLAB):
                sites.remove(VLAB)
            err.line(f"device {name} removed ({VLAB} is gone with its last device)")
            return
        ends = [[Endpoint(e).node for e in ln["endpoints"]] for ln in doc["topology"]["links"]]
        used = {domain for device, domain in ends if device in keep}
        Lab.from_document(doc, "<kathara vstart>", Overrides(nodes=frozenset(keep | used))).deploy()
        err.line(f"device {name} removed")


commands = typer.Typer()
commands.add_typer(kathara_app, name="kathara")  # `nestlab compat install-cli kathara` makes it `kathara`

"""The ``nestlab`` command line: the app, the root check, and the command groups (one module each) put together;
``nestlab link set --lab`` and ``nestlab inspect --lab NAME --format json`` go the quick way (cli/quick.py,
cli/quick_inspect.py)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from ..rootless import ordinary_user
from . import quick, quick_inspect

if TYPE_CHECKING:
    import typer
    from typer._click import Command, Context, HelpFormatter
    from typer.core import TyperGroup


# Each command: the module defining it (imported only when the command runs) and its help's first paragraph, which
# `nestlab --help` lists without importing any of them (None: a hidden command).  tests/test_architecture.py checks the
# table against the modules.
COMMANDS: dict[str, tuple[str, str | None]] = {
    "deploy": ("lifecycle", "Create the lab described by a topology file."),
    "validate": (
        "lifecycle",
        "Check a topology file completely: every check deploy makes before it changes anything (schema, names, addresses, links, placement on servers, what this machine must have), and nothing is made.",
    ),
    "destroy": (
        "lifecycle",
        "Remove a lab: its processes, namespaces, links and state (on every server, for a lab split across servers), its names (/etc/hosts, ip netns, ssh config) and management addresses. Nothing else is touched.",
    ),
    "save": ("lifecycle", "Save each router's running configuration (like clab save)."),
    "cleanup": ("lifecycle", "Remove what a lab left behind after its process died (e.g. a deploy killed half-way)."),
    "demo": ("lifecycle", "Deploy a topology, measure ping and TCP between its first two hosts, destroy it."),
    "inspect": (
        "use",
        "Show nodes, interfaces, addresses and states of a running lab, read from the kernel; with MPTCP, each connection's subflows.",
    ),
    "exec": ("use", "Run a command inside a node; its exit code becomes nestlab's."),
    "shell": ("use", "Open an interactive shell inside a node (exit it to come back)."),
    "ssh": (
        "use",
        "SSH into a node on its management address, as root with the lab's key (what `ssh clab-LAB-NODE` does). A node on an SSH server or a pod is reached from there (its server's nestlab runs this command). Rootless without subordinate ids, where no SSH server can run, it enters the node as `nestlab exec` does.",
    ),
    "run": (
        "live",
        "Deploy a lab and play its schedule: timed link changes on a drift-free clock, and its wireless stations' mobility: (docs/wireless.md).",
    ),
    "link": ("live", "Change or show a running lab's links live (shaping, up/down)."),
    "node": (
        "live",
        "Stop, start, restart or move (wireless) nodes of a running lab; change or show their cgroup limits and usage.",
    ),
    "graph": ("observe", "Draw the lab: export its topology, or serve a live page of it."),
    "capture": ("observe", "Capture packets on interfaces of a running lab, as pcapng (nothing is installed in the nodes)."),
    "events": ("observe", "Stream what happens in a running lab, until Ctrl-C or the lab is destroyed."),
    "fidelity-sample": ("observe", None),
    "check": (
        "verify",
        "Run the lab's checks: (docs/checks.md) and report, for each, whether it holds, what it saw and when it first held: in seconds after the deploy (this command deploys a lab given by -t that is not running) or after the lab's last change; a wireless medium whose process ended is named with its last error. Exit 0: every check holds; 1: some do not, or a medium is down; 2: the file is wrong.",
    ),
    "report": ("bench", "Regenerate report.html of a results folder (e.g. after upgrading nestlab)."),
    "compare": (
        "bench",
        "Per figure and cell: both means and second/first with a 95 % interval (e.g. two kernels, two machines).",
    ),
    "bench": (
        "bench",
        "Measure: rerun a seed paper's experiments (one subcommand per suite), or measure a running lab (run, pingall).",
    ),
    "plan": ("servers", "Show where each node of a lab would run and which links would be cut, without deploying."),
    "servers": ("servers", "Machines a lab is split across: emulate some on this machine, check them."),
    "k8s": (
        "k8s",
        "Run labs on Kubernetes: deploy, render manifests, build the image; a cluster on this machine (cluster up/down).",
    ),
    "clab": (
        "clab",
        "containerlab's commands and flags (deploy, redeploy, destroy, inspect, exec, save, graph, stop, start, restart, events, tools, version), for tools that drive containerlab. Global flags (-t, --name, --vars, -r, -d, --log-level, --timeout) go anywhere on the line, and CLAB_* variables stand for flags (CLAB_TOPO, CLAB_DEPLOY_RECONFIGURE).",
    ),
    "kathara": (
        "kathara",
        "Kathará's commands (lstart, lclean, lrestart, linfo, lconfig, connect, exec, wipe, list, check, vstart, vclean) on Kathará labs: a folder with lab.conf.",
    ),
    "compat": ("clab.compat", "Compatibility with other tools' commands."),
    "version": ("machine", "Print nestlab's version."),
    "doctor": ("machine", "What this kernel and machine support: attachment modes, qdiscs, MPTCP, cgroups, OVS, tools."),
    "modes": (
        "machine",
        "Every node kind (kind:), link mode (a link's mode:) and node runtime (runtime:), from their registries.",
    ),
    "image": ("machine", "Root filesystems for image: nodes (runc)."),
    "mobility": ("machine", "Generate visibility graphs for dynamics: (MANETs)."),
    "serve": (
        "serve",
        "Serve containerlab's REST API (clab-api-server's, which containerlab's web, desktop and VS Code apps use).",
    ),
}


# Commands that read only files and this program: an ordinary user's run as they are; every other one runs in the
# user's own namespaces (docs/rootless.md).
OUTSIDE = {"version", "modes", "plan", "report", "compare", "mobility", "k8s"}


def build() -> typer.Typer:
    """The typer app, its commands registered lazily (:func:`_lazy`).  typer is imported here: ``nestlab link set``
    goes without it (cli/quick.py)."""
    import typer

    from .common import needs_root

    return typer.Typer(
        cls=_lazy(),
        help="Build, use and tear down networks of namespace containers.\n\n"
        "Typical session:  nestlab deploy -t lab.yml ; nestlab exec --lab NAME h1 -- ping -c1 10.0.0.2 ; nestlab destroy --lab NAME",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        callback=needs_root,
    )


def _lazy() -> type[TyperGroup]:
    """The top command group: its commands listed from :data:`COMMANDS`, each one's module imported when it runs."""
    import typer.main
    from typer._click.utils import make_default_short_help
    from typer.core import TyperGroup
    from typer.models import TyperInfo

    class Lazy(TyperGroup):
        def list_commands(self, ctx: Context) -> list[str]:
            return list(COMMANDS)

        def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
            if cmd_name not in COMMANDS:
                return None
            module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name][0]}")
            group = typer.main.get_group_from_info(  # as add_typer() would: the app's own settings
                TyperInfo(module.commands),
                pretty_exceptions_short=True,
                suggest_commands=self.suggest_commands,
                rich_markup_mode=self.rich_markup_mode,
            )
            return group.get_command(ctx, cmd_name)

        def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
            shown = {name: text for name, (_, text) in COMMANDS.items() if text is not None}
            limit = formatter.width - 6 - max(map(len, shown))
            with formatter.section("Commands"):
                formatter.write_dl([(name, make_default_short_help(text, limit)) for name, text in shown.items()])

    return Lazy


def _command(argv: list[str]) -> str | None:
    """The command a command line names (its first word), None for none."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def _rootless(argv: list[str]) -> bool:
    """Whether the command runs in the user's namespaces: an ordinary user's, one that makes or reads labs, no help."""
    command = _command(argv)
    return ordinary_user(argv) and command is not None and command not in OUTSIDE


def main() -> None:
    """Run the command (in the user's namespaces when it is an ordinary user's), then leave without tearing the
    interpreter down: freeing every object of a large lab one by one took 0.05-0.2 s after a 500-node deploy had
    printed everything."""
    if _rootless(sys.argv[1:]):
        from ..rootless import session  # an ordinary user's command alone: root's start-up loads none of it

        code = session.inside(_run)
    else:
        code = _run()
    os._exit(code)


def _run() -> int:
    """Run the command; its exit code, once its output is flushed."""
    try:
        code = quick.link_set(sys.argv[3:]) if sys.argv[1:3] == ["link", "set"] else None
        if sys.argv[1:2] == ["inspect"]:
            code = quick_inspect.inspect(sys.argv[2:])
        if sys.argv[1:2] == ["clab"]:  # containerlab's command line: its global flags anywhere, CLAB_* variables
            from .clab import run

            code = run(sys.argv[2:])
        if code is None:
            build()()
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
    return code or 0


if __name__ == "__main__":
    main()

"""What every ``nestlab`` command shares: the consoles, error reporting, finding the lab and node, progress."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import LabError
from ..model.errors import TopologyError
from ..rootless import ordinary_user
from .jsonout import print_json as print_json

if TYPE_CHECKING:
    from ..lab.lab import Lab


class _Console:
    """A rich Console made on first use, so a command that prints nothing rich (``--help``) never imports rich."""

    def __init__(self, stderr: bool):
        self._stderr = stderr
        self._console = None

    @property
    def real(self):
        """The rich Console itself (to hand to rich: Progress, Live)."""
        if self._console is None:
            from rich.console import Console

            stream = sys.stderr if self._stderr else sys.stdout
            self._console = Console(stderr=self._stderr, highlight=False, width=None if stream.isatty() else 200)
        return self._console

    def line(self, text: str) -> None:
        """Plain text, no markup (rich is not even imported for it)."""
        (sys.stderr if self._stderr else sys.stdout).write(text + "\n")

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def escape(text: str) -> str:
    """``text`` with rich markup escaped (rich loaded only when there is something to say: 16 ms)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


out = _Console(stderr=False)
err = _Console(stderr=True)


TopoOpt = typer.Option(
    None, "-t", "--topo", help="Topology file (YAML), or a Kathará lab (its folder or its lab.conf).", exists=False
)
LabOpt = typer.Option(None, "--lab", help="Name of a running lab (instead of -t).")
KubeconfigOpt = typer.Option(
    None,
    "--kubeconfig",
    help="Find --lab in this cluster: a lab an operator made of a NestLab resource (docs/servers.md), "
    "its pods named by its status, no record needed here.",
)
NamespaceOpt = typer.Option(
    None, "--namespace", help="The NestLab's namespace, for --kubeconfig (default: the kubeconfig context's, else default)."
)


NEEDS_ROOT = "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo"
# Commands that only read files or what any user may see; every other one changes the machine.
_READ_ONLY = {"inspect", "plan", "version", "report", "compare", "modes", "graph", "k8s", "mobility", "link", "node"}


def needs_root(ctx: typer.Context) -> None:
    """Refuse a command that changes the machine before it starts, when not run as root."""
    if code := needs_root_for(ctx.invoked_subcommand or "", _READ_ONLY):
        raise typer.Exit(code)


def needs_root_for(command: str, read_only: set[str]) -> int:
    """1 (having said why) if ``command`` changes the machine and this is not root, else 0 (also for a lab found in a
    cluster: its pods do the work)."""
    own = sys.argv[: sys.argv.index("--")] if "--" in sys.argv else sys.argv  # not a command's to run in a node
    elsewhere = any(arg.split("=")[0] in ("--kubeconfig", "--namespace") for arg in own)
    if command not in read_only and ordinary_user(sys.argv) and not elsewhere:
        from ..rootless import session  # an ordinary user's refused command alone: root's start-up loads none of it

        why = f" (rootless mode is unavailable here: {session.why_not})" if session.why_not else ""
        err.print(f"[red]error[/red] nestlab {command} {NEEDS_ROOT}{escape(why)}")
        return 1
    return 0


@contextmanager
def reported() -> Iterator[None]:
    """Turn nestlab errors into a message and an exit code (2: bad topology, 1: anything else)."""
    try:
        yield
    except TopologyError as exc:
        for problem in exc.problems:
            err.print(f"[red]error[/red] {escape(problem.render(exc.source))}", soft_wrap=True)
        raise typer.Exit(2) from None
    except LabError as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except PermissionError as exc:
        from ..engine.handout import machine

        why = (
            "rootless mode may not do this (the machine's root may: run it with sudo)"
            if machine().guest
            else "refused to root here: a user namespace, seccomp profile or security module of this machine or "
            "container forbids it"
            if os.geteuid() == 0
            else f"nestlab {NEEDS_ROOT}"
        )
        err.print(f"[red]error[/red] {escape(str(exc))}: {why}")
        raise typer.Exit(1) from None
    except OSError as exc:  # the machine refused (a full disk, a limit): say what, without a traceback
        hint = {
            errno.ENOSPC: ": the filesystem is full; free space and run the command again",
            errno.EMFILE: ": too many open files; raise the limit (ulimit -n)",
        }.get(exc.errno or 0, "")
        err.print(f"[red]error[/red] {escape(str(exc))}{hint}", soft_wrap=True)
        raise typer.Exit(1) from None


def split_list(values: list[str]) -> list[str]:
    """Options that are repeatable and comma-separated (``--node a,b --node c``), as containerlab's string slices."""
    return [item for value in values for item in value.split(",") if item]


def ignored(flag: str, why: str) -> None:
    """A flag that is accepted for another tool's sake and changes nothing here, said on standard error."""
    err.line(f"note {flag}: ignored ({why})")


def here(lab_obj: Lab) -> Lab:
    """``lab`` as this machine would make it now, for a command that plans it without deploying it: handed out
    once (what the machine is, its management network's leases: engine/handout.py)."""
    from ..engine.handout import handed_out

    return type(lab_obj).of(handed_out(lab_obj.blueprint))


def resolve(topo: Path | None, lab: str | None, kubeconfig: Path | None = None, namespace: str | None = None) -> Lab:
    """The lab a command is about: the file ``topo``, the running lab ``lab`` (from the NestLab of that name when a
    cluster is named: ``kubeconfig`` or ``namespace``), else the one lab running here."""
    from ..engine import state
    from ..lab.lab import Lab

    if topo and lab:
        raise LabError("give either -t FILE or --lab NAME, not both")
    if kubeconfig or namespace:
        if not lab:
            raise LabError("--kubeconfig and --namespace find a NestLab by its name: give --lab NAME")
        from ..operator.found import found_lab

        return found_lab(lab, str(kubeconfig) if kubeconfig else None, namespace)
    if topo:
        return here(Lab.from_file(topo))
    if lab:
        return Lab.running(lab)
    labs = [name for name in state.labs() if _running(state, name)]
    if len(labs) == 1:
        return Lab.running(labs[0])
    listing = ", ".join(labs) if labs else "none is running"
    raise LabError(f"say which lab: -t FILE or --lab NAME (running labs: {listing})")


def _running(state, name: str) -> bool:
    try:
        found = state.read(name)
    except LabError:  # damaged: not one to pick without being named
        return False
    return bool(found and found.status == "running")


def notices(lab_obj: Lab) -> None:
    """The lab's notes, one line for each note however many nodes (or links) it is about."""
    from ..model.notes import collapsed

    for notice in collapsed(lab_obj.notices):
        err.print(f"[yellow]note[/yellow] {escape(notice.render(lab_obj.source))}", soft_wrap=True)


@contextmanager
def progress_bar(title: str) -> Iterator:
    """A progress callback for long work; silent when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(f"{title} {{task.description}}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err.real, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done)

        yield update


def node_of(lab_obj: Lab, name: str):
    """A node or host of the lab by name (from its plan: a running lab's topology is not checked again)."""
    from ..lab.node import Node

    if name in lab_obj.plan.nodes:
        return Node(lab_obj, name)
    from ..registry import KINDS

    nodes = [n for n, o in lab_obj.plan.nodes.items() if not KINDS.get(o.kind).machine]
    hosts = [n for n, o in lab_obj.plan.nodes.items() if KINDS.get(o.kind).machine]
    raise LabError(f"lab {lab_obj.name} has no node or host '{name}' (nodes: {_some(nodes)}; hosts: {_some(hosts) or 'none'})")


def _some(names: list[str], shown: int = 12) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")

"""The ``nestlab`` command line: the app, the root check, and the command groups (one module each) put together;
``nestlab link set --lab`` goes the quick way (cli/quick.py)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from ..rootless import ordinary_user
from . import quick

if TYPE_CHECKING:
    import typer


# Each command's module: a command loads only its own (and what that needs); `nestlab --help` loads them all.
# tests/test_architecture.py checks this table against the commands the modules define.
HOLDERS: dict[str, tuple[str, ...]] = {
    "lifecycle": ("deploy", "validate", "destroy", "save", "cleanup", "demo"),
    "use": ("inspect", "exec", "shell", "ssh"),
    "live": ("link", "run", "node"),
    "observe": ("graph", "capture", "events", "fidelity-sample"),
    "verify": ("check",),
    "bench": ("bench", "report", "compare"),
    "servers": ("servers", "plan"),
    "k8s": ("k8s",),
    "clab": ("clab",),
    "kathara": ("kathara",),
    "clab.compat": ("compat",),
    "machine": ("image", "doctor", "modes", "version", "mobility"),
    "serve": ("serve",),
}


# Commands that read only files and this program: an ordinary user's run as they are; every other one runs in the
# user's own namespaces (docs/rootless.md).
OUTSIDE = {"version", "modes", "plan", "report", "compare", "mobility", "k8s"}


def build(command: str | None = None) -> typer.Typer:
    """The typer app with the module holding ``command`` (every module when there is none or it is unknown).
    typer is imported here: ``nestlab link set`` goes without it (cli/quick.py)."""
    import typer

    from .common import needs_root

    app = typer.Typer(
        help="Build, use and tear down networks of namespace containers.\n\n"
        "Typical session:  nestlab deploy -t lab.yml ; nestlab exec --lab NAME h1 -- ping -c1 10.0.0.2 ; nestlab destroy --lab NAME",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    app.callback()(needs_root)
    holders = [module for module, commands in HOLDERS.items() if command in commands] or list(HOLDERS)
    for module in holders:
        app.add_typer(importlib.import_module(f"{__package__}.{module}").commands)
    return app


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
        if sys.argv[1:2] == ["clab"]:  # containerlab's command line: its global flags anywhere, CLAB_* variables
            from .clab import run

            code = run(sys.argv[2:])
        if code is None:
            build(_command(sys.argv[1:]))()
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

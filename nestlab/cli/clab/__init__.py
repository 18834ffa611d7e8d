"""``nestlab clab ...``: containerlab's own commands, flags and output formats, for the tools that drive
the ``containerlab`` command (docs/compat.md).  ``nestlab compat install-cli`` installs it as
``containerlab``.

Containers are named as containerlab names them (``clab-LAB-NODE``); a node's labels are its own
plus containerlab's (``containerlab``, ``clab-node-name``, ``clab-node-longname``, ``clab-node-kind``,
``clab-node-group``, ``clab-topo-file``), which ``exec --label`` filters on.  containerlab's global
flags (``-t``, ``--name``, ``--vars``, ``-r``, ``-d``, ``--log-level``, ``--timeout``) may stand
anywhere on the line, and ``CLAB_*`` variables give flags as containerlab's do (``CLAB_TOPO``,
``CLAB_DEPLOY_RECONFIGURE``).  ``-t`` takes a file, a folder holding one ``*.clab.yml``, ``-``
(the file on standard input) or a URL.  A flag that changes nothing here says so, with the reason.
"""

from __future__ import annotations

import os
import sys

import typer

from ...errors import LabError
from ..common import err, needs_root_for
from . import generate, inspect, lifecycle, tools  # noqa: F401  (their commands join the app)
from .base import clab_app
from .compat import compat_app
from .topo import fetched, forget

ALIASES = {
    "dep": "deploy",
    "des": "destroy",
    "ins": "inspect",
    "i": "inspect",
    "rdep": "redeploy",
    "gen": "generate",
    "ev": "events",
}
TAKES = {"tools": set(), "version": set(), "events": set(), "generate": {"--name"}}  # global flags a command takes (else all)
_VALUED = {"-t": "--topo", "--topo": "--topo", "--name": "--name", "--vars": "--vars"}
_DROPPED = {"-r", "--runtime", "--log-level", "--timeout"}  # global flags with a value that change nothing here
_ENV = {"CLAB_TOPO": "--topo", "CLAB_NAME": "--name", "CLAB_VARS": "--vars"}


def normalize(args: list[str], env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """containerlab's command line as these commands take it: the command's alias spelled out, global flags
    moved after the command (or dropped, with a note when they ask for something else), ``CLAB_TOPO``-style
    variables added where no flag is given, and ``-t`` made a file."""
    rest: list[str] = []
    given: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if flag in _VALUED or flag in _DROPPED:
            if not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            if flag in _VALUED:
                given.append((_VALUED[flag], value))
            elif flag in ("-r", "--runtime") and value not in ("docker", "podman", ""):
                sys.stderr.write(f"note --runtime {value}: ignored (nestlab's nodes are namespaces, whatever the runtime)\n")
        elif arg in ("-d", "--debug") or (arg.startswith("-d") and set(arg[1:]) == {"d"}):
            pass  # debug output: nestlab says what it does anyway
        else:
            rest.append(arg)
        i += 1
    if rest and rest[0] in ALIASES:
        rest[0] = ALIASES[rest[0]]
    if not rest or {"--help", "-h"} & set(rest):
        return rest
    named = {flag for flag, _ in given}
    for var, flag in _ENV.items():
        if env.get(var) and flag not in named:
            given.append((flag, env[var]))
    taken = TAKES.get(rest[0], set(_VALUED.values()))
    moved = [part for flag, value in given if flag in taken for part in (flag, fetched(value) if flag == "--topo" else value)]
    return rest + moved


def run(args: list[str]) -> int:
    """Run containerlab's command line ``args`` (what follows ``containerlab``); returns the exit code."""

    try:
        args = normalize(args)
    except LabError as exc:
        err.line(f"error {exc}")
        return 2
    code = needs_root_for(args[0] if args else "", {"inspect", "version", "graph"})
    if code:
        return code
    try:
        clab_app(args=args, prog_name="containerlab", auto_envvar_prefix="CLAB", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, (int, type(None))) else 1
        if code:
            return code
    if args and args[0] == "destroy" and "--topo" in args[:-1]:
        forget(args[args.index("--topo") + 1])  # what standard input or a URL gave goes with its lab
    return 0


commands = typer.Typer()
commands.add_typer(clab_app, name="clab")  # containerlab's commands (nestlab compat install-cli makes it `containerlab`)

__all__ = ["clab_app", "commands", "compat_app", "normalize", "run"]

"""``nestlab compat install-cli``: the ``containerlab`` command, run by nestlab."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ...errors import LabError
from ..common import err, reported

compat_app = typer.Typer(help="Compatibility with other tools' commands.", no_args_is_help=True)


TOOLS = {"containerlab": ("clab", "containerlab deploy -t F"), "kathara": ("kathara", "kathara lstart -d DIR")}


@compat_app.command("install-cli")
def install_cli(
    tool: str = typer.Argument("containerlab", help="containerlab or kathara: the command to install."),
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the command."),
    force: bool = typer.Option(False, "--force", help="Replace a command of that name that is not nestlab's."),
):
    """Install a `containerlab` (or `kathara`) command that runs `nestlab clab ...` (`nestlab kathara ...`),
    for people and tools that call them."""
    with reported():
        if tool not in TOOLS:
            raise LabError(f"install-cli {tool}: give containerlab or kathara")
        group, example = TOOLS[tool]
        target = directory / tool
        if target.exists() and "nestlab" not in target.read_text(errors="replace") and not force:
            raise LabError(f"{target} exists and is not nestlab's; --force replaces it")
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(
            f"#!/bin/sh\n# nestlab's {tool}-compatible command (nestlab compat install-cli {tool})\n"
            f'exec {sys.executable} -m nestlab.cli.app {group} "$@"\n'
        )
        target.chmod(0o755)
        err.line(f"installed {target}: `{example}` now runs nestlab")

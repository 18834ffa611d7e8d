"""``nestlab compat install-cli``: the ``containerlab`` command, run by nestlab."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ...errors import LabError
from ..common import err, reported

compat_app = typer.Typer(help="Compatibility with other tools' commands.", no_args_is_help=True)


@compat_app.command("install-cli")
def install_cli(
    directory: Path = typer.Option(Path("/usr/local/bin"), "--dir", help="Where to put the `containerlab` command."),
    force: bool = typer.Option(False, "--force", help="Replace a `containerlab` that is not nestlab's."),
):
    """Install a `containerlab` command that runs `nestlab clab ...`, for tools that call containerlab."""
    with reported():
        target = directory / "containerlab"
        if target.exists() and "nestlab" not in target.read_text(errors="replace") and not force:
            raise LabError(f"{target} exists and is not nestlab's; --force replaces it")
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(
            "#!/bin/sh\n# nestlab's containerlab-compatible command (nestlab compat install-cli)\n"
            f'exec {sys.executable} -m nestlab.cli.app clab "$@"\n'
        )
        target.chmod(0o755)
        err.line(f"installed {target}: `containerlab deploy -t F` now runs nestlab")

"""`nestlab check`: run a lab's checks: and say when each first held."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.table import Table

from ..backends.kernel import files
from ..errors import LabError
from ..lab.wireless import troubles
from ..verify.checks import junit as to_junit
from ..verify.checks import run
from .common import KubeconfigOpt, LabOpt, NamespaceOpt, TopoOpt, err, notices, out, reported, resolve

commands = typer.Typer()


@commands.command()
def check(
    topo: Path | None = TopoOpt,
    lab: str | None = LabOpt,
    wait: float = typer.Option(60.0, "--wait", min=0.0, help="Seconds each check may take to hold."),
    junit: Path | None = typer.Option(None, "--junit", help="Also write the results as JUnit XML (a test case per check)."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
    destroy: bool = typer.Option(False, "--destroy", help="Destroy the lab afterwards (when this command deployed it)."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
):
    """Run the lab's checks: (docs/checks.md) and report, for each, whether it holds, what it saw and when it
    first held: in seconds after the deploy (this command deploys a lab given by -t that is not running) or
    after the lab's last change; a wireless medium whose process ended is named with its last error.
    Exit 0: every check holds; 1: some do not, or a medium is down; 2: the file is wrong.

    Example: nestlab check -t lab.yml --wait 90 --junit checks.xml
    A lab an operator made (a NestLab): nestlab check --lab nl-demo --kubeconfig kc.yaml
    """

    with reported():
        if fmt not in ("table", "json"):
            raise LabError(f"--format must be table or json, not '{fmt}'")
        found = resolve(topo, lab, kubeconfig, namespace)
        notices(found)
        deployed = False
        if topo is not None and not found.is_running():
            found.deploy()
            deployed = True
            since = time.time()
        else:
            changed = found.changed()
            if changed is None:
                raise LabError(f"lab {found.name} is not running: give -t FILE to deploy and check it")
            since = changed
        down = {} if kubeconfig or namespace else troubles(found)  # a cluster's media are its pods' (nestlab k8s)
        for medium, why in down.items():
            err.line(f"lab {found.name}: the wireless medium {medium} is down: {why}")
        checks = found.topology.checks
        if not checks and down:
            raise typer.Exit(1)
        if not checks:
            raise LabError(f"lab {found.name} has no checks: section (docs/checks.md)")
        try:
            results = run(found, checks, since, wait)
        finally:
            if deployed and destroy:
                found.destroy()
        if junit is not None:
            files.write(junit, to_junit(found.name, results), 0o644)  # through no link another user planted
        if fmt == "json":
            sys.stdout.write(json.dumps({"lab": found.name, "checks": [r.to_json() for r in results]}) + "\n")
        else:
            table = Table("#", "check", "result", "first held", "saw", title=f"checks of {found.name}", title_justify="left")
            for r in results:
                table.add_row(
                    str(r.index + 1),
                    r.title,
                    "[green]holds[/green]" if r.held else "[red]fails[/red]",
                    f"{r.first_held:.2f} s" if r.first_held is not None else ("already" if r.held_at_start else "-"),
                    r.saw,
                )
            out.print(table)
        failed = [r for r in results if not r.held]
        err.line(f"lab {found.name}: {len(results) - len(failed)} of {len(results)} checks hold")
        if failed or down:
            raise typer.Exit(1)

"""The ``nestlab`` command line: the app, the root check, and the command groups (one module each) put together;
``nestlab link set --lab`` goes the quick way (cli/quick.py)."""

from __future__ import annotations

import os
import sys

from . import quick


def build():
    """The typer app with every command group (imported here: `nestlab link set` can go without them)."""
    import typer

    from . import lifecycle, live, machine, observe, use, verify
    from .bench import bench_app, compare_cmd, report_cmd
    from .clab import clab_app, compat_app
    from .common import needs_root
    from .k8s import k8s_app
    from .kathara import kathara_app
    from .servers import plan, servers_app

    app = typer.Typer(
        help="Build, use and tear down networks of namespace containers.\n\n"
        "Typical session:  nestlab deploy -t lab.yml ; nestlab exec --lab NAME h1 -- ping -c1 10.0.0.2 ; nestlab destroy --lab NAME",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )

    app.callback()(needs_root)
    app.add_typer(lifecycle.commands)  # deploy, destroy, save, cleanup, demo
    app.add_typer(use.commands)  # inspect, exec, shell, ssh
    app.add_typer(live.commands)  # link, run, node
    app.add_typer(observe.commands)  # graph, capture, events
    app.add_typer(verify.commands)  # check
    measure = typer.Typer()
    measure.add_typer(bench_app, name="bench")
    measure.command("report")(report_cmd)
    measure.command("compare")(compare_cmd)
    measure.command("plan")(plan)
    app.add_typer(measure)  # bench, report, compare; plan (servers)
    app.add_typer(servers_app, name="servers")
    app.add_typer(k8s_app, name="k8s")
    app.add_typer(clab_app, name="clab")  # containerlab's commands (nestlab compat install-cli makes it `containerlab`)
    app.add_typer(kathara_app, name="kathara")  # Kathará's commands (nestlab compat install-cli kathara makes it `kathara`)
    app.add_typer(compat_app, name="compat")
    app.add_typer(machine.commands)  # image, doctor, modes, version, mobility
    return app


def main() -> None:
    """Run the command, then leave without tearing the interpreter down: freeing every object of a
    large lab one by one took 0.05-0.2 s after a 500-node deploy had printed everything."""
    try:
        code = quick.link_set(sys.argv[3:]) if sys.argv[1:3] == ["link", "set"] else None
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
    os._exit(code or 0)


if __name__ == "__main__":
    main()

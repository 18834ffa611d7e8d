"""`nestlab bench ...`, `nestlab report` and `nestlab compare`: measurements with statistics and reports."""

from __future__ import annotations

import ipaddress
import itertools
import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperGroup

from ..bench import report, results, scenario, tools
from ..bench.suites import SUITES
from ..bench.together import Pair, run_together
from ..errors import LabError
from ..lab.fidelity import Watch, summary_line
from ..registry import KINDS
from .common import err, node_of, out, print_json, reported, resolve


class _WithSuites(TyperGroup):
    """``nestlab bench``: its own commands plus one per benchmark suite, loaded only when asked for."""

    def list_commands(self, ctx):

        return [*super().list_commands(ctx), *SUITES]

    def get_command(self, ctx, name):
        found = super().get_command(ctx, name)
        if found is not None:
            return found

        if name not in SUITES:
            return None
        one = typer.Typer()
        one.command(name)(_suite_command(name))
        return typer.main.get_command(one)


bench_app = typer.Typer(
    cls=_WithSuites,
    help="Measure: rerun a seed paper's experiments (one subcommand per suite), or measure a running lab (run, pingall).",
    no_args_is_help=True,
)


def _suite_command(name: str):

    suite = SUITES[name]

    def command(
        quick: bool = typer.Option(
            False, "--quick", help="Fewer, shorter runs: the whole suite in under 3 minutes (what CI runs)."
        ),
        reps: int | None = typer.Option(
            None, "--reps", help=f"Repetitions per cell (default {suite.reps}; quick {suite.quick_reps})."
        ),
        duration: float | None = typer.Option(
            None, "--duration", help=f"Seconds per measurement (default {suite.duration:g}; quick {suite.quick_duration:g})."
        ),
        out_dir: Path | None = typer.Option(None, "--out", help="Results folder (default results/<suite>-<timestamp>)."),
    ):

        with reported():
            folder = out_dir or Path("results") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=err.real,
                transient=True,
            ) as bar:
                task = bar.add_task(name, total=None)

                def progress(label: str, done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total, description=f"{name}: {label}")

                scenario.run(suite, folder, quick=quick, reps=reps, duration=duration, progress=progress)
            meta, _ = results.load(folder)
            state = "interrupted; finished cells kept" if meta["interrupted"] else "done"
            err.print(f"{name}: {state} -> {folder}/report.html (results.json, results.csv, raw/)")
            judged = [c["fidelity"] for c in results.cells(folder) if c["fidelity"]["measurements"]]
            if line := summary_line(judged):
                err.line(f"{name}: {line} (report.html#fidelity)")
            if meta["interrupted"]:
                raise typer.Exit(130)

    command.__doc__ = (
        f"{suite.title}.\n\nReproduces {suite.paper}. Writes results.json, results.csv, raw tool output and report.html."
    )
    return command


def _address(node, override: str | None) -> str:
    if override:
        return override
    for iface in node.intfs():
        if iface.ip:
            return iface.ip
    raise LabError(f"{node.name} has no IPv4 address to send to; give --address")


@bench_app.command("run")
def bench_run(
    topo: Path | None = typer.Option(None, "-t", "--topo", help="Topology file of the running lab."),
    lab: str | None = typer.Option(None, "--lab", help="Name of the running lab."),
    tool: str = typer.Option("iperf3", "--tool", help="iperf3, sockperf or ping."),
    src: str = typer.Option(..., "--from", help="Client node (or component, host)."),
    dst: str = typer.Option(..., "--to", help="Server node."),
    address: str | None = typer.Option(None, "--address", help="Address to send to (default: the server's first IPv4)."),
    udp: bool = typer.Option(False, "--udp", help="iperf3: UDP instead of TCP."),
    size: int | None = typer.Option(None, "--size", help="Payload bytes (iperf3 -l, sockperf -m, ping -s)."),
    parallel: int = typer.Option(1, "--parallel", help="iperf3 -P: parallel streams."),
    mptcp: bool = typer.Option(False, "--mptcp", help="iperf3 under mptcpize (Debian package mptcpd)."),
    bitrate: str | None = typer.Option(None, "--bitrate", help="iperf3 UDP target rate, e.g. 500M."),
    cpu: int | None = typer.Option(
        None,
        "--cpu",
        help="iperf3 -A: pin both ends to this CPU (with them the path's softirq work), "
        "to keep a measurement off a busy core or to watch one.",
    ),
    duration: float = typer.Option(5, "--duration", help="Seconds."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
):
    """Measure once between two nodes of a running lab (Mininet's iperf, done right).

    JSON keys carry their units: mbps, pps, latency_avg_us, rtt_avg_ms...  Each measurement carries a
    fidelity verdict (ok, doubtful, failed: whether the emulation kept up, docs/fidelity.md).
    Example: nestlab bench run --lab quickstart --from h1 --to h2 --tool iperf3 --parallel 4
    """

    with reported():
        tools.check_run(tool, duration, parallel, size, bitrate, cpu, fmt)
        the_lab = resolve(topo, lab)
        client, server = node_of(the_lab, src), node_of(the_lab, dst)
        target = _address(server, address)
        with Watch(the_lab) as watch:
            if tool == "ping":
                result = _ping(client, target, duration, size)
            elif tool == "iperf3":
                iperf3 = {"udp": udp, "bitrate": bitrate, "length": size, "parallel": parallel, "mptcp": mptcp, "cpu": cpu}
                result = _iperf3(client, server, target, duration, iperf3)
            else:  # sockperf (check_run took only the three)
                result = _sockperf(client, server, target, duration, size)
        verdict = watch.verdict.to_json()
        _show({"tool": tool, "from": src, "to": dst, "address": target, **result, "fidelity": verdict}, fmt)


def _ping(client, target: str, duration: float, size: int | None) -> dict:
    """Five pings a second for ``duration`` seconds: loss and round trips."""
    tools.require("ping")
    count = str(max(1, int(duration * 5)))
    command = ["ping", "-n", "-q", "-c", count, "-i", "0.2", *(["-s", str(size)] if size else []), target]
    return tools.parse_ping(client.cmd(command, timeout=duration + 30))


def _iperf3(client, server, target: str, duration: float, options: dict) -> dict:
    """One iperf3 run from ``client`` to a server started on ``server`` (``options``: tools.iperf3_command's)."""
    tools.require("iperf3")
    if options["mptcp"]:
        tools.require("mptcpize")
    command = tools.iperf3_command(target, 5201, duration, **options)
    serving = tools.iperf3_server_command(target, mptcp=options["mptcp"])
    (ran,) = run_together([Pair(client, command, server, serving)], timeout=duration + 30)
    return tools.parse_iperf3(ran.stdout)


def _sockperf(client, server, target: str, duration: float, size: int | None) -> dict:
    """sockperf's throughput test, then its ping-pong: packets and megabits a second, then latencies."""
    tools.require("sockperf")
    found = {}
    for test in ("throughput", "ping-pong"):
        command = tools.sockperf_command(test, target, 11111, duration, size or 64)
        serving = ["sockperf", "server", "-i", target, "-p", "11111"]
        (ran,) = run_together([Pair(client, command, server, serving)], timeout=duration + 30)
        found[test] = tools.parse_sockperf(ran.stdout)
    latencies = {k: v for k, v in found["ping-pong"].items() if k.startswith("latency_")}
    return {"pps": found["throughput"]["pps"], "mbps": found["throughput"]["mbps"], **latencies}


def _show(result: dict, fmt: str) -> None:
    """A measurement as JSON or a table, and the fidelity verdict's line when it is not ok."""
    verdict = result["fidelity"]
    if fmt == "json":
        print_json(result)
    else:
        table = Table("measure", "value")
        for key, value in result.items():
            if key != "fidelity":
                table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
        table.add_row("fidelity", verdict["verdict"])
        out.print(table)
    if line := summary_line([verdict]):
        err.line(f"{line} (--format json: its figures)")


def _nearest(src, dst) -> str:
    """dst's address on a subnet src is directly on, else dst's first address."""

    mine = [ipaddress.ip_interface(a).network for i in src.intfs() for a in i.ipv4]
    for iface in dst.intfs():
        for cidr in iface.ipv4:
            if ipaddress.ip_interface(cidr).network in mine:
                return cidr.split("/")[0]
    return _address(dst, None)


@bench_app.command("pingall")
def pingall(
    topo: Path | None = typer.Option(None, "-t", "--topo", help="Topology file of the running lab."),
    lab: str | None = typer.Option(None, "--lab", help="Name of the running lab."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
):
    """Ping every addressed node from every other (one packet each, all at once), like Mininet's pingall.

    The target is the address on a subnet the pinging node shares, when there is one.

    Exits 1 if any pair fails. Example: nestlab bench pingall --lab quickstart
    """

    with reported():
        the_lab = resolve(topo, lab)
        nodes = {
            name: node
            for name, node in the_lab.nodes.items()
            if KINDS.get(node.kind).endpoint and any(i.ip for i in node.intfs())
        }
        pairs = [(a, b, _nearest(nodes[a], nodes[b])) for a, b in itertools.permutations(nodes, 2)]
        procs = [
            (a, b, ip, nodes[a].popen(["ping", "-n", "-q", "-c", "1", "-W", "1", ip], stdout=-1, stderr=-3, text=True))
            for a, b, ip in pairs
        ]
        rows = []
        for a, b, ip, proc in procs:
            text, _ = proc.communicate(timeout=30)
            rows.append(
                {
                    "from": a,
                    "to": b,
                    "address": ip,
                    "ok": proc.returncode == 0,
                    **(tools.parse_ping(text) if "transmitted" in text else {}),
                }
            )
        lost = [r for r in rows if not r["ok"]]
        if fmt == "json":
            print_json(rows)
        else:
            for a in nodes:
                reached = [r["to"] if r["ok"] else "X" for r in rows if r["from"] == a]
                out.print(f"{a} -> {' '.join(reached)}")
            out.print(
                f"*** results: {100.0 * len(lost) / len(rows) if rows else 0:.0f}% dropped ({len(rows) - len(lost)}/{len(rows)} received)"
            )
        if lost:
            raise typer.Exit(1)


def report_cmd(folder: Path = typer.Argument(..., help="A results folder.")):
    """Regenerate report.html of a results folder (e.g. after upgrading nestlab)."""

    with reported():
        meta, _ = results.load(folder)
        path = report.render(folder, _suite_of(meta))
        err.print(f"wrote {path}")


def compare_cmd(
    first: Path = typer.Argument(..., help="Results folder (the reference)."),
    second: Path = typer.Argument(..., help="Results folder to compare with it."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
):
    """Per figure and cell: both means and second/first with a 95 % interval (e.g. two kernels, two machines)."""

    with reported():
        meta_a, _ = results.load(first)
        meta_b, _ = results.load(second)
        if meta_a["suite"] != meta_b["suite"]:
            raise LabError(f"{first} is suite {meta_a['suite']} and {second} is {meta_b['suite']}; compare runs of one suite")
        rows = report.compare(first, second, _suite_of(meta_a))
        if fmt == "json":
            print_json(rows)
            return
        table = Table("figure", "cell", "first", "second", "second/first", "95 % CI")
        for r in rows:
            cell = ", ".join(
                f"{k}={v}" for k, v in r.items() if k not in ("figure", "first", "second", "ratio", "ci95_low", "ci95_high")
            )
            table.add_row(
                r["figure"],
                cell,
                f"{r['first']:.4g}",
                f"{r['second']:.4g}",
                f"{r['ratio']:.3f}",
                f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]",
            )
        out.print(table)


def _suite_of(meta: dict):

    if meta.get("suite") not in SUITES:
        raise LabError(f"unknown suite {meta.get('suite')!r} in results.json (known: {', '.join(SUITES)})")
    return SUITES[meta["suite"]]


commands = typer.Typer()
commands.add_typer(bench_app, name="bench")
commands.command("report")(report_cmd)
commands.command("compare")(compare_cmd)

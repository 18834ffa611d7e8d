"""Seed 003: NestedNet's nodes holding component containers, against flat (Containernet-style) nodes.

The testbed is the paper's MANET: drones, each a GNAB and iPHY components joined by the drone's
internal switch, every iPHY with a radio on the main switch.  ``nested`` gives each component
its own network stack and cgroup; ``flat`` makes the components processes sharing the drone's
stack, as Containernet does.  Experiments (the ``experiment`` axis), each nested and flat:

* ``intra``: iPHY -> GNAB in one drone of 12, 1/2/4 connections at once (Table II);
* ``inter``: iPHY -> iPHY of another drone over the main switch, 1/2/4 (Table III).
  Both give each connection's TCP throughput (iperf3), then its RTT (ping, the pairs at once).
* ``stress``: one baseline stream iPHY -> GNAB; from a quarter to half of the run a 120-stream
  iperf3 over loopback in the same drone (flat: the baseline's own stack; nested: another
  component's).  D = (T1 - T2) / T1 from the baseline's throughput before and during (Fig. 3).
* ``scale``: two drones with 5..25 iPHYs, every iPHY sending to its GNAB at once (Fig. 4).
* ``startup``: deploy time and memory per drone, 12 drones x 4 iPHYs and 2 x 25 (Tables IV, I).
"""

from __future__ import annotations

import statistics
import subprocess
import time
from typing import Any

from ...lab.lab import Lab
from ...lab.node import Node
from .. import memory, tools
from ..suite import Cell, Figure, Key, Recorder, Suite
from ..together import Pair, run_together

PAPER = "Seed 003, 'NestedNet', sec. V (Tables I-IV, Figures 3-4)"
BASE_PORT = 5201
NESTINGS = ["nested", "flat"]
SIZES = {"12x4": (12, 4), "2x25": (2, 25)}  # drones x iPHYs, Table IV's two rows


def manet(nesting: str, drones: int, iphys: int) -> Lab:
    """The MANET: ``drones`` of one GNAB and ``iphys`` iPHYs, every radio on one main switch."""
    lab = Lab(f"bench-nested-{nesting}-{drones}x{iphys}", ipv4_pool="10.64.0.0/10")
    lab.add_node("main", kind="bridge")
    for d in range(1, drones + 1):
        lab.add_node(f"drone{d}", nesting=nesting, components={"gnab": {}, **{f"iphy{i}": {} for i in range(1, iphys + 1)}})
        for i in range(1, iphys + 1):
            lab.add_link(f"drone{d}/iphy{i}:radio{i}", f"main:d{d}r{i}")
    return lab


def shape(cell: Cell) -> tuple[int, int]:
    """(drones, iPHYs) of the MANET a cell runs on."""
    if cell["experiment"] == "scale":
        return 2, cell["iphys"]
    if cell["experiment"] == "startup":
        return SIZES[cell["size"]]
    return 12, 4


def gnab_address(running: Lab, drone: str) -> str:
    """Where a drone's GNAB listens: its own interface when nested, the shared stack's loopback when flat."""
    intfs = running.nodes[f"{drone}/gnab"].intfs()
    if not intfs:
        return "127.0.0.1"
    address = intfs[0].ip
    assert address is not None  # the lab addresses a nested GNAB's interface
    return address


def _iperf_pair(client: Node, server: Node, address: str, port: int, seconds: float, **options: Any) -> Pair:
    return Pair(
        client, tools.iperf3_command(address, port, seconds, **options), server, tools.iperf3_server_command(address, port)
    )


def connections(running: Lab, cell: Cell) -> list[Key]:
    """(client, server, address) of each connection: iPHYs to their GNAB, or iPHY1 of drone 2k+1 to drone 2k+2's."""
    if cell["experiment"] == "intra":
        return [
            (running.nodes[f"drone1/iphy{k + 1}"], running.nodes["drone1/gnab"], gnab_address(running, "drone1"))
            for k in range(cell["connections"])
        ]
    out = []
    for k in range(cell["connections"]):
        server = running.nodes[f"drone{2 * k + 2}/iphy1"]
        out.append((running.nodes[f"drone{2 * k + 1}/iphy1"], server, server.intf("radio1").ip))
    return out


def measure_links(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    """Tables II and III: throughput of N connections at once, then their RTT, at once."""
    links = connections(running, cell)
    label = f"{cell['experiment']}-{cell['nesting']}-{cell['connections']}"
    ran = run_together(
        [_iperf_pair(c, s, a, BASE_PORT + k, duration) for k, (c, s, a) in enumerate(links)], timeout=duration + 60
    )
    count = max(10, int(duration * 5))
    pings = run_together(
        [Pair(c, ["ping", "-n", "-q", "-c", str(count), "-i", f"{duration / count:.3f}", a]) for c, _, a in links],
        timeout=duration + 30,
    )
    rows = []
    for k, (run, ping) in enumerate(zip(ran, pings)):
        rec.raw(f"iperf3-{label}-conn{k}", run.command, run.stdout + run.stderr)
        rec.raw(f"ping-{label}-conn{k}", ping.command, ping.stdout + ping.stderr)
        parsed = tools.parse_iperf3(run.stdout)
        rows.append(
            {
                "pair": k,
                "gbps": parsed["mbps"] / 1000,
                "retransmits": parsed["retransmits"],
                "rtt_ms": tools.parse_ping(ping.stdout)["rtt_avg_ms"],
                "started_ns": run.started_ns,
            }
        )
    return [*rows, {"pair": "all", "total_gbps": sum(r["gbps"] for r in rows)}]


def measure_stress(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    """Fig. 3: a baseline stream's throughput over time, with 120 background streams in its drone for a while."""
    total = max(8.0, 40 * duration / 60)  # the paper's 40 s run, scaled like the other measurements
    start, stop, step = total / 4, total / 2, min(1.0, total / 24)
    gnab, iphy, noisy = (running.nodes[f"drone1/{c}"] for c in ("gnab", "iphy1", "iphy2"))
    address = gnab_address(running, "drone1")
    base_cmd = tools.iperf3_command(address, BASE_PORT, total, interval=step)
    bg_cmd = tools.iperf3_command("127.0.0.1", BASE_PORT + 100, stop - start, parallel=120, interval=step)
    procs = [
        gnab.popen(tools.iperf3_server_command(address, BASE_PORT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        noisy.popen(
            tools.iperf3_server_command("127.0.0.1", BASE_PORT + 100), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
    ]
    try:
        time.sleep(0.3)
        base = iphy.popen(base_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(base)
        t0 = time.monotonic()
        time.sleep(start)
        bg_start = time.monotonic() - t0
        bg = noisy.popen(bg_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(bg)
        bg_out, _ = bg.communicate(timeout=stop - start + 60)
        bg_end = time.monotonic() - t0
        out, _ = base.communicate(timeout=total + 60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    rec.raw(f"iperf3-stress-{cell['nesting']}-baseline", base_cmd, out)
    rec.raw(f"iperf3-stress-{cell['nesting']}-background", bg_cmd, bg_out)
    intervals = tools.iperf3_intervals(out)
    loaded = bg_end - (stop - start)  # the background sent for its last stop - start seconds (after connecting 120 streams)
    before = [mbps for s, e, mbps in intervals if s >= step and e <= bg_start]  # the first interval is slow start
    during = [mbps for s, e, mbps in intervals if s >= loaded and e <= bg_end]
    if not (before and during):
        raise ValueError(f"stress run too short to see before and during the background load ({len(intervals)} intervals)")
    t1, t2 = statistics.fmean(before) / 1000, statistics.fmean(during) / 1000
    series = [{"pair": 0, "t_s": round(round(s / step) * step, 3), "baseline_gbps": mbps / 1000} for s, _, mbps in intervals]
    return [
        *series,
        {
            "pair": "all",
            "t1_gbps": t1,
            "t2_gbps": t2,
            "degradation_pct": 100 * (t1 - t2) / t1 if t1 else None,
            "background_gbps": tools.parse_iperf3(bg_out)["mbps"] / 1000,
            "background_s": [round(loaded, 2), round(bg_end, 2)],
        },
    ]


def measure_scale(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    """Fig. 4: every iPHY of both drones sends to its GNAB at once; per-link mean and spread per drone."""
    pairs, drones = [], []
    for d in (1, 2):
        address = gnab_address(running, f"drone{d}")
        for i in range(1, cell["iphys"] + 1):
            pairs.append(
                _iperf_pair(running.nodes[f"drone{d}/iphy{i}"], running.nodes[f"drone{d}/gnab"], address, BASE_PORT + i, duration)
            )
            drones.append(d)
    rows = []
    for k, (drone, run) in enumerate(zip(drones, run_together(pairs, timeout=duration + 90))):
        rec.raw(f"iperf3-scale-{cell['nesting']}-{cell['iphys']}-drone{drone}-link{k}", run.command, run.stdout + run.stderr)
        rows.append({"pair": k, "drone": drone, "gbps": tools.parse_iperf3(run.stdout)["mbps"] / 1000})
    spread = []
    for d in (1, 2):
        links = [r["gbps"] for r in rows if r["drone"] == d]
        spread.append(
            100 * statistics.stdev(links) / statistics.fmean(links) if len(links) > 1 and statistics.fmean(links) else 0.0
        )
    return [*rows, {"pair": "all", "total_gbps": sum(r["gbps"] for r in rows), "link_dev_pct": statistics.fmean(spread)}]


def measure_startup(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    """Tables IV and I: deploy the MANET afresh, timed; then its memory (kernel growth + processes) per drone."""
    running.destroy()
    time.sleep(0.5)
    before = memory.kernel_kb()
    t0 = time.perf_counter()
    running.deploy()
    seconds = time.perf_counter() - t0
    time.sleep(0.3)
    used_kb = memory.kernel_kb() - before + memory.lab_pss_kb(running)
    drones = SIZES[cell["size"]][0]
    return [{"pair": "all", "startup_s": seconds, "memory_per_node_mb": used_kb / 1024 / drones}]


MEASURES = {
    "intra": measure_links,
    "inter": measure_links,
    "stress": measure_stress,
    "scale": measure_scale,
    "startup": measure_startup,
}


def measure(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    return MEASURES[cell["experiment"]](running, cell, duration, rec)


def lab_key(cell: Cell) -> Key:
    """Intra, inter and stress share one deployed 12-drone MANET per nesting; startup deploys its own."""
    return (cell["experiment"] == "startup", cell["nesting"], *shape(cell))


def _table(
    number: str, experiment: str, metric: str, unit: str, paper: dict[Key, float], higher_is_better: bool = True
) -> Figure:
    what = "throughput per connection" if metric == "gbps" else "RTT"
    where = "intra-node (iPHY to GNAB)" if experiment == "intra" else "inter-node (iPHY to iPHY)"
    return Figure(
        f"table{number}-{metric}",
        f"Table {number}: {where} {what}, 12 drones",
        metric,
        unit,
        "nesting",
        "connections",
        {"experiment": experiment},
        paper=paper,
        paper_ref=f"{PAPER}, Table {number} (flat = Containernet)",
        higher_is_better=higher_is_better,
    )


def _paper(flat: list[float], nested: list[float]) -> dict[Key, float]:
    return {**{("flat", n): v for n, v in zip((1, 2, 4), flat)}, **{("nested", n): v for n, v in zip((1, 2, 4), nested)}}


FIGURES = [
    _table("II", "intra", "gbps", "Gbit/s", _paper([30.36, 27.46, 17.57], [31.76, 26.29, 19.58])),
    _table("II", "intra", "rtt_ms", "ms", _paper([0.056, 0.053, 0.052], [0.075, 0.072, 0.072]), higher_is_better=False),
    _table("III", "inter", "gbps", "Gbit/s", _paper([26.92, 24.11, 14.19], [32.05, 25.42, 15.74])),
    _table("III", "inter", "rtt_ms", "ms", _paper([0.082, 0.075, 0.074], [0.080, 0.074, 0.073]), higher_is_better=False),
    Figure(
        "fig3-series",
        "Fig. 3: baseline throughput over time, 120 background streams from 1/4 to 1/2 of the run "
        "(paper: Containernet 30 -> 0.5 Gbit/s, NestedNet 30 -> 8)",
        "baseline_gbps",
        "Gbit/s",
        "t_s",
        "nesting",
        {"experiment": "stress"},
        line=True,
    ),
    Figure(
        "fig3-degradation",
        "Fig. 3: degradation D = (T1 - T2) / T1 of the baseline stream",
        "degradation_pct",
        "%",
        "nesting",
        "experiment",
        {"experiment": "stress"},
        paper={("flat", "stress"): 98.0, ("nested", "stress"): 72.0},
        paper_ref=f"{PAPER}, Fig. 3 (flat = Containernet)",
        higher_is_better=False,
        aggregate=True,
    ),
    Figure(
        "fig4-throughput",
        "Fig. 4: intra-node throughput per link vs iPHYs per drone, two drones",
        "gbps",
        "Gbit/s",
        "iphys",
        "nesting",
        {"experiment": "scale"},
        line=True,
        paper_ref=f"{PAPER}, Fig. 4",
        claim="throughput per link drops steeply as iPHYs per node grow",
        claim_rank=[5, 10, 15, 20, 25],
    ),
    Figure(
        "fig4-deviation",
        "Fig. 4: spread of per-link throughput (stdev as % of mean) vs iPHYs per drone",
        "link_dev_pct",
        "%",
        "iphys",
        "nesting",
        {"experiment": "scale"},
        line=True,
        aggregate=True,
        higher_is_better=False,
        paper={(5, "flat"): 6.0, (25, "flat"): 13.0, (5, "nested"): 4.0, (25, "nested"): 7.0},
        paper_ref=f"{PAPER}, sec. V-D on Fig. 4 (flat = Containernet: 6 to 13 %; NestedNet 4 % at 5 iPHYs to 7 % at 25)",
    ),
    Figure(
        "table4-startup",
        "Table IV: emulator start-up time",
        "startup_s",
        "s",
        "nesting",
        "size",
        {"experiment": "startup"},
        paper={("flat", "12x4"): 28.0, ("nested", "12x4"): 98.0, ("flat", "2x25"): 9.0, ("nested", "2x25"): 93.0},
        paper_ref=f"{PAPER}, Table IV (flat = Containernet)",
        higher_is_better=False,
        aggregate=True,
    ),
    Figure(
        "table1-memory",
        "Table I: memory per drone (1 GNAB + 4 iPHYs)",
        "memory_per_node_mb",
        "MB",
        "nesting",
        "size",
        {"experiment": "startup", "size": "12x4"},
        paper={("flat", "12x4"): 55.0, ("nested", "12x4"): 98.4},
        paper_ref=f"{PAPER}, Table I, single node (flat = Containernet; the paper's includes a Docker daemon and an OVS per node)",
        higher_is_better=False,
        aggregate=True,
    ),
]


def _axes(iphys: list[int]) -> list[dict[str, list[Any]]]:
    return [
        {"experiment": ["intra", "inter"], "nesting": NESTINGS, "connections": [1, 2, 4]},
        {"experiment": ["stress"], "nesting": NESTINGS},
        {"experiment": ["scale"], "nesting": NESTINGS, "iphys": iphys},
        {"experiment": ["startup"], "nesting": NESTINGS, "size": list(SIZES)},
    ]


SUITE = Suite(
    name="nested",
    title="Nested nodes (NestedNet) against flat ones (Containernet): throughput, RTT, isolation, scaling, start-up, memory (seed 003)",
    paper=PAPER,
    axes=_axes([5, 10, 15, 20, 25]),
    quick_axes=_axes([5, 15, 25]),
    reps=10,
    quick_reps=2,
    duration=60,
    quick_duration=1,
    build=lambda cell: manet(cell["nesting"], *shape(cell)),
    lab_key=lab_key,
    measure=measure,
    figures=FIGURES,
    notes=[
        "flat stands for Containernet: components are processes sharing their drone's network stack (a flat GNAB listens on loopback).",
        "The paper's switches were Open vSwitch and its containers Docker-in-Docker; here both switches are Linux bridges and "
        "components are namespaces with cgroups of their own, so start-up and memory compare only in ranking.",
        "Inter-node connections run iPHY1 of drone 2k+1 to iPHY1 of drone 2k+2 (the paper chose random drones).",
        "The stress run lasts the paper's 40 s scaled by --duration/60 (at least 8 s), background from 1/4 to 1/2 of it; "
        "T2 counts only the seconds the background was sending (its 120 connections take a moment to open).",
    ],
)

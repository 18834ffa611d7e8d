"""Seed 000: LXC networking modes (host / none / bridge+NAT / macvlan, + ipvlan where the kernel has it).

sockperf UDP with 28 B and 1024 B payloads, 1 and 10 container pairs started together,
servers on one emulated host and clients on the same host or on a second one joined by a
wire.  Packets per second come from ``sockperf throughput`` (what each client sends, as in
the paper), latency from ``sockperf ping-pong`` (average round trip / 2, as sockperf reports).
"""

from __future__ import annotations

from typing import Any

from ...backends.kernel import probe
from ...lab.lab import Lab
from ...lab.node import Node
from .. import tools
from ..suite import Cell, Figure, Key, Recorder, Suite
from ..together import Pair, run_together

PAPER = "Seed 000, 'Performance of LXC networking modes for large-scale user-behaviour simulation in a cyber range', sec. 4.2"
BASE_PORT = 11111

# The paper's Figures 4-11 (sec. 4.2), per (mode, pairs).  Its latencies are printed in "ms" but are
# sockperf's microsecond figures (5.7 "ms" host latency on loopback-class hardware); shown as printed.
PPS: dict[tuple[str, int], dict[Key, float]] = {
    ("same", 1024): {
        ("host", 1): 87263,
        ("none", 1): 78308,
        ("bridge", 1): 64698,
        ("macvlan", 1): 96692,
        ("none", 10): 37375,
        ("bridge", 10): 31186,
        ("macvlan", 10): 42462,
    },
    ("same", 28): {
        ("host", 1): 89533,
        ("none", 1): 79355,
        ("bridge", 1): 66310,
        ("macvlan", 1): 99204,
        ("none", 10): 38446,
        ("bridge", 10): 31361,
        ("macvlan", 10): 44924,
    },
    ("cross", 1024): {
        ("host", 1): 3801,
        ("none", 1): 3821,
        ("bridge", 1): 3741,
        ("macvlan", 1): 3960,
        ("none", 10): 3823,
        ("bridge", 10): 3052,
        ("macvlan", 10): 3819,
    },
    ("cross", 28): {
        ("host", 1): 8244,
        ("none", 1): 8624,
        ("bridge", 1): 7064,
        ("macvlan", 1): 8248,
        ("none", 10): 8654,
        ("bridge", 10): 5717,
        ("macvlan", 10): 8515,
    },
}
LATENCY = {
    ("same", 1024): {
        ("host", 1): 5.690,
        ("none", 1): 6.339,
        ("bridge", 1): 7.685,
        ("macvlan", 1): 5.130,
        ("none", 10): 10.800,
        ("bridge", 10): 13.395,
        ("macvlan", 10): 8.956,
    },
    ("same", 28): {
        ("host", 1): 5.545,
        ("none", 1): 6.256,
        ("bridge", 1): 7.497,
        ("macvlan", 1): 4.994,
        ("none", 10): 10.441,
        ("bridge", 10): 13.151,
        ("macvlan", 10): 8.705,
    },
    ("cross", 1024): {
        ("host", 1): 131.186,
        ("none", 1): 130.486,
        ("bridge", 1): 133.299,
        ("macvlan", 1): 125.934,
        ("none", 10): 127.104,
        ("bridge", 10): 158.864,
        ("macvlan", 10): 128.053,
    },
    ("cross", 28): {
        ("host", 1): 60.421,
        ("none", 1): 57.738,
        ("bridge", 1): 70.508,
        ("macvlan", 1): 60.409,
        ("none", 10): 55.283,
        ("bridge", 10): 84.277,
        ("macvlan", 10): 56.050,
    },
}
_FIG = {("same", 1024): (4, 8), ("same", 28): (5, 9), ("cross", 1024): (6, 10), ("cross", 28): (7, 11)}


def topology(cell: Cell) -> str:
    """Servers s0.. on host ``server``; clients c0.. on ``client`` (cross) or also on ``server`` (same)."""
    mode, pairs, cross = cell["mode"], cell["pairs"], cell["placement"] == "cross"
    chost = "client" if cross else "server"
    text = f"name: bench-lxc-{mode}-{pairs}-{cell['placement']}\nhosts: {{server: {{}}, client: {{}}}}\n"
    text += 'wires: [{endpoints: ["server:nic0", "client:nic0"]}]\ntopology:\n  nodes:\n'
    if mode == "host":
        return text + "    {}\n  links: []\n"
    for i in range(pairs):
        extra = ", mode: none" if mode == "none" else ""
        text += f"    s{i}: {{host: server{extra}}}\n    c{i}: {{host: {chost}{extra}}}\n"
    if mode == "none":
        return text + "  links: []\n"
    text += "  links:\n"
    for i in range(pairs):
        for node, host in ((f"s{i}", "server"), (f"c{i}", chost)):
            if mode == "bridge":  # lxcbr0: a host bridge with NAT; cross-host servers are reached through DNAT
                publish = f", publish: [{BASE_PORT + i}/udp]" if node.startswith("s") and cross else ""
                text += f'    - {{endpoints: ["{node}:eth1"], mode: bridge, nat: true, bridge: lxcbr0{publish}}}\n'
            else:
                text += f'    - {{endpoints: ["{node}:eth1"], mode: {mode}, parent: "{host}:nic0"}}\n'
    return text


def _ends(running: Lab, cell: Cell, i: int) -> tuple[Node, str | None, Node, str | None]:
    """(server node, address it binds, client node, address the client targets) of pair ``i``."""
    mode, cross = cell["mode"], cell["placement"] == "cross"
    server_host = running.hosts["server"]
    host_ip = server_host.intf("nic0").ip
    if mode == "host":
        return server_host, host_ip, running.hosts["client" if cross else "server"], host_ip
    server, client = running.nodes[f"s{i}"], running.nodes[f"c{i}"]
    if mode == "none":
        return server, host_ip, client, host_ip
    address = server.intf("eth1").ip
    target = host_ip if (mode == "bridge" and cross) else address
    return server, address, client, target


def measure(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {i: {"pair": i} for i in range(cell["pairs"])}
    for test, key in (("throughput", "pps"), ("ping-pong", "latency_avg_us")):
        pairs = []
        for i in range(cell["pairs"]):
            server, address, client, target = _ends(running, cell, i)
            assert address is not None and target is not None  # the lab addresses both ends
            pairs.append(
                Pair(
                    client,
                    tools.sockperf_command(test, target, BASE_PORT + i, duration, cell["payload"]),
                    server,
                    ["sockperf", "server", "-i", address, "-p", str(BASE_PORT + i)],
                )
            )
        for i, ran in enumerate(run_together(pairs, timeout=duration + 30)):
            rec.raw(f"{test}-{cell['mode']}-{cell['placement']}-{cell['payload']}B-pair{i}", ran.command, ran.stdout + ran.stderr)
            parsed = tools.parse_sockperf(ran.stdout)
            rows[i][key] = parsed[key]
            rows[i][f"{key}_started_ns"] = ran.started_ns
    total = {"pair": "all", "pps_total": sum(r["pps"] for r in rows.values())}
    return [*rows.values(), total]


def unavailable(cell: Cell) -> str | None:
    if cell["mode"] == "ipvlan" and probe.missing_for({"ipvlan"}):
        return "this kernel lacks ipvlan (CONFIG_IPVLAN); `make test-vm` style kernels have it"
    if cell["mode"] == "host" and cell["pairs"] > 1:
        return "the paper measured the bare host with one pair only"
    return None


def figures() -> list[Figure]:
    out = []
    for (placement, payload), (pps_fig, lat_fig) in _FIG.items():
        where = {"placement": placement, "payload": payload}
        label = f"{payload} B, {'same host' if placement == 'same' else 'two hosts'}"
        out.append(
            Figure(
                f"fig{pps_fig}",
                f"Fig. {pps_fig}: packets per second per pair, {label}",
                "pps",
                "pkt/s",
                "mode",
                "pairs",
                where,
                PPS[(placement, payload)],
                f"{PAPER}, Figure {pps_fig}",
                "pkt/s",
            )
        )
        out.append(
            Figure(
                f"fig{lat_fig}",
                f"Fig. {lat_fig}: average latency, {label}",
                "latency_avg_us",
                "µs",
                "mode",
                "pairs",
                where,
                LATENCY[(placement, payload)],
                f"{PAPER}, Figure {lat_fig}",
                "'ms' as printed (sockperf µs)",
                higher_is_better=False,
            )
        )
    return out


SUITE = Suite(
    name="lxc-modes",
    title="LXC networking modes: packets per second and latency (seed 000)",
    paper=PAPER,
    axes={
        "mode": ["host", "none", "bridge", "macvlan", "ipvlan"],
        "pairs": [1, 10],
        "payload": [28, 1024],
        "placement": ["same", "cross"],
    },
    # sockperf spends ~2.2 s settling before every run, so --quick keeps the paper's small-packet case (its
    # harder one), both placements, 1 and 10 pairs, and 2 repetitions: 24 runs of each test, under 3 minutes.
    quick_axes={
        "mode": ["none", "bridge", "macvlan", "ipvlan"],
        "pairs": [1, 10],
        "payload": [28],
        "placement": ["same", "cross"],
    },
    reps=10,
    quick_reps=2,
    duration=180,
    quick_duration=1,
    build=lambda cell: Lab.from_text(topology(cell), f"<lxc-modes {cell['mode']}>"),
    lab_key=lambda cell: (cell["mode"], cell["pairs"], cell["placement"]),
    measure=measure,
    figures=figures(),
    unavailable=unavailable,
    notes=[
        "The paper's two hosts were physical machines on a real network (its cross-host pps is about 4-8 k); "
        "here they are emulated hosts joined by an unshaped veth wire, so cross-host figures are far higher and "
        "only the ranking and the relative gaps are comparable.",
        "pps is what each sockperf client sends (the paper's method); latency is sockperf ping-pong's average.",
    ],
)

"""Seed 001: how much of N parallel 100 Mbit/s paths MPTCP and an MPT tunnel aggregate.

Two nodes ``a`` and ``b`` joined by ``paths`` = 1..12 HTB-shaped 100 Mbit/s links, with MPTCP
configured in both (``subflows`` = the kernel's maximum of 8) and a ``nestlab-mpt`` tunnel
(GRE-in-UDP, per-packet weighted round robin, equal weights) over the same paths.  For each N,
one iperf3 connection a -> b of each ``method``:

* ``tcp``: plain TCP on path 1 (the single-path baseline);
* ``mptcp``: both ends under ``mptcpize run``, to b's path-1 address;
* ``mpt-tcp`` / ``mpt-udp``: to b's tunnel address (UDP offered at N x 100 Mbit/s, 1440-byte
  datagrams, which fill a path's 1514-byte frames).

``placement``: ``containerised`` runs the tool in nodes with their own network stack (and, where
there are two cores, each on a core of its own, as two machines are);
``native`` in nodes sharing their emulated host's stack (the paper's native and host-network
containers).  Rows: each path's share of the bytes ``a`` sent, and the total with retransmits,
the share of N x 100 Mbit/s reached and, through the tunnel, its daemons' CPU per Gbit/s; and
where the machine's CPU went meanwhile (user, system, softirq, idle, steal; the daemons' share).
"""

from __future__ import annotations

import os
from typing import Any

from ... import names
from ...backends.kernel import namespaces
from ...backends.services import mpt_daemon
from ...lab.lab import Lab
from .. import tools
from ..suite import Cell, Figure, Recorder, Suite

PAPER = "Seed 001, 'Evaluation of layer-3 multipath solutions using container technologies', sec. V-VII (Figures 5-7)"
RATE_MBIT = 100
PORT = 5201
METHODS = ["tcp", "mptcp", "mpt-tcp", "mpt-udp"]
PLACEMENTS = ["containerised", "native"]
UDP_LENGTH = 1440  # tunnel MTU 1468 (1500 - 32) minus IPv4 and UDP headers


def cores() -> list[dict[str, Any]]:
    """Each of the seed's two machines on a core of its own, where this machine lets us have two (as two
    machines share no CPU): left to the scheduler on two cores, the UDP receiver ran on the sender's core in
    about 40 % of samples and lost 3 % of the datagrams to its full socket buffer, a plain link as much as the
    tunnel; on cores of their own, 0.3 %."""
    allowed = sorted(os.sched_getaffinity(0))
    return [{"resources": {"cpuset": str(cpu)}} for cpu in allowed[:2]] if len(allowed) >= 2 else [{}, {}]


def testbed(placement: str, paths: int, datapath: str = "auto", rate: int = RATE_MBIT) -> Lab:
    """Seed 001's two machines joined by ``paths`` links of ``rate`` Mbit/s, MPTCP and an MPT tunnel over them
    (its ``datapath``: bpf, user or auto); containerised, each machine on a core of its own (:func:`cores`)."""
    lab = Lab(f"bench-mp-{placement[:6]}-{paths}-{datapath[0]}{rate}", ipv4_pool="10.80.0.0/16")
    native = placement == "native"
    if native:
        lab.add_host("server")
        lab.add_host("client")
    mptcp = {"subflows": 8, "add_addr_accepted": 8}
    for (name, host), own in zip((("a", "client"), ("b", "server")), cores()):
        lab.add_node(name, mptcp=mptcp, **({"mode": "host", "host": host} if native else own))
    lab.add_link("a", "b", paths=paths, params={"rate": f"{rate}mbit"}, multipath={"type": "mpt", "datapath": datapath})
    return lab


def tx_bytes(running: Lab, node: str, paths: int) -> list[int]:
    """Bytes ``node`` has sent on each path interface p1..pN (kernel counters)."""
    with namespaces.iproute(names.netns_path(running.name, node)) as ipr:
        sent = {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_STATS64")["tx_bytes"] for link in ipr.get_links()}
    return [sent[f"p{k}"] for k in range(1, paths + 1)]


def tunnel_cpu_seconds(running: Lab) -> float:
    """CPU time (user + system) the lab's tunnel daemons have used so far."""
    return sum(tools.cpu_seconds(pid) or 0.0 for pid in mpt_daemon.pids(running.name))


def _rate(cell: Cell) -> int:
    return int(cell.get("rate", RATE_MBIT))


def run_iperf3(running: Lab, cell: Cell, duration: float, rec: Recorder) -> dict[str, Any]:
    a, b = running.nodes["a"], running.nodes["b"]
    method, paths = cell["method"], cell["paths"]
    address = b.intf("mpt0" if method.startswith("mpt-") else "p1").ip
    assert address is not None  # the lab addresses both
    udp = method == "mpt-udp"
    return tools.iperf3(
        a,
        b,
        address,
        duration,
        PORT,
        omit=1,
        mptcp=method == "mptcp",
        udp=udp,
        bitrate=f"{paths * _rate(cell)}M" if udp else None,
        length=UDP_LENGTH if udp else None,  # iperf3's default socket buffers, as a user runs it
        record=lambda command, out: rec.raw(f"iperf3-{cell['placement']}-{method}-{paths}", command, out),
    )


def measure(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    """One connection a -> b: per-path shares of what a sent, then the total."""
    paths = cell["paths"]
    sent_before, cpu_before, machine_before = (
        tx_bytes(running, "a", paths),
        tunnel_cpu_seconds(running),
        tools.machine_cpu_seconds(),
    )
    result = run_iperf3(running, cell, duration, rec)
    sent = [after - before for after, before in zip(tx_bytes(running, "a", paths), sent_before)]
    cpu = tunnel_cpu_seconds(running) - cpu_before
    machine = {kind: seconds - machine_before[kind] for kind, seconds in tools.machine_cpu_seconds().items()}
    total = sum(sent) or 1
    rows = [{"pair": k + 1, "share_pct": 100 * s / total} for k, s in enumerate(sent)]
    capacity = _rate(cell) * (1 if cell["method"] == "tcp" else paths)
    used = sum(1 for s in sent if s > 0.01 * total)
    summary = {
        "pair": "all",
        "mbps": result["mbps"],
        "capacity_pct": 100 * result["mbps"] / capacity,
        "retransmits": result["retransmits"],
        "lost_pct": result["lost_pct"],
        "paths_used": used,
        "evenness_pct": 100 * min(s / total for s in sent[:used]) * used if used else 0.0,
    }
    summary |= machine_cpu(machine, result["mbps"])
    gbps = result["mbps"] / 1000
    if cell["method"].startswith("mpt-"):
        seconds = duration + 1  # iperf3's -O 1 warm-up second ran the tunnel too
        summary["tunnel_cpu_pct_per_gbps"] = 100 * cpu / seconds / gbps if gbps else None
        summary["cpu_daemons_pct"] = 100 * cpu / (sum(machine.values()) or 1.0)
        # The datapath the daemon reports using (older daemons: user), beside the cell's own ``datapath`` (what was asked)
        summary["datapath_used"] = mpt_daemon.counters(running.name, "a").get("datapath", "user").split(" ")[0]
    return [*rows, summary]


def machine_cpu(spent: dict[str, float], mbps: float) -> dict[str, Any]:
    """Where the machine's CPU went (``spent``: seconds by kind, every core), in % of all its cores, and its
    busy time per Gbit/s carried in % of one core (every core, kernel work included: a kernel datapath's
    work is softirq, not a daemon's; steal left out)."""
    whole = sum(spent.values()) or 1.0
    shares = {f"cpu_{kind}_pct": 100 * seconds / whole for kind, seconds in spent.items()}
    busy = (whole - spent.get("idle", 0.0) - spent.get("steal", 0.0)) / whole * (os.cpu_count() or 1)
    return shares | {"machine_cpu_pct_per_gbps": 100 * busy / (mbps / 1000) if mbps else None}


def _line(
    fig_id: str, title: str, metric: str, unit: str, series: str, where: dict[str, Any], claim: str = "", **extra: Any
) -> Figure:
    return Figure(
        fig_id,
        title,
        metric,
        unit,
        "paths",
        series,
        where,
        line=True,
        aggregate=True,
        paper_ref=PAPER if claim else "",
        claim=claim,
        **extra,
    )


PAPER_CELLS = {"placement": "containerised", "datapath": "user", "rate": RATE_MBIT}  # the tunnel in its daemon, as the paper's
FIGURES = [
    _line(
        "fig5-mpt-tcp",
        "Fig. 5: TCP (iperf3) through the MPT tunnel over N x 100 Mbit/s, tool native or containerised",
        "mbps",
        "Mbit/s",
        "placement",
        {"method": "mpt-tcp", "datapath": "user", "rate": RATE_MBIT},
        "Fig. 5: iperf in Singularity reaches almost the native throughput; in Docker it does not scale beyond 9 NICs",
    ),
    _line(
        "fig6-mpt-udp",
        "Fig. 6: UDP through the MPT tunnel over N x 100 Mbit/s, tool native or containerised",
        "mbps",
        "Mbit/s",
        "placement",
        {"method": "mpt-udp", "datapath": "user", "rate": RATE_MBIT},
        "Fig. 6: containerised MPT in Singularity almost reaches native; in Docker it equals native up to 7 NICs, then falls behind",
    ),
    _line(
        "fig7-mptcp",
        "Fig. 7: MPTCP over N x 100 Mbit/s, tool native or containerised",
        "mbps",
        "Mbit/s",
        "placement",
        {"method": "mptcp", "rate": RATE_MBIT},
        "Fig. 7: native and containerised are almost the same; MPTCP uses at most 8 NICs, which limits all of them",
    ),
    _line(
        "methods",
        "Aggregate throughput of each method over N x 100 Mbit/s paths (containerised)",
        "mbps",
        "Mbit/s",
        "method",
        PAPER_CELLS,
    ),
    _line(
        "capacity",
        "Share of N x 100 Mbit/s reached (plain TCP: of one path), containerised",
        "capacity_pct",
        "%",
        "method",
        PAPER_CELLS,
    ),
    _line(
        "paths-used",
        "Paths carrying more than 1 % of the bytes, containerised",
        "paths_used",
        "paths",
        "method",
        PAPER_CELLS,
    ),
    _line(
        "evenness",
        "Evenness: the smallest used path's share x paths used (100 = an equal share each), containerised",
        "evenness_pct",
        "%",
        "method",
        PAPER_CELLS,
    ),
    _line(
        "retransmits",
        "TCP retransmits per connection, containerised",
        "retransmits",
        "segments",
        "method",
        PAPER_CELLS,
        higher_is_better=False,
    ),
    _line(
        "tunnel-cpu",
        "MPT tunnel: CPU of both daemons per Gbit/s carried (% of one core)",
        "tunnel_cpu_pct_per_gbps",
        "% core per Gbit/s",
        "method",
        PAPER_CELLS,
        higher_is_better=False,
    ),
    _line(
        "machine-idle",
        "Where the CPU went: the machine's idle share while each method ran (all cores), containerised",
        "cpu_idle_pct",
        "%",
        "method",
        PAPER_CELLS,
    ),
    _line(
        "datapath-udp",
        "The MPT tunnel's two datapaths: UDP (iperf3, default socket buffers) over N x 100 Mbit/s, containerised",
        "mbps",
        "Mbit/s",
        "datapath",
        {"placement": "containerised", "method": "mpt-udp", "rate": RATE_MBIT},
    ),
    _line(
        "datapath-tcp",
        "The MPT tunnel's two datapaths: one TCP connection over N x 100 Mbit/s, containerised",
        "mbps",
        "Mbit/s",
        "datapath",
        {"placement": "containerised", "method": "mpt-tcp", "rate": RATE_MBIT},
    ),
    _line(
        "datapath-cpu",
        "The MPT tunnel's two datapaths: the machine's CPU per Gbit/s of UDP (every core, kernel work included; % of one core)",
        "machine_cpu_pct_per_gbps",
        "% core per Gbit/s",
        "datapath",
        {"placement": "containerised", "method": "mpt-udp", "rate": RATE_MBIT},
        higher_is_better=False,
    ),
    _line(
        "gigabit",
        "Each method over N x 1 Gbit/s paths (kernel datapath), containerised",
        "mbps",
        "Mbit/s",
        "method",
        {"placement": "containerised", "rate": 1000},
    ),
    _line(
        "machine-softirq",
        "Where the CPU went: softirq share (packets moved by the kernel), containerised",
        "cpu_softirq_pct",
        "%",
        "method",
        PAPER_CELLS,
        higher_is_better=False,
    ),
]


def _axes(paths: list[int], fast: list[int]) -> list[dict[str, list[Any]]]:
    """The paper's matrix (the tunnel in its daemon, as the paper's MPT library ran), the kernel datapath beside
    it, paths past the paper's 12, and 1 Gbit/s paths (``fast``)."""
    tunnel = ["mpt-tcp", "mpt-udp"]
    return [
        {"placement": PLACEMENTS, "paths": paths, "method": ["tcp", "mptcp"], "datapath": ["user"], "rate": [RATE_MBIT]},
        {"placement": PLACEMENTS, "paths": paths, "method": tunnel, "datapath": ["user"], "rate": [RATE_MBIT]},
        {"placement": ["containerised"], "paths": paths, "method": tunnel, "datapath": ["bpf"], "rate": [RATE_MBIT]},
        {"placement": ["containerised"], "paths": fast, "method": METHODS, "datapath": ["bpf"], "rate": [1000]},
    ]


def _unavailable(cell: Cell) -> str | None:
    if cell.get("datapath") == "bpf" and not mpt_daemon.datapath()[0]:
        return f"no kernel datapath here ({mpt_daemon.datapath()[1]}); `nestlab doctor` says why"
    return None


SUITE = Suite(
    name="multipath",
    title="Parallel 100 Mbit/s paths aggregated by MPTCP and by the MPT tunnel (TCP, UDP), tool native or containerised (seed 001)",
    paper=PAPER,
    axes=_axes([*range(1, 13), 16, 24, 32], [1, 4, 8]),
    quick_axes=_axes([1, 4, 12], [4]),
    reps=3,
    quick_reps=1,
    duration=10,
    quick_duration=3,
    build=lambda cell: testbed(cell["placement"], cell["paths"], str(cell.get("datapath", "auto")), _rate(cell)),
    lab_key=lambda cell: (cell["placement"], cell["paths"], cell.get("datapath", "auto"), _rate(cell)),
    unavailable=_unavailable,
    measure=measure,
    figures=FIGURES,
    notes=[
        "The paper's twelve 100 Mbit/s switch ports are veth pairs shaped by HTB at 100 Mbit/s (whole frames counted), so one path "
        "carries at most 95.6 Mbit/s of TCP payload, 93.5 through the tunnel (its 32-byte header) and 95.1 of 1440-byte UDP datagrams.",
        "native: the tool runs in nodes sharing their emulated host's network stack (mode: host), as the paper's native runs and host-network "
        "containers did; containerised: in nodes with a stack of their own, where the paths end.",
        "MPTCP's subflows limit is 8 extra subflows per connection (the kernel's maximum); the first subflow adds one more path.",
        "The MPT tunnel is nestlab-mpt (Go, GRE-in-UDP per RFC 8086), not the paper's MPT library; scheduling is per-packet round robin "
        "with equal weights. Its CPU counts both daemons (sender and receiver).",
        "Each run leaves out iperf3's first second (-O 1): slow start.",
    ],
)

"""Seed 002: kernel modules that attach containers (veth + bridge, macvlan bridge, ipvlan L3, OVS).

The paper's veth bridge was Docker's docker0: bridged frames pass iptables (bridge-nf-call-iptables)
and Docker's rules.  ``veth-bridge-nf`` reproduces that path (``bridge_netfilter: true``) and is the
row the paper's claims are judged on; ``veth-bridge`` is a plain Linux bridge, side by side.

iperf3 TCP with 1..128 container pairs and UDP with 1..16, MTU 1500 and 9000, servers and
clients on one emulated host ("local") or on two joined by a wire ("switched"), all pairs
started together.  The figure's value is the total throughput of all pairs (the paper's axis).
The paper gives its findings in prose, so the report compares rankings with its claims.
"""

from __future__ import annotations

from typing import Any

from ...backends.kernel import probe
from ...lab.lab import Lab
from .. import tools
from ..suite import Cell, Figure, Recorder, Suite
from ..together import Pair, run_together

PAPER = "Seed 002, 'Container Network Solutions', sec. 5 (Figures 5.1-5.4)"
BASE_PORT = 5201
MODES = ["veth-bridge", "veth-bridge-nf", "macvlan", "ipvlan", "ovs"]

# What the paper found (sec. 5), as rankings best first (None: "a very close call", no ranking).
CLAIMS = {
    ("local", "tcp"): (
        ["ipvlan", "macvlan", "veth-bridge-nf"],
        "5.1: ipvlan (L3) best; veth bridges 2.5-3x below macvlan and ipvlan; MTU changes little",
    ),
    ("local", "udp"): (["macvlan", "veth-bridge-nf"], "5.2: macvlan does reasonably well; ipvlan and veth bridges do not"),
    ("switched", "tcp"): (None, "5.3: a very close call between all three; MTU 9000 adds about 2 Gbit/s"),
    ("switched", "udp"): (
        ["macvlan", "veth-bridge-nf"],
        "5.4: at MTU 1500 macvlan outperforms ipvlan and veth bridges; at 9000 they are close",
    ),
}


def topology(cell: Cell) -> str:
    mode, pairs, switched, mtu = cell["mode"], cell["pairs"], cell["placement"] == "switched", cell["mtu"]
    chost = "client" if switched else "server"
    text = (
        f"name: bench-km-{mode}-{pairs}-{cell['placement']}-{mtu}\nhosts: {{server: {{}}, client: {{}}}}\n"
        f'wires: [{{endpoints: ["server:nic0", "client:nic0"], params: {{mtu: {mtu}}}}}]\ntopology:\n  nodes:\n'
    )
    for i in range(pairs):
        text += f"    s{i}: {{host: server}}\n    c{i}: {{host: {chost}}}\n"
    if mode == "ovs":
        text += "    sw: {kind: ovs, host: server}\n" + ("    sw2: {kind: ovs, host: client}\n" if switched else "")
    text += "  links:\n"
    if mode == "ovs":
        for i in range(pairs):
            text += f'    - {{endpoints: ["s{i}:eth1", "sw:s{i}"], mtu: {mtu}}}\n'
            text += f'    - {{endpoints: ["c{i}:eth1", "{"sw2" if switched else "sw"}:c{i}"], mtu: {mtu}}}\n'
        if switched:  # each host's NIC is its switch's uplink
            text += '    - {endpoints: ["sw:up"], mode: phys, parent: "server:nic0"}\n    - {endpoints: ["sw2:up"], mode: phys, parent: "client:nic0"}\n'
        return text
    kind = {
        "veth-bridge": "mode: bridge",
        "veth-bridge-nf": "mode: bridge, bridge_netfilter: true",
        "macvlan": "mode: macvlan, macvlan_mode: bridge",
        "ipvlan": "mode: ipvlan, ipvlan_mode: l3",
    }[mode]
    for i in range(pairs):
        for node, host in ((f"s{i}", "server"), (f"c{i}", chost)):
            text += f'    - {{endpoints: ["{node}:eth1"], {kind}, parent: "{host}:nic0", mtu: {mtu}}}\n'
    return text


def measure(running: Lab, cell: Cell, duration: float, rec: Recorder) -> list[dict[str, Any]]:
    udp = cell["protocol"] == "udp"
    pairs = []
    for i in range(cell["pairs"]):
        server, client = running.nodes[f"s{i}"], running.nodes[f"c{i}"]
        address = server.intf("eth1").ip
        assert address is not None  # the lab addresses every eth1
        command = tools.iperf3_command(
            address, BASE_PORT + i, duration, udp=udp, bitrate="0" if udp else None, length=cell["mtu"] - 28 if udp else None
        )
        pairs.append(Pair(client, command, server, tools.iperf3_server_command(address, BASE_PORT + i)))
    rows = []
    for i, ran in enumerate(run_together(pairs, timeout=duration + 60)):
        rec.raw(
            f"iperf3-{cell['protocol']}-{cell['mode']}-{cell['placement']}-mtu{cell['mtu']}-pair{i}",
            ran.command,
            ran.stdout + ran.stderr,
        )
        parsed = tools.parse_iperf3(ran.stdout)
        rows.append(
            {
                "pair": i,
                "gbps": parsed["mbps"] / 1000,
                "retransmits": parsed["retransmits"],
                "lost_pct": parsed["lost_pct"],
                "started_ns": ran.started_ns,
            }
        )
    return [*rows, {"pair": "all", "total_gbps": sum(r["gbps"] for r in rows)}]


def unavailable(cell: Cell) -> str | None:
    if cell["mode"] == "ipvlan" and probe.missing_for({"ipvlan"}):
        return "this kernel lacks ipvlan (CONFIG_IPVLAN)"
    if cell["protocol"] == "udp" and cell["pairs"] > 16:
        return "the paper ran UDP with at most 16 pairs (iperf3's control traffic starves beyond)"
    return None


def figures() -> list[Figure]:
    out = []
    for number, (placement, protocol) in enumerate(
        (("local", "tcp"), ("local", "udp"), ("switched", "tcp"), ("switched", "udp")), 1
    ):
        rank, claim = CLAIMS[(placement, protocol)]
        for mtu in (1500, 9000):
            out.append(
                Figure(
                    f"fig5-{number}-mtu{mtu}",
                    f"Fig. 5.{number}: {placement} {protocol.upper()}, MTU {mtu}: total throughput of all pairs",
                    "total_gbps",
                    "Gbit/s",
                    "mode",
                    "pairs",
                    {"placement": placement, "protocol": protocol, "mtu": mtu},
                    paper_ref=f"{PAPER}, Figure 5.{number}",
                    aggregate=True,
                    claim=claim,
                    claim_rank=rank,
                )
            )
    return out


SUITE = Suite(
    name="kernel-modules",
    title="Kernel modules for container networking: iperf3 TCP and UDP (seed 002)",
    paper=PAPER,
    axes={
        "mode": MODES,
        "pairs": [1, 2, 4, 8, 16, 32, 64, 128],
        "protocol": ["tcp", "udp"],
        "mtu": [1500, 9000],
        "placement": ["local", "switched"],
    },
    # 4 modes here (no ipvlan in this kernel) x 2 pair counts x 2 protocols x 2 MTUs x 2 placements, 2 reps of 1 s.
    quick_axes={
        "mode": MODES,
        "pairs": [1, 4],
        "protocol": ["tcp", "udp"],
        "mtu": [1500, 9000],
        "placement": ["local", "switched"],
    },
    reps=10,
    quick_reps=2,
    duration=10,
    quick_duration=1,
    build=lambda cell: Lab.from_text(topology(cell), f"<kernel-modules {cell['mode']}>"),
    lab_key=lambda cell: (cell["mode"], cell["pairs"], cell["mtu"], cell["placement"]),
    measure=measure,
    figures=figures(),
    unavailable=unavailable,
    notes=[
        "The paper's nodes had 10 Gbit/s NICs on a switch; here 'switched' is two emulated hosts joined by an "
        "unshaped veth wire, and OVS runs its userspace (netdev) datapath when the kernel module is absent.",
        "veth-bridge-nf is the paper's veth bridge (Docker's docker0: bridge-nf-call-iptables on, Docker's FORWARD and NAT rules with "
        "connection tracking); veth-bridge is the same bridge without netfilter. The paper's claims are judged on veth-bridge-nf.",
        "UDP runs offer as much as iperf3 can send (-b 0) with datagrams filling the MTU; the value is what arrived.",
    ],
)

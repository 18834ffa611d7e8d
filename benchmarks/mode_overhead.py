#!/usr/bin/env python3
"""Throughput and latency of each attachment mode, against a hand-made veth pair, in one run.

For every mode, two containers (s1 server, c1 client) are deployed by nestlab on
one emulated host, then across two hosts joined by an unshaped wire, and measured
with iperf3 -J (TCP, then UDP at a fixed offered rate) and ping.  The baseline is a veth
pair between two namespaces made with ``ip`` outside nestlab, measured at the start
and at the end of the run (the table uses their mean; the spread shows the noise).

Usage (root):  python benchmarks/mode_overhead.py [--duration 10] [--udp-rate 1G] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from nestlab import Lab
from nestlab.bench import tools
from nestlab.model.load import load_text

SAME_HOST = ["veth", "bridge", "macvlan", "ovs", "none"]
CROSS_HOST = ["bridge", "macvlan", "vxlan", "phys", "none"]


def topology(mode: str, cross: bool) -> str:
    """The same shapes as tests/test_modes.py: s1 on server, c1 on client (or server)."""
    chost = "client" if cross else "server"
    head = (
        "name: bench-{mode}\nhosts: {server: {}, client: {}}\n"
        'wires: [{endpoints: ["server:nic0", "client:nic0"]}]\ntopology:\n  nodes:\n'
    ).replace("{mode}", mode)
    if mode == "none":  # s1 shares the server's stack; the client side is c1 sharing its host's (or a plain node)
        return head + f"    s1: {{host: server, mode: none}}\n    c1: {{host: {chost}{', mode: none' if cross else ''}}}\n" + (
            "  links: []\n" if cross else '  links: [{endpoints: ["c1:eth1"], mode: bridge}]\n'
        )
    nodes = f"    s1: {{host: server}}\n    c1: {{host: {chost}}}\n"
    if mode in ("veth", "vxlan"):
        return head + nodes + f'  links: [{{endpoints: ["s1:eth1", "c1:eth1"], mode: {mode}}}]\n'
    if mode == "ovs":
        return head + nodes + "    sw: {kind: ovs, host: server}\n" + '  links: [{endpoints: ["s1:eth1", "sw:p1"]}, {endpoints: ["c1:eth1", "sw:p2"]}]\n'
    parent = ["server:nic0", f"{chost}:nic0"]
    return head + nodes + "  links:\n" + "".join(
        f'    - {{endpoints: ["{n}:eth1"], mode: {mode}, parent: "{p}"}}\n' for n, p in zip(("s1", "c1"), parent)
    )


class Netns:
    """A namespace made by hand with ``ip``, with the two methods the traffic tools use."""

    def __init__(self, name: str):
        self.name = name

    def popen(self, args, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *args], **kwargs)

    def cmd(self, args, timeout=60):
        return subprocess.run(["ip", "netns", "exec", self.name, *args], capture_output=True, text=True, timeout=timeout).stdout


def measure(client, server, address: str, duration: float, udp_rate: str) -> dict:
    tcp = tools.iperf3(client, server, address, seconds=duration)
    udp = tools.iperf3(client, server, address, seconds=max(2, duration / 2), udp=True, bitrate=udp_rate)
    rtt = tools.ping(client, address, count=50, interval=0.01)
    return {"tcp_mbps": tcp["mbps"], "udp_mbps": udp["mbps"], "udp_lost_pct": udp["lost_pct"], "rtt_ms": rtt["rtt_avg_ms"]}


def baseline(duration: float, udp_rate: str) -> dict:
    script = """
    ip netns add nlbench-a && ip netns add nlbench-b
    ip -n nlbench-a link add eth1 type veth peer name eth1 netns nlbench-b
    ip -n nlbench-a addr add 10.250.0.1/30 dev eth1 && ip -n nlbench-b addr add 10.250.0.2/30 dev eth1
    for n in a b; do ip -n nlbench-$n link set lo up && ip -n nlbench-$n link set eth1 up; done
    """
    subprocess.run(["sh", "-ec", script], check=True)
    try:
        time.sleep(0.5)
        return measure(Netns("nlbench-a"), Netns("nlbench-b"), "10.250.0.2", duration, udp_rate)
    finally:
        subprocess.run(["sh", "-c", "ip netns del nlbench-a; ip netns del nlbench-b"])


def lab_run(mode: str, cross: bool, duration: float, udp_rate: str) -> dict:
    lab = Lab.__new__(Lab)
    lab._set(load_text(topology(mode, cross)), f"<bench {mode}>")
    with lab.deployed():
        s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
        address = lab.hosts["server"].intf("nic0").ip if mode == "none" else s1.intf("eth1").ip
        time.sleep(0.5)
        return measure(c1, s1, address, duration, udp_rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10, help="seconds of TCP per run (UDP runs half as long)")
    parser.add_argument("--udp-rate", default="1G", help="offered UDP rate (iperf3 -b)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    first = baseline(args.duration, args.udp_rate)
    rows = []
    for cross, modes in ((False, SAME_HOST), (True, CROSS_HOST)):
        for mode in modes:
            rows.append({"placement": "two hosts" if cross else "one host", "mode": mode, **lab_run(mode, cross, args.duration, args.udp_rate)})
            print(f"measured {rows[-1]['placement']} {mode}", file=sys.stderr)
    last = baseline(args.duration, args.udp_rate)
    base = {k: (first[k] + last[k]) / 2 for k in ("tcp_mbps", "udp_mbps", "rtt_ms")}
    print(f"baseline (hand-made veth pair): TCP {first['tcp_mbps']:.0f} / {last['tcp_mbps']:.0f} Mbit/s (start/end), "
          f"UDP {base['udp_mbps']:.0f} Mbit/s, RTT {base['rtt_ms']:.3f} ms\n")
    print("| placement | mode | TCP Mbit/s | ×veth | UDP Mbit/s (loss %) | ×veth | RTT ms | ×veth |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['placement']} | {r['mode']} | {r['tcp_mbps']:.0f} | {r['tcp_mbps'] / base['tcp_mbps']:.2f} | "
            f"{r['udp_mbps']:.0f} ({r['udp_lost_pct']:.1f}) | {r['udp_mbps'] / base['udp_mbps']:.2f} | "
            f"{r['rtt_ms']:.3f} | {r['rtt_ms'] / base['rtt_ms']:.2f} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"baseline_start": first, "baseline_end": last, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

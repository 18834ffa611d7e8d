#!/usr/bin/env python3
"""Throughput and latency of each attachment mode, against a hand-made veth pair, in one run.

For every mode, two containers (s1 server, c1 client) are deployed by nestlab on
one emulated host, then across two hosts joined by an unshaped wire, and measured
with iperf3 -J (TCP, then UDP at a fixed offered rate) and ping.  The baseline is a veth
pair between two namespaces made with ``ip`` outside nestlab, measured at the start of
every round; the table gives medians over the rounds and ratios of medians.

Usage (root):  python benchmarks/mode_overhead.py [--duration 10] [--reps 3] [--udp-rate 500M] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402
from nestlab.bench import tools  # noqa: E402

SAME_HOST = ["veth", "bridge", "macvlan", "ovs", "none"]
CROSS_HOST = ["bridge", "macvlan", "ovs", "vxlan", "phys", "none"]


def topology(mode: str, cross: bool) -> str:
    """The same shapes as tests/test_modes.py: s1 on server, c1 on client (or server)."""
    chost = "client" if cross else "server"
    head = (
        "name: bench-{mode}\nhosts: {server: {}, client: {}}\n"
        'wires: [{endpoints: ["server:nic0", "client:nic0"]}]\ntopology:\n  nodes:\n'
    ).replace("{mode}", mode)
    if mode == "none":  # both share their host's stack (on one host: the same stack, as LXC "none" does)
        return head + f"    s1: {{host: server, mode: none}}\n    c1: {{host: {chost}, mode: none}}\n  links: []\n"
    nodes = f"    s1: {{host: server}}\n    c1: {{host: {chost}}}\n"
    if mode in ("veth", "vxlan"):
        return head + nodes + f'  links: [{{endpoints: ["s1:eth1", "c1:eth1"], mode: {mode}}}]\n'
    if mode == "ovs" and cross:  # an OVS switch per host, the host's NIC moved in as its uplink
        return (
            head
            + nodes
            + "    sw: {kind: ovs, host: server}\n    sw2: {kind: ovs, host: client}\n"
            + (
                '  links: [{endpoints: ["s1:eth1", "sw:p1"]}, {endpoints: ["c1:eth1", "sw2:p1"]},\n'
                '          {endpoints: ["sw:up"], mode: phys, parent: "server:nic0"}, {endpoints: ["sw2:up"], mode: phys, parent: "client:nic0"}]\n'
            )
        )
    if mode == "ovs":
        return (
            head
            + nodes
            + "    sw: {kind: ovs, host: server}\n"
            + '  links: [{endpoints: ["s1:eth1", "sw:p1"]}, {endpoints: ["c1:eth1", "sw:p2"]}]\n'
        )
    parent = ["server:nic0", f"{chost}:nic0"]
    return (
        head
        + nodes
        + "  links:\n"
        + "".join(f'    - {{endpoints: ["{n}:eth1"], mode: {mode}, parent: "{p}"}}\n' for n, p in zip(("s1", "c1"), parent))
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
    udp = tools.iperf3(client, server, address, seconds=max(1, duration / 2), udp=True, bitrate=udp_rate)
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
    lab = Lab.from_text(topology(mode, cross), f"<bench {mode}>")
    with lab.deployed():
        s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
        address = lab.hosts["server"].intf("nic0").ip if mode == "none" else s1.intf("eth1").ip
        time.sleep(0.5)
        return measure(c1, s1, address, duration, udp_rate)


def settle(seconds: float) -> None:
    """Let the kernel finish tearing down the previous run's namespaces (it does so asynchronously)."""
    time.sleep(seconds)


def veth_pairs(count: int, seconds: float, udp_rate: str, pause: float) -> list[tuple[float, float]]:
    """(hand-made, nestlab) TCP Mbit/s measured back to back, ``count`` times: the no-overhead check."""
    pairs = []
    for _ in range(count):
        hand = baseline(seconds, udp_rate)["tcp_mbps"]
        settle(pause)
        lab = lab_run("veth", False, seconds, udp_rate)["tcp_mbps"]
        settle(pause)
        pairs.append((hand, lab))
        print(f"veth pair: hand-made {hand:.0f}, nestlab {lab:.0f} Mbit/s", file=sys.stderr)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10, help="seconds of TCP per run (UDP runs half as long)")
    parser.add_argument("--udp-rate", default="500M", help="offered UDP rate (iperf3 -b)")
    parser.add_argument("--reps", type=int, default=3, help="rounds; each round measures the baseline, then every mode")
    parser.add_argument("--pairs", type=int, default=5, help="back-to-back (hand-made veth, nestlab veth) TCP pairs")
    parser.add_argument("--settle", type=float, default=2, help="seconds between runs (the kernel frees namespaces late)")
    parser.add_argument("--json", help="also write every measurement to this file")
    args = _smoke.parse(parser, duration=1.0, reps=1, pairs=0, settle=0.2)
    paired = veth_pairs(args.pairs, args.duration / 2, args.udp_rate, args.settle)
    configs = [(False, m) for m in SAME_HOST] + [(True, m) for m in CROSS_HOST]
    runs: dict[str, list[dict]] = {"baseline": []}
    for rep in range(args.reps):
        runs["baseline"].append(baseline(args.duration, args.udp_rate))
        settle(args.settle)
        for cross, mode in configs:
            key = f"{'two hosts' if cross else 'one host'}|{mode}"
            runs.setdefault(key, []).append(lab_run(mode, cross, args.duration, args.udp_rate))
            settle(args.settle)
            print(f"round {rep + 1}/{args.reps}: measured {key}", file=sys.stderr)

    def med(key: str, field: str) -> float:
        return statistics.median(r[field] for r in runs[key])

    spread = ", ".join(f"{r['tcp_mbps']:.0f}" for r in runs["baseline"])
    print(
        f"baseline (hand-made veth pair), median of {args.reps}: TCP {med('baseline', 'tcp_mbps'):.0f} Mbit/s "
        f"(runs: {spread}), UDP {med('baseline', 'udp_mbps'):.0f} Mbit/s, "
        f"RTT {med('baseline', 'rtt_ms'):.3f} ms\n"
    )
    print("| placement | mode | TCP Mbit/s | ×veth | UDP Mbit/s (loss %) | ×veth | RTT ms | ×veth |")
    print("|---|---|---|---|---|---|---|---|")
    for key in runs:
        if key == "baseline":
            continue
        placement, mode = key.split("|")
        ratio = {f: med(key, f) / med("baseline", f) for f in ("tcp_mbps", "udp_mbps", "rtt_ms")}
        print(
            f"| {placement} | {mode} | {med(key, 'tcp_mbps'):.0f} | {ratio['tcp_mbps']:.2f} | "
            f"{med(key, 'udp_mbps'):.0f} ({med(key, 'udp_lost_pct'):.1f}) | {ratio['udp_mbps']:.2f} | "
            f"{med(key, 'rtt_ms'):.3f} | {ratio['rtt_ms']:.2f} |"
        )
    ratios = [lab / hand for hand, lab in paired]
    if ratios:
        print(
            f"\nnestlab veth vs hand-made veth, {args.pairs} back-to-back TCP pairs of {args.duration / 2:.0f} s: "
            f"ratio median {statistics.median(ratios):.3f} (each: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({**runs, "veth_pairs": paired}, fh, indent=1)


if __name__ == "__main__":
    main()

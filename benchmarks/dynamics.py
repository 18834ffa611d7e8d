#!/usr/bin/env python3
"""How fast live link changes apply: nestlab (pyroute2 tc, one socket per namespace) vs a tc subprocess per change.

A 12-node lab (every node on one bridge, every link shaped) gets N live changes,
alternating rate changes and down/up, on random links.  nestlab applies them
through ``Lab.link(...).set(...)`` (each one also written to the lab's state and
event log); the baseline, in the same run on the same links, runs
``ip netns exec NS tc class replace ...`` / ``ip -n NS link set ...`` per change
and per end (nestlab also changes both ends), the way Mininet-WiFi does.

Usage (root):  python benchmarks/dynamics.py [--changes 1000] [--nodes 12]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402
from nestlab.backends.kernel import shaping  # noqa: E402
from nestlab.lab.link_handle import LinkHandle  # noqa: E402


def build(nodes: int) -> Lab:
    lab = Lab("bench-dynamics")
    lab.add_node("sw", kind="bridge")
    for i in range(nodes):
        lab.add_node(f"n{i}")
        lab.add_link(f"n{i}:eth1", f"sw:p{i}", params={"rate": "100mbit"})
    return lab


def changes(nodes: int, count: int, seed: int = 1) -> list[tuple[int, dict]]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        node = rng.randrange(nodes)
        if k % 2 == 0:
            out.append((node, {"rate": f"{rng.choice([1, 10, 50, 100, 1000])}mbit"}))
        else:
            out.append((node, {"state": "down" if k % 4 == 1 else "up"}))
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run_nestlab(lab: Lab, plan: list[tuple[int, dict]]) -> tuple[list[float], float]:
    shaper = shaping.Shaper()
    handles = {i: LinkHandle(lab, f"n{i}:eth1", f"sw:p{i}", shaper=shaper) for i in {n for n, _ in plan}}
    latencies = []
    started = time.perf_counter()
    for node, params in plan:
        latencies.append(handles[node].set(**params))
    total = time.perf_counter() - started
    shaper.close()
    return latencies, total


def run_subprocess(lab: Lab, plan: list[tuple[int, dict]]) -> tuple[list[float], float]:
    latencies = []
    started = time.perf_counter()
    for node, params in plan:
        t0 = time.perf_counter()
        for ns, dev in (
            (f"nestlab.{lab.name}.n{node}", "eth1"),
            (f"nestlab.{lab.name}.sw", f"p{node}"),
        ):  # both ends, as nestlab does
            if "rate" in params:
                subprocess.run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "tc",
                        "class",
                        "replace",
                        "dev",
                        dev,
                        "parent",
                        "1:",
                        "classid",
                        "1:1",
                        "htb",
                        "rate",
                        params["rate"],
                    ],
                    check=True,
                )
            else:
                subprocess.run(["ip", "-n", ns, "link", "set", "dev", dev, params["state"]], check=True)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies, time.perf_counter() - started


def run_add_remove(lab: Lab, count: int) -> tuple[list[float], float]:
    """The other way to make a pair (in)visible: create the veth (up, addressed) / delete it, per change."""
    from nestlab import names
    from nestlab.backends.kernel import namespaces, netlink

    fd_a, nl_a = namespaces.open_netlink(names.netns_path(lab.name, "n0"))
    fd_b, nl_b = namespaces.open_netlink(names.netns_path(lab.name, "n1"))
    latencies = []
    started = time.perf_counter()
    for k in range(count):
        t0 = time.perf_counter()
        if k % 2 == 0:
            (index,) = [x for x in nl_a.run(netlink.new_veth("r1", "r0", fd_b, alias="bench"), netlink.get_link("r1")) if x]
            nl_a.run(netlink.new_addr(index, "10.99.0.1/30", "r1"))
            (peer,) = [x for x in nl_b.run(netlink.set_up("r0"), netlink.get_link("r0")) if x]
            nl_b.run(netlink.new_addr(peer, "10.99.0.2/30", "r0"))
        else:
            nl_a.run(netlink.del_link("r1"))
        latencies.append((time.perf_counter() - t0) * 1000)
    total = time.perf_counter() - started
    for fd, nl in ((fd_a, nl_a), (fd_b, nl_b)):
        nl.close()
        os.close(fd)
    return latencies, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=12)
    args = _smoke.parse(parser, changes=20, nodes=3)
    plan = changes(args.nodes, args.changes)
    lab = build(args.nodes)
    with lab.deployed():
        ours, ours_total = run_nestlab(lab, plan)
        theirs, theirs_total = run_subprocess(lab, plan)
        addrm, addrm_total = run_add_remove(lab, args.changes)
    print(f"{args.changes} live changes (rate / down / up) on a {args.nodes}-node lab\n")
    print("| applier | median ms | p99 ms | changes/s |")
    print("|---|---|---|---|")
    rows = (
        ("nestlab up/down + rate (netlink, kept sockets)", ours, ours_total),
        ("tc/ip subprocess per change (both ends)", theirs, theirs_total),
        ("visibility by veth add/remove instead of up/down (netlink)", addrm, addrm_total),
    )
    for name, lat, total in rows:
        print(f"| {name} | {statistics.median(lat):.2f} | {percentile(lat, 99):.2f} | {len(lat) / total:.0f} |")
    print(
        f"\nratio (subprocess / nestlab): median latency {statistics.median(theirs) / statistics.median(ours):.1f}x, "
        f"throughput {(len(ours) / ours_total) / (len(theirs) / theirs_total):.1f}x"
    )


if __name__ == "__main__":
    main()

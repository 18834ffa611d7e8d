#!/usr/bin/env python3
"""Deploy/destroy time and memory per node, nestlab vs the kernel floor vs Mininet, in one run.

Topologies: a star of N hosts on one bridge (N = 10, 100, 500) and a 12 x 5
"cluster" (each cluster: 5 hosts on an inner bridge; cluster bridges joined to a
main bridge).  Baselines, measured in the same run:

* kernel floor: the same namespaces, veths, bridge ports, addresses and link-ups
  issued by ``ip -batch`` files, one process per batch (the address/up work is
  issued inside one namespace holding N interfaces, as ``ip -batch`` cannot
  switch namespaces per line);
* Mininet (``mn --switch lxbr --controller none --topo single,N --test none``),
  run inside a namespace of its own because its cleanup is machine-wide.

Usage (root):  python benchmarks/deploy_scale.py [--sizes 10,100,500] [--reps 3] [--no-mininet]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from nestlab import Lab


def meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as fh:
        return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in fh)}


def settle(nodes: int) -> None:
    """Give the kernel time to free the previous run's namespaces (it does so asynchronously,
    and a teardown still in progress would slow the next run down)."""
    time.sleep(1.0 + nodes / 200)


def star_lab(n: int) -> Lab:
    lab = Lab(f"bench-star{n}", ipv4_pool="10.64.0.0/10")
    lab.add_node("sw", kind="bridge")
    for i in range(n):
        lab.add_node(f"h{i}")
        lab.add_link(f"h{i}:eth1", f"sw:p{i}")
    return lab


def cluster_lab(clusters: int = 12, hosts: int = 5) -> Lab:
    lab = Lab("bench-cluster", ipv4_pool="10.64.0.0/10")
    lab.add_node("main", kind="bridge")
    for c in range(clusters):
        lab.add_node(f"c{c}", kind="bridge")
        lab.add_link(f"c{c}:up", f"main:c{c}")
        for h in range(hosts):
            lab.add_node(f"c{c}h{h}")
            lab.add_link(f"c{c}h{h}:eth1", f"c{c}:p{h}")
    return lab


def time_nestlab(make, reps: int) -> dict:
    deploys, destroys, mem, slab = [], [], [], []
    for _ in range(reps):
        lab = make()
        lab.plan  # check and address the topology before the clock starts
        before = meminfo()
        t0 = time.perf_counter()
        lab.deploy()
        t1 = time.perf_counter()
        after = meminfo()
        lab.destroy()
        t2 = time.perf_counter()
        deploys.append(t1 - t0)
        destroys.append(t2 - t1)
        nodes = len(lab.nodes)
        settle(nodes)
        mem.append((before["MemAvailable"] - after["MemAvailable"]) / nodes)
        slab.append((after["Slab"] - before["Slab"]) / nodes)
    return {
        "deploy": statistics.median(deploys),
        "destroy": statistics.median(destroys),
        "kb_per_node": statistics.median(mem),
        "slab_kb_per_node": statistics.median(slab),
    }


def _batch(lines: list[str], netns: str | None = None) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as fh:
        fh.write("\n".join(lines) + "\n")
    try:
        cmd = ["ip", *(["-n", netns] if netns else []), "-batch", fh.name]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    finally:
        os.unlink(fh.name)


def time_floor(n: int, reps: int) -> dict:
    deploys, destroys = [], []
    for _ in range(reps):
        hosts = [f"floor-h{i}" for i in range(n)]
        t0 = time.perf_counter()
        _batch([f"netns add {h}" for h in hosts] + ["netns add floor-sw", "netns add floor-all"])
        _batch([f"link add e{i} netns floor-all type veth peer name p{i} netns floor-sw" for i in range(n)])
        _batch(["link add br0 type bridge", "link set br0 up"] + [f"link set p{i} master br0 up" for i in range(n)], "floor-sw")
        _batch(
            ["link set lo up"]
            + [f"addr add 10.{64 + i // 65536}.{i // 256 % 256}.{i % 256}/10 dev e{i}" for i in range(n)]
            + [f"link set e{i} up" for i in range(n)],
            "floor-all",
        )
        t1 = time.perf_counter()
        _batch([f"netns del {h}" for h in hosts] + ["netns del floor-sw", "netns del floor-all"])
        t2 = time.perf_counter()
        deploys.append(t1 - t0)
        destroys.append(t2 - t1)
        settle(n)
    return {"deploy": statistics.median(deploys), "destroy": statistics.median(destroys)}


def time_mininet(n: int) -> dict | None:
    if not shutil.which("mn"):
        return None
    subprocess.run(["ip", "netns", "add", "bench-mininet"], check=True)
    try:
        t0 = time.perf_counter()
        out = subprocess.run(
            ["ip", "netns", "exec", "bench-mininet", "mn", "--switch", "lxbr", "--controller", "none", "--topo", f"single,{n}", "--test", "none"],
            capture_output=True,
            text=True,
            check=True,
        )
        total = time.perf_counter() - t0
    finally:
        subprocess.run(["ip", "netns", "del", "bench-mininet"], check=False)
    reported = re.search(r"completed in ([\d.]+) seconds", out.stdout + out.stderr)
    return {"total": total, "reported": float(reported.group(1)) if reported else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,500")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-mininet", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        ours = time_nestlab(lambda n=n: star_lab(n), args.reps)
        floor = time_floor(n, args.reps)
        mn = None if args.no_mininet or n > 100 else time_mininet(n)
        rows.append((f"star {n}", n + 1, ours, floor, mn))
    rows.append(("cluster 12x5", 12 * 6 + 1, time_nestlab(cluster_lab, args.reps), None, None))

    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs, median of {args.reps} runs\n")
    head = f"{'topology':<14}{'nodes':>6}{'deploy s':>10}{'destroy s':>10}{'floor s':>9}{'x floor':>8}{'mininet s':>10}{'mn/ours':>8}{'destroy/deploy':>15}{'KB/node':>9}{'slab KB/node':>13}"
    print(head)
    print("-" * len(head))
    for name, nodes, ours, floor, mn in rows:
        line = f"{name:<14}{nodes:>6}{ours['deploy']:>10.3f}{ours['destroy']:>10.3f}"
        line += f"{floor['deploy']:>9.3f}{ours['deploy'] / floor['deploy']:>8.2f}" if floor else f"{'-':>9}{'-':>8}"
        if mn:
            line += f"{mn['total']:>10.2f}{mn['total'] / (ours['deploy'] + ours['destroy']):>8.1f}"
        else:
            line += f"{'-':>10}{'-':>8}"
        line += f"{ours['destroy'] / ours['deploy']:>15.2f}{ours['kb_per_node']:>9.0f}{ours['slab_kb_per_node']:>13.0f}"
        print(line)
    print("\nmn/ours = Mininet build+teardown wall time / nestlab deploy+destroy; x floor = nestlab deploy / ip -batch deploy")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A lab split across servers, against the same lab on one machine, in one run (docs/servers.md).

* Deploy and destroy of a 300-node lab (10 sites: a switch with 29 hosts each, the switches in a
  chain), timed from the shell: on this machine alone, and on 1, 2 and 3 emulated servers (``--servers``; all on
  this machine, so this measures the control overhead: SSH, shipping shares, each server's own
  nestlab start-up; not a speed-up).  Target: 3 servers <= 1.5x this machine + 1 s.
* A link stitched between two servers (VXLAN) against the same link inside one server (veth), both
  shaped at 1 Gbit/s, on the most servers: iperf3 TCP throughput (3 s) and ping RTT (50 pings).  Target: >= 0.9x.

Usage (root):  python benchmarks/multi_server.py [--nodes 300] [--reps 1] [--servers 1,2,3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)

from benchmarks import _smoke  # noqa: E402
from nestlab.testbeds import emulate  # noqa: E402

NESTLAB = [sys.executable, "-m", "nestlab.cli.app"]


def sites(name: str, nodes: int) -> dict:
    """``nodes`` nodes: 10 switches in a chain, the rest hosts spread over them, one /16."""
    count = 10
    topo = {"nodes": {f"sw{k}": {"kind": "bridge"} for k in range(count)}, "links": []}
    topo["links"] += [{"endpoints": [f"sw{k}:up", f"sw{k + 1}:down"]} for k in range(count - 1)]
    for i in range(nodes - count):
        topo["nodes"][f"h{i}"] = {}
        topo["links"].append(
            {"endpoints": [f"h{i}:eth1", f"sw{i % count}:p{i}"], "ipv4": [f"10.66.{i // 250}.{i % 250 + 1}/16", None]}
        )
    return {"name": name, "topology": topo}


def pair(name: str) -> dict:
    """Two links shaped at 1 Gbit/s: x-y cut between s1 and s2, x2-y2 inside s1."""
    nodes = {"x": {"server": "s1"}, "y": {"server": "s2"}, "x2": {"server": "s1"}, "y2": {"server": "s1"}}
    links = [
        {"endpoints": ["x:eth1", "y:eth1"], "ipv4": ["10.67.0.1/30", "10.67.0.2/30"], "params": {"rate": "1gbit"}},
        {"endpoints": ["x2:eth1", "y2:eth1"], "ipv4": ["10.67.0.5/30", "10.67.0.6/30"], "params": {"rate": "1gbit"}},
    ]
    return {"name": name, "topology": {"nodes": nodes, "links": links}}


def cli(*args: str, timeout: float = 600) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run([*NESTLAB, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"nestlab {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started, done


def timed_deploys(topo_path: str, reps: int, inventory: str | None, name: str) -> tuple[float, float]:
    deploys, destroys = [], []
    for _ in range(reps):
        deploys.append(cli("deploy", "-t", topo_path, *(["--servers", inventory] if inventory else []))[0])
        destroys.append(cli("destroy", "--lab", name)[0])
        time.sleep(2)
    return statistics.median(deploys), statistics.median(destroys)


def link_figures(name: str) -> dict:
    out = {}
    for label, client, server, address in (("stitched", "x", "y", "10.67.0.2"), ("local", "x2", "y2", "10.67.0.6")):
        daemon = subprocess.Popen(
            [*NESTLAB, "exec", "--lab", name, server, "--", "iperf3", "-s", "-1"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
        _, answer = cli("exec", "--lab", name, client, "--", "iperf3", "-c", address, "-t", "3", "-J")
        daemon.wait(timeout=30)
        rate = json.loads(answer.stdout)["end"]["sum_received"]["bits_per_second"]
        _, pings = cli("exec", "--lab", name, client, "--", "ping", "-c", "50", "-i", "0.02", "-q", address)
        rtt = float(re.search(r"= [\d.]+/([\d.]+)/", pings.stdout).group(1))
        out[label] = {"mbps": rate / 1e6, "rtt_ms": rtt}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--servers", default="1,2,3", help="emulated server counts (the stitched link needs 2 or more)")
    args = _smoke.parse(parser, nodes=12, servers="2")
    counts = [int(c) for c in args.servers.split(",")]
    folder = tempfile.mkdtemp(prefix="nestlab-multi-")
    name = "bench-multi"
    topo = os.path.join(folder, "sites.yml")
    with open(topo, "w") as fh:
        yaml.safe_dump(sites(name, args.nodes), fh)
    rows = [("this machine", *timed_deploys(topo, args.reps, None, name))]
    for count in counts:
        inventory = os.path.join(folder, f"inv{count}.yml")
        emulate.emulate(count, f"bsrv{count}", copy_to=inventory)
        try:
            rows.append((f"{count} emulated server{'s' if count > 1 else ''}", *timed_deploys(topo, args.reps, inventory, name)))
            if count == max(counts):
                pair_path = os.path.join(folder, "pair.yml")
                with open(pair_path, "w") as fh:
                    yaml.safe_dump(pair("bench-pair"), fh)
                cli("deploy", "-t", pair_path, "--servers", inventory)
                try:
                    links = link_figures("bench-pair")
                finally:
                    cli("destroy", "--lab", "bench-pair")
        finally:
            emulate.destroy(f"bsrv{count}")
    base = rows[0][1]
    print(
        f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs; {args.nodes} nodes, median of {args.reps}; CLI calls timed from the shell\n"
    )
    print("| where | deploy | / this machine | destroy |")
    print("|---|---|---|---|")
    for label, deploy, destroy in rows:
        print(f"| {label} | {deploy:.2f} s | {deploy / base:.2f} | {destroy:.2f} s |")
    limit = 1.5 * base + 1
    print(
        f"\n{counts[-1]} servers: {rows[-1][1]:.2f} s against the target 1.5 x {base:.2f} + 1 = {limit:.2f} s: "
        f"{'met' if rows[-1][1] <= limit else 'MISSED'}\n"
    )
    print("| link (1 Gbit/s) | TCP throughput | RTT |")
    print("|---|---|---|")
    for label in ("local", "stitched"):
        print(f"| {label} | {links[label]['mbps']:.0f} Mbit/s | {links[label]['rtt_ms']:.3f} ms |")
    print(f"\nstitched / local throughput: {links['stitched']['mbps'] / links['local']['mbps']:.2f} (target >= 0.9)")


if __name__ == "__main__":
    main()

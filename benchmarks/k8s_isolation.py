#!/usr/bin/env python3
"""What lab pods without privilege cost (docs/security.md): on one 2-node cluster built from source, in one
run, alternating, the same labs deployed in the default pods (hostUsers: false) and with --privileged:

* time to Ready of a 100-node lab (``--nodes``; 10 switches in a chain), `nestlab k8s deploy` timed from the shell: it returns
  once every share is deployed and every stitched link answers;
* TCP throughput (iperf3, 3 s) across a cut link, a VXLAN tunnel between pods on the two cluster nodes.

Usage (root, after make k8s):  python benchmarks/k8s_isolation.py [--reps 3] [--nodes 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from multi_server import cli, sites  # noqa: E402

from benchmarks import _smoke  # noqa: E402

PAIR = {
    "name": "bench-cut",
    "topology": {
        "nodes": {"x": {"server": "node1"}, "y": {"server": "node2"}},
        "links": [{"endpoints": ["x:eth1", "y:eth1"], "ipv4": ["10.67.0.1/30", "10.67.0.2/30"]}],
    },
}


def throughput(kubeconfig: str, topo: str, privileged: list[str]) -> float:
    """Gbit/s across the cut link, the lab deployed and destroyed around it."""
    cli("k8s", "deploy", "-t", topo, "--kubeconfig", kubeconfig, *privileged)
    try:
        cli("exec", "--lab", "bench-cut", "y", "--", "sh", "-c", "iperf3 -s -1 -D")
        _, done = cli("exec", "--lab", "bench-cut", "x", "--", "iperf3", "-c", "10.67.0.2", "-t", "3", "-J")
        return json.loads(done.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        cli("destroy", "--lab", "bench-cut")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100)
    args = _smoke.parse(parser, reps=1, nodes=12)
    folder = tempfile.mkdtemp(prefix="nestlab-k8s-iso-")
    big, pair = os.path.join(folder, "big.yml"), os.path.join(folder, "pair.yml")
    with open(big, "w") as fh:
        yaml.safe_dump(sites("bench-iso", args.nodes), fh)
    with open(pair, "w") as fh:
        yaml.safe_dump(PAIR, fh)
    kubeconfig = os.path.join(folder, "kubeconfig")
    cli("k8s", "cluster", "up", "--nodes", "2", "--kubeconfig", kubeconfig, "--name", "bk8siso")
    modes = {"unprivileged (hostUsers: false)": [], "privileged (--privileged)": ["--privileged"]}
    ready: dict[str, list[float]] = {m: [] for m in modes}
    gbits: dict[str, list[float]] = {m: [] for m in modes}
    try:
        for _ in range(args.reps):
            for mode, extra in modes.items():
                ready[mode].append(cli("k8s", "deploy", "-t", big, "--kubeconfig", kubeconfig, "--servers", "2", *extra)[0])
                cli("destroy", "--lab", "bench-iso")
                gbits[mode].append(throughput(kubeconfig, pair, extra))
    finally:
        cli("k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", "bk8siso")
    base_ready = statistics.median(ready["privileged (--privileged)"])
    base_gbits = statistics.median(gbits["privileged (--privileged)"])
    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs; 2-node cluster; median of {args.reps}, alternating\n")
    print(f"| pods | {args.nodes}-node lab Ready | / privileged | cut link (iperf3 TCP) | / privileged |")
    print("|---|---|---|---|---|")
    for mode in modes:
        r, g = statistics.median(ready[mode]), statistics.median(gbits[mode])
        print(f"| {mode} | {r:.2f} s | {r / base_ready:.2f} | {g:.2f} Gbit/s | {g / base_gbits:.2f} |")
    print("\nall runs:", json.dumps({"ready_s": ready, "gbit_s": gbits}))


if __name__ == "__main__":
    main()

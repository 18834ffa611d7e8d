#!/usr/bin/env python3
"""The same 300-node lab on this machine, on 3 emulated SSH servers and on a 3-node Kubernetes cluster
built from source (docs/servers.md, docs/performance.md), in one run, every command timed from the shell.

All three run on this one machine, so this measures what each control path adds (SSH; the API server,
the scheduler, kubelets starting pods, exec through the API), not a speed-up.  For the cluster, the
deploy's own progress lines are timestamped as they come, to show where its time goes.

Usage (root, after make k8s):  python benchmarks/k8s_scale.py [--nodes 300] [--reps 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from multi_server import NESTLAB, cli, sites  # noqa: E402

from benchmarks import _smoke  # noqa: E402
from nestlab.testbeds import emulate  # noqa: E402


def phases(args: list[str]) -> tuple[float, list[tuple[float, str]]]:
    """Run ``nestlab ARGS``; its total time and each stderr line with the time it came."""
    started = time.perf_counter()
    proc = subprocess.Popen([*NESTLAB, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines = [(time.perf_counter() - started, line.rstrip()) for line in proc.stderr]
    if proc.wait():
        raise RuntimeError(f"nestlab {' '.join(args)}: {lines[-3:]}")
    return time.perf_counter() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--reps", type=int, default=1)
    args = _smoke.parse(parser, nodes=12, reps=1)
    folder = tempfile.mkdtemp(prefix="nestlab-k8s-")
    name = "bench-k8s"
    topo = os.path.join(folder, "sites.yml")
    with open(topo, "w") as fh:
        yaml.safe_dump(sites(name, args.nodes), fh)
    rows = []

    deploys, destroys = [], []
    for _ in range(args.reps):
        deploys.append(cli("deploy", "-t", topo)[0])
        destroys.append(cli("destroy", "--lab", name)[0])
    rows.append(("this machine", statistics.median(deploys), statistics.median(destroys)))

    inventory = os.path.join(folder, "inv.yml")
    emulate.emulate(3, "bk8s-srv", copy_to=inventory)
    try:
        deploys, destroys = [], []
        for _ in range(args.reps):
            deploys.append(cli("deploy", "-t", topo, "--servers", inventory)[0])
            destroys.append(cli("destroy", "--lab", name)[0])
        rows.append(("3 emulated servers (SSH)", statistics.median(deploys), statistics.median(destroys)))
    finally:
        emulate.destroy("bk8s-srv")

    kubeconfig = os.path.join(folder, "kubeconfig")
    up, _ = phases(["k8s", "cluster", "up", "--nodes", "3", "--kubeconfig", kubeconfig, "--name", "bk8s"])
    try:
        deploys, destroys, steps = [], [], []
        for _ in range(args.reps):
            took, lines = phases(["k8s", "deploy", "-t", topo, "--kubeconfig", kubeconfig, "--servers", "3"])
            deploys.append(took)
            steps = lines
            destroys.append(cli("destroy", "--lab", name)[0])
        rows.append(("3-node Kubernetes cluster", statistics.median(deploys), statistics.median(destroys)))
    finally:
        down, _ = phases(["k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", "bk8s"])

    base = rows[0][1]
    print(
        f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs; {args.nodes} nodes (10 switches in a chain), "
        f"median of {args.reps}; CLI calls timed from the shell\n"
    )
    print("| where | deploy | / this machine | destroy |")
    print("|---|---|---|---|")
    for label, deploy, destroy in rows:
        print(f"| {label} | {deploy:.2f} s | {deploy / base:.2f} | {destroy:.2f} s |")
    print(f"\ncluster up (3 nodes, images cached): {up:.1f} s; cluster down: {down:.1f} s\n")
    print("Where the cluster deploy's time goes (its progress lines, as they came):\n")
    print("| at | step |")
    print("|---|---|")
    for at, line in steps:
        print(f"| {at:.2f} s | {line[:110]} |")


if __name__ == "__main__":
    main()

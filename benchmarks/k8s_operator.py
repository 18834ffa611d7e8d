#!/usr/bin/env python3
"""A 100-node lab on a 3-node Kubernetes cluster built from source, made two ways in one run: by `nestlab k8s
deploy` from this machine (the baseline), and as a NestLab resource that the operator (run from here, as in
development) makes Ready; then each removed.  Every time is what a user waits for: the command timed from the
shell, and for the resource from `kubectl apply` until its status says Ready (and from `kubectl delete` until
the resource and its pods are gone).

All of it runs on this one machine, so it measures what the resource path adds to the same control path (the
watch, the status writes), not a cluster's speed.

Usage (root, after make k8s):  python benchmarks/k8s_operator.py [--nodes 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from k8s_scale import phases  # noqa: E402
from multi_server import NESTLAB, cli, sites  # noqa: E402

from nestlab.sites.k8s.manifests import LABEL  # noqa: E402
from nestlab.testbeds import cluster  # noqa: E402


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.path.join(cluster.BIN, "kubectl"), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True
    )


def until(check, timeout: float) -> float:
    """Seconds until ``check()`` holds (polled every 0.2 s); RuntimeError past ``timeout``."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"not done after {timeout:.0f} s")
        time.sleep(0.2)
    return time.perf_counter() - started


def resource(name: str, nodes: int) -> dict:
    topology = sites(name, nodes)["topology"]
    return {"apiVersion": "nestlab.dev/v1alpha1", "kind": "NestLab", "metadata": {"name": name}, "spec": {"topology": topology}}


def by_operator(kubeconfig: str, folder: str, name: str, nodes: int) -> tuple[float, float]:
    """Seconds from `kubectl apply` to Ready, and from `kubectl delete` until nothing of the lab is left."""
    path = os.path.join(folder, "nestlab.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(resource(name, nodes), fh)

    def phase() -> str:
        got = kubectl(kubeconfig, "get", "nestlab", name, "-o", "json")
        return json.loads(got.stdout).get("status", {}).get("phase", "") if got.returncode == 0 else ""

    def gone() -> bool:
        pods = kubectl(kubeconfig, "get", "pods", "-A", "-l", f"{LABEL}={name}", "-o", "name").stdout.strip()
        return kubectl(kubeconfig, "get", "nestlab", name).returncode != 0 and not pods

    cli("k8s", "operator", "install", "--kubeconfig", kubeconfig, "--no-deployment")
    log = open(os.path.join(folder, "operator.log"), "w")
    operator = subprocess.Popen(
        [*NESTLAB, "k8s", "operator", "run", "--kubeconfig", kubeconfig], stderr=log, stdout=log, cwd=ROOT
    )
    try:
        started = time.perf_counter()
        if kubectl(kubeconfig, "apply", "-f", path).returncode:
            raise RuntimeError("kubectl apply failed")
        until(lambda: phase() in ("Ready", "Failed"), 900)
        ready = time.perf_counter() - started
        if phase() != "Ready":
            raise RuntimeError(f"the lab failed: see {log.name}")
        started = time.perf_counter()
        kubectl(kubeconfig, "delete", "nestlab", name, "--wait=false")
        until(gone, 600)
        return ready, time.perf_counter() - started
    finally:
        operator.terminate()
        operator.wait(timeout=60)
        log.close()
        cli("k8s", "operator", "uninstall", "--kubeconfig", kubeconfig, timeout=300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="nestlab-k8sop-")
    kubeconfig = os.path.join(folder, "kubeconfig")
    name = "bench-op"
    topo = os.path.join(folder, "lab.yml")
    with open(topo, "w") as fh:
        yaml.safe_dump(sites(name, args.nodes), fh)
    up, _ = phases(["k8s", "cluster", "up", "--nodes", "3", "--kubeconfig", kubeconfig, "--name", "bk8sop"])
    try:
        deploy, _ = phases(["k8s", "deploy", "-t", topo, "--kubeconfig", kubeconfig, "--servers", "3"])
        destroy = cli("destroy", "--lab", name)[0]
        ready, removed = by_operator(kubeconfig, folder, name, args.nodes)
    finally:
        phases(["k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", "bk8sop"])
    print(
        f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs; {args.nodes} nodes (10 switches in a chain) on 3 cluster nodes\n"
    )
    print("| made by | until Ready | / k8s deploy | removed in |")
    print("|---|---|---|---|")
    print(f"| `nestlab k8s deploy` (baseline) | {deploy:.1f} s | 1.00 | {destroy:.1f} s |")
    print(f"| NestLab resource + operator | {ready:.1f} s | {ready / deploy:.2f} | {removed:.1f} s |")
    print(f"\ncluster up (3 nodes, images cached): {up:.1f} s")


if __name__ == "__main__":
    main()

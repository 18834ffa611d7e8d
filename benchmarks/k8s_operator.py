#!/usr/bin/env python3
"""A 100-node lab on a 3-node Kubernetes cluster built from source, made two ways, alternated over ROUNDS rounds
(the order swapped each round): by `nestlab k8s deploy` from this machine (the baseline), and as a NestLab
resource that the operator makes, the operator running in the cluster as users run it (`operator install`, its
Deployment, namespace default allowed).  Every time is what a user waits for: the command timed from the shell,
and for the resource from `kubectl apply` until its status says Ready (and from `kubectl delete` until the
resource is gone, which its finalizer holds until every pod of the lab is).  Ready and gone are seen through one
watch opened before the clock starts (no process per look, nothing the baseline does not pay).

All of it runs on this one machine, so it measures what the resource path adds to the same control path (the
watch, the status writes, the operator's pod), not a cluster's speed.  Medians, with the spread (min..max).

Usage (root, after make k8s):  python benchmarks/k8s_operator.py [--nodes 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from k8s_scale import phases  # noqa: E402
from multi_server import cli, sites  # noqa: E402

from benchmarks import _smoke  # noqa: E402
from nestlab.testbeds import cluster  # noqa: E402


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.path.join(cluster.BIN, "kubectl"), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True
    )


def resource(name: str, nodes: int) -> dict:
    topology = sites(name, nodes)["topology"]
    return {"apiVersion": "nestlab.dev/v1alpha1", "kind": "NestLab", "metadata": {"name": name}, "spec": {"topology": topology}}


class Watched:
    """Every change of NestLab ``name`` in namespace default, as (phase, deleted) from one watch."""

    def __init__(self, kubeconfig: str, name: str) -> None:
        from kubernetes import client, config, watch

        api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
        self.seen: queue.Queue[tuple[str, bool]] = queue.Queue()

        def run() -> None:
            while True:  # a watch the API server ends (or refuses to resume) is opened again, listing afresh
                try:
                    stream = watch.Watch().stream(
                        api.list_namespaced_custom_object,
                        "nestlab.dev",
                        "v1alpha1",
                        "default",
                        "nestlabs",
                        field_selector=f"metadata.name={name}",
                        timeout_seconds=300,
                    )
                    for event in stream:
                        phase = (event["object"].get("status") or {}).get("phase", "")
                        self.seen.put((phase, event["type"] == "DELETED"))
                except Exception:  # noqa: BLE001 - e.g. 504 "too large resource version": the cache lags, list again
                    time.sleep(0.2)

        threading.Thread(target=run, daemon=True).start()
        time.sleep(1)  # the watch open

    def until(self, done, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while True:
            phase, deleted = self.seen.get(timeout=max(0.1, deadline - time.perf_counter()))
            if phase == "Failed":
                raise RuntimeError("the NestLab failed: kubectl logs -n nestlab-system deploy/nestlab-operator")
            if done(phase, deleted):
                return


def by_operator(kubeconfig: str, path: str, watched: Watched) -> tuple[float, float]:
    """Seconds from `kubectl apply` to Ready, and from `kubectl delete` until the resource (and so its pods) is gone."""
    started = time.perf_counter()
    if kubectl(kubeconfig, "apply", "-f", path).returncode:
        raise RuntimeError("kubectl apply failed")
    watched.until(lambda phase, _d: phase == "Ready", 900)
    ready = time.perf_counter() - started
    started = time.perf_counter()
    kubectl(kubeconfig, "delete", "nestlab", "--all", "--wait=false")
    watched.until(lambda _p, deleted: deleted, 600)
    return ready, time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}..{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = _smoke.parse(parser, nodes=12, rounds=1)
    folder = tempfile.mkdtemp(prefix="nestlab-k8sop-")
    kubeconfig = os.path.join(folder, "kubeconfig")
    name = "bench-op"
    topo, path = os.path.join(folder, "lab.yml"), os.path.join(folder, "nestlab.yaml")
    with open(topo, "w") as fh:
        yaml.safe_dump(sites(name, args.nodes), fh)
    with open(path, "w") as fh:
        yaml.safe_dump(resource(name, args.nodes), fh)
    up, _ = phases(["k8s", "cluster", "up", "--nodes", "3", "--kubeconfig", kubeconfig, "--name", "bk8sop"])
    made: dict[str, list[float]] = {"deploy": [], "destroy": [], "ready": [], "removed": []}
    try:
        cli("k8s", "operator", "install", "--kubeconfig", kubeconfig, "--allow", "default")
        until_running = time.perf_counter() + 120
        while "1/1" not in kubectl(kubeconfig, "get", "deploy", "-n", "nestlab-system", "nestlab-operator").stdout:
            if time.perf_counter() > until_running:
                raise RuntimeError("the operator's pod did not run")
            time.sleep(0.5)
        watched = Watched(kubeconfig, name)
        for round_ in range(args.rounds):
            for way in ("deploy", "operator") if round_ % 2 == 0 else ("operator", "deploy"):
                if way == "deploy":
                    made["deploy"].append(phases(["k8s", "deploy", "-t", topo, "--kubeconfig", kubeconfig, "--servers", "3"])[0])
                    made["destroy"].append(cli("destroy", "--lab", name)[0])
                else:
                    ready, removed = by_operator(kubeconfig, path, watched)
                    made["ready"].append(ready)
                    made["removed"].append(removed)
            print(f"round {round_ + 1}: deploy {made['deploy'][-1]:.1f} s, operator {made['ready'][-1]:.1f} s", flush=True)
        cli("k8s", "operator", "uninstall", "--kubeconfig", kubeconfig, timeout=300)
    finally:
        phases(["k8s", "cluster", "down", "--kubeconfig", kubeconfig, "--name", "bk8sop"])
    ratios = [r / d for r, d in zip(made["ready"], made["deploy"], strict=True)]
    print(
        f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs; {args.nodes} nodes (10 switches in a chain) on 3 cluster"
        f" nodes; {args.rounds} alternated rounds, medians (min..max)\n"
    )
    print("| made by | until Ready | removed in |")
    print("|---|---|---|")
    print(f"| `nestlab k8s deploy` (baseline) | {spread(made['deploy'])} | {spread(made['destroy'])} |")
    print(f"| NestLab resource + operator in the cluster | {spread(made['ready'])} | {spread(made['removed'])} |")
    print(f"\nresource / deploy, per round: median {statistics.median(ratios):.2f}x ({min(ratios):.2f}..{max(ratios):.2f})")
    print(f"cluster up (3 nodes, images cached): {up:.1f} s")


if __name__ == "__main__":
    main()

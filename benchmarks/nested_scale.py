#!/usr/bin/env python3
"""Deploy time and memory of nested nodes (seed 003's NestedNet MANET), nested vs flat, in one run.

Cases:

* ``manet nested`` / ``manet flat``: examples/nestednet-manet*.yml, 12 drones x (1 GNAB + 4 iPHY),
  with the shipped OVS main switch and with a Linux bridge instead
  (the paper: 98 s for NestedNet, 28 s for Containernet; 98 MB per node).
* ``2 x K components`` for K = 5..25 (``--components``; the paper's scaling test), nested.
* baseline, measured in the same run: the same number of plain namespace nodes (one network +
  UTS namespace each, no PID/mount namespace, no init, no cgroup) on one bridge per drone.
* a runc node on a busybox rootfs and a Docker node, reported separately (per node).

Memory per container is nestlab.bench.memory's: the kernel's own growth while the lab runs plus
the proportional set size of every process inside the lab.

Usage (root):  python benchmarks/nested_scale.py [--reps 3] [--components 5,10,15,20,25] [--no-containers]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402
from nestlab.bench.memory import kernel_kb, lab_pss_kb  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")


def measure(make, reps: int) -> tuple[float, float, float]:
    """Median deploy seconds, destroy seconds and memory (KiB: kernel growth + processes' PSS) over ``reps`` runs."""
    deploys, destroys, mems = [], [], []
    for _ in range(reps):
        lab = make()
        time.sleep(1.0)
        before = kernel_kb()
        t0 = time.perf_counter()
        lab.deploy()
        deploys.append(time.perf_counter() - t0)
        time.sleep(0.5)
        mems.append(kernel_kb() - before + lab_pss_kb(lab))
        t0 = time.perf_counter()
        lab.destroy()
        destroys.append(time.perf_counter() - t0)
    return statistics.median(deploys), statistics.median(destroys), statistics.median(mems)


def bridge_main(example: str) -> Lab:
    """The example with a Linux bridge as main switch (the shipped file uses OVS, as the paper did)."""
    text = open(example).read().replace("main: {kind: ovs}", "main: {kind: bridge}")
    path = os.path.join(tempfile.gettempdir(), "nestlab-bench-manet.yml")
    with open(path, "w") as fh:
        fh.write(text)
    return Lab.from_file(path)


def components_lab(nodes: int, k: int, nesting: str = "nested") -> Lab:
    lab = Lab(f"bench-nest{nodes}x{k}{nesting[0]}", ipv4_pool="10.64.0.0/10")
    lab.add_node("main", kind="bridge")
    for n in range(nodes):
        comps = {"gnab": {}, **{f"iphy{i}": {} for i in range(1, k)}}
        lab.add_node(f"d{n}", nesting=nesting, components=comps)
        lab.add_link(f"d{n}/iphy1:radio1", f"main:d{n}")
    return lab


def plain_lab(nodes: int, k: int) -> Lab:
    """The baseline: the same count of containers as plain namespace nodes, K per bridge."""
    lab = Lab(f"bench-plain{nodes}x{k}", ipv4_pool="10.64.0.0/10")
    lab.add_node("main", kind="bridge")
    for n in range(nodes):
        lab.add_node(f"d{n}", kind="bridge")
        for i in range(k):
            lab.add_node(f"d{n}c{i}")
            lab.add_link(f"d{n}c{i}:eth0", f"d{n}:c{i}")
        lab.add_link(f"d{n}c1:radio1", f"main:d{n}")
    return lab


def busybox_rootfs(where: str) -> str:
    root = os.path.join(where, "bb")
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
    for applet in ("sh", "sleep"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(root, d))
    return root


def image_lab(name: str, count: int, **spec) -> Lab:
    lab = Lab(name, ipv4_pool="10.64.0.0/10")
    for i in range(count):
        lab.add_node(f"n{i}", **spec)
    return lab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-containers", action="store_true", help="skip the runc and Docker rows")
    ap.add_argument("--components", default="5,10,15,20,25", help="components per node of the 2-node rows (2 or more)")
    args = _smoke.parse(ap, reps=1, components="2")
    rows = []

    def row(case: str, containers: int, result, base=None) -> None:
        dep, des, mem = result
        line = {
            "case": case,
            "containers": containers,
            "deploy_s": dep,
            "destroy_s": des,
            "mem_per_container_kb": mem / containers,
        }
        if base:
            line["deploy_vs_plain"] = dep / base[0]
            line["mem_vs_plain"] = (mem / containers) / (base[2] / containers) if base[2] > 0 else float("nan")
        rows.append(line)
        print(
            f"{case:28} {containers:4d} containers  deploy {dep:6.3f} s  destroy {des:6.3f} s  "
            f"{mem / containers:7.0f} KiB/container"
            + (
                f"  (x{line['deploy_vs_plain']:.2f} time, x{line['mem_vs_plain']:.2f} memory vs plain namespaces)" if base else ""
            ),
            flush=True,
        )

    base = measure(lambda: plain_lab(12, 5), args.reps)
    row("plain namespaces 12x5", 60, base)
    for nesting in ("nested", "flat"):
        example = os.path.join(ROOT, "examples", "nestednet-manet.yml" if nesting == "nested" else "nestednet-manet-flat.yml")
        row(f"manet {nesting} 12x5, ovs main", 60, measure(lambda example=example: Lab.from_file(example), args.reps), base)
        row(f"manet {nesting} 12x5, bridge main", 60, measure(lambda example=example: bridge_main(example), args.reps), base)
    for k in (int(k) for k in args.components.split(",")):
        base_k = measure(lambda k=k: plain_lab(2, k), args.reps)
        row(f"2 x {k} components", 2 * k, measure(lambda k=k: components_lab(2, k), args.reps), base_k)
    if not args.no_containers:
        with tempfile.TemporaryDirectory() as tmp:
            root = busybox_rootfs(tmp)
            plain = measure(lambda: image_lab("bench-ns", 5), args.reps)
            row("5 namespace nodes", 5, plain)
            row("5 runc nodes (busybox)", 5, measure(lambda: image_lab("bench-runc", 5, image=root), args.reps), plain)
            if shutil.which("docker") and subprocess.run(["docker", "version"], capture_output=True).returncode == 0:
                tar = subprocess.run(["tar", "-C", root, "-c", "."], capture_output=True, check=True).stdout
                subprocess.run(["docker", "import", "-", "nestlab-bench-bb:1"], input=tar, capture_output=True, check=True)
                row(
                    "5 docker nodes (busybox)",
                    5,
                    measure(lambda: image_lab("bench-docker", 5, runtime="docker", image="nestlab-bench-bb:1"), args.reps),
                    plain,
                )
            else:
                print("docker rows skipped: no reachable Docker engine (set DOCKER_HOST)")
    print("\n| case | containers | deploy s | destroy s | KiB per container | time vs plain | memory vs plain |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['containers']} | {r['deploy_s']:.3f} | {r['destroy_s']:.3f} | {r['mem_per_container_kb']:.0f} | "
            f"{r.get('deploy_vs_plain', 1):.2f} | {r.get('mem_vs_plain', 1):.2f} |"
        )


if __name__ == "__main__":
    main()

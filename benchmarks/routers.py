#!/usr/bin/env python3
"""Routers: deploy time, deploy-to-converged time and memory of N FRR routers in a ring running
OSPF, against N plain namespace nodes of the same shape in the same run; and the cost of a
filesystem view alone (nodes with a bind, no daemon).

* ``plain``: N nodes in a ring, no view (the baseline);
* ``views``: the same with one bind each (a mount namespace per node, no daemon);
* ``frr``: N ``kind: frr`` routers in a ring, OSPF on every link (hello 1 s, dead 4 s);
  converged = every router has its two neighbours Full;
* ``FRR alone``: FRR's own cost, without nestlab: the same daemons and configuration started
  by the same script in N bare namespaces (``unshare``, each with its own /run/frr),
  all at once.  ``frr`` deploy minus ``plain`` deploy against this is nestlab's overhead.

Memory per node is nestlab.bench.memory's: kernel growth while the lab runs plus the
proportional set size of every process inside the lab.

Usage (root):  python benchmarks/routers.py [--sizes 10,100] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402
from nestlab.backends.services import frr  # noqa: E402
from nestlab.bench.memory import kernel_kb, lab_pss_kb  # noqa: E402

OSPF = "interface eth1\n ip ospf hello-interval 1\n ip ospf dead-interval 4\ninterface eth2\n ip ospf hello-interval 1\n ip ospf dead-interval 4\nrouter ospf\n network 10.0.0.0/8 area 0\n"


def ring(case: str, n: int) -> Lab:
    """N nodes in a ring, r{i}:eth1 -- r{i+1}:eth2, each link its own /30 from 10.0.0.0/8."""
    extra = {
        "plain": "{}",
        "views": "{binds: ['/etc/os-release:/tmp/os-release:ro']}",
        "frr": "{kind: frr, startup-config: ospf.conf}",
    }[case]
    nodes = "".join(f"    r{i}: {extra}\n" for i in range(n))
    links = "".join(f"    - endpoints: [r{i}:eth1, r{(i + 1) % n}:eth2]\n" for i in range(n))
    folder = tempfile.mkdtemp(prefix="nestlab-routers-")
    with open(os.path.join(folder, "ospf.conf"), "w") as fh:
        fh.write(OSPF)
    path = os.path.join(folder, "lab.yml")
    with open(path, "w") as fh:
        fh.write(f"name: bench-{case}{n}\nipv4_pool: 10.0.0.0/8\ntopology:\n  nodes:\n{nodes}  links:\n{links}")
    return Lab.from_file(path)


def frr_alone(n: int) -> float:
    """Seconds to start FRR (frr.START) in N bare network and mount namespaces at once, each with
    its own /etc/frr, /run/frr and the folder it starts from (frr.BOOT_DIR); the daemons are killed (their namespaces go with them)."""
    etc = tempfile.mkdtemp(prefix="nestlab-frr-alone-")
    files = {
        "frr.conf": OSPF,
        "daemons": frr.daemons_file(frr.daemons_for(OSPF)),
        "vtysh.conf": "service integrated-vtysh-config\n",
    }
    for name, text in files.items():
        with open(os.path.join(etc, name), "w") as fh:
            fh.write(text)
    owner = pwd.getpwnam(frr.USER)  # FRR's packaged daemons' user
    uid, gid = owner.pw_uid, owner.pw_gid
    for path in [etc, *(os.path.join(etc, f) for f in files)]:
        os.chown(path, uid, gid)
    script = (
        f"ip link set lo up && mount -t tmpfs tmpfs /run && mkdir -p {frr.RUN_DIR} {frr.BOOT_DIR} && "
        f"mount -t tmpfs -o mode=755,uid={uid},gid={gid} tmpfs {frr.RUN_DIR} && mount --bind {etc} {frr.CONFIG_DIR} && "
        f"mount --bind {etc} {frr.BOOT_DIR} && ( {frr.START} ) >/dev/null 2>&1; cat {frr.RUN_DIR}/*.pid"
    )
    pids: list[str] = []
    try:
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(["unshare", "--net", "--mount", "sh", "-c", script], stdout=subprocess.PIPE, text=True)
            for _ in range(n)
        ]
        for proc in procs:
            pids += proc.communicate()[0].split()
        took = time.perf_counter() - t0
        if len(pids) != 3 * n:
            raise SystemExit(f"FRR alone: {len(pids)} daemons of {3 * n} started")
        return took
    finally:
        subprocess.run(["kill", "-9", *pids], capture_output=True)
        shutil.rmtree(etc)


def full_neighbours(lab: Lab, router: str) -> int:
    try:
        found = json.loads(lab.nodes[router].cmd("vtysh -c 'show ip ospf neighbor json'")).get("neighbors", {})
    except json.JSONDecodeError:
        return 0
    return sum(1 for entries in found.values() for n in entries if n.get("state", n.get("nbrState", "")).startswith("Full"))


def converged(lab: Lab, n: int, timeout: float = 300) -> float | None:
    """Seconds until every router has both neighbours Full (None: not within ``timeout``)."""
    t0, waiting = time.perf_counter(), [f"r{i}" for i in range(n)]
    while waiting and time.perf_counter() - t0 < timeout:
        waiting = [r for r in waiting if full_neighbours(lab, r) < 2]
        if waiting:
            time.sleep(0.2)
    return None if waiting else time.perf_counter() - t0


def measure(case: str, n: int, reps: int) -> dict:
    found: dict[str, list] = {"deploy": [], "converged": [], "kb_per_node": [], "destroy": []}
    for _ in range(reps):
        lab = ring(case, n)
        lab.plan
        time.sleep(1.0)
        before = kernel_kb()
        t0 = time.perf_counter()
        lab.deploy()
        found["deploy"].append(time.perf_counter() - t0)
        if case == "frr":
            took = converged(lab, n)
            found["converged"].append(found["deploy"][-1] + took if took is not None else float("nan"))
        else:
            time.sleep(1.0)
        found["kb_per_node"].append((kernel_kb() - before + lab_pss_kb(lab)) / n)
        t0 = time.perf_counter()
        lab.destroy()
        found["destroy"].append(time.perf_counter() - t0)
    return {k: statistics.median(v) if v else None for k, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100")
    parser.add_argument("--reps", type=int, default=3)
    args = _smoke.parse(parser, sizes="3", reps=1)
    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs, median of {args.reps}\n")
    print("| ring of N | case | deploy | deploy to OSPF converged | memory per node | destroy | deploy / plain |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        rows = {case: measure(case, n, args.reps) for case in ("plain", "views", "frr")}
        for case, r in rows.items():
            conv = f"{r['converged']:.2f} s" if r["converged"] is not None else "-"
            print(
                f"| {n} | {case} | {r['deploy']:.2f} s | {conv} | {r['kb_per_node'] / 1024:.1f} MiB | {r['destroy']:.2f} s | "
                f"{r['deploy'] / rows['plain']['deploy']:.2f} |",
                flush=True,
            )
        alone = statistics.median(frr_alone(n) for _ in range(args.reps))
        print(f"| {n} | FRR alone (no nestlab) | {alone:.2f} s | - | - | - | - |", flush=True)
        print(
            f"\n{n} routers: frr deploy - plain deploy = {rows['frr']['deploy'] - rows['plain']['deploy']:.2f} s, "
            f"FRR alone {alone:.2f} s ({(rows['frr']['deploy'] - rows['plain']['deploy']) / alone:.2f}x)\n",
            flush=True,
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Soak: deploy and destroy the same lab over and over, and watch what must stay flat.

The lab: 47 hosts on a bridge, every link shaped (100 Mbit/s, HTB), and a nested node with two
components joined by its internal switch, one of them on the bridge (51 nodes).  Each cycle
deploys it, pings across it every ``--check`` cycles, and destroys it; then samples:

* this process: open file descriptors, threads, resident memory (the Python API's own leaks);
* the kernel: slab memory (``/proc/meminfo``), the interfaces of this machine (``/proc/net/dev``),
  network namespaces (``/run/netns``), cgroups of nestlab's;
* leftovers: anything carrying the lab's marker after destroy (must be none, every cycle).

Its tables: the samples after the first cycle, the first sample after it and the last; and the seconds a cycle
took over the first and the last hundred cycles (the same lab, so the first hundred are the baseline).

Usage (root):  python benchmarks/soak.py [--cycles 1000] [--every 10] [--csv soak.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402
from nestlab.engine import cleanup  # noqa: E402  (what `nestlab demo` checks after its destroy)
from nestlab.names import NETNS_DIR  # noqa: E402

HOSTS = 47


def topology(name: str) -> str:
    hosts = "".join(f"    h{i}: {{}}\n" for i in range(HOSTS))
    links = "".join(f'    - {{endpoints: ["h{i}:eth1", "sw:p{i}"], params: {{rate: 100mbit}}}}\n' for i in range(HOSTS))
    return (
        f"name: {name}\ntopology:\n  nodes:\n    sw: {{kind: bridge}}\n{hosts}"
        "    n1: {resources: {cpus: 1, memory: 256m}, components: {gnab: {}, iphy: {}}}\n"
        f'  links:\n{links}    - {{endpoints: ["n1/iphy:radio", "sw:pn1"], params: {{rate: 100mbit}}}}\n'
    )


def sample() -> dict[str, float]:
    with open("/proc/meminfo") as fh:
        meminfo = {line.split(":")[0]: int(line.split()[1]) for line in fh}
    with open("/proc/self/status") as fh:
        rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    with open("/proc/net/dev") as fh:
        interfaces = len(fh.readlines()) - 2
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "tasks": len(os.listdir("/proc/self/task")),
        "rss_kb": rss,
        "slab_kb": meminfo["Slab"],
        "interfaces": interfaces,
        "netns": len(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else 0,
    }


def cycles(path: str, count: int, every: int = 10, check: int = 100) -> Iterator[dict[str, float]]:
    """Deploy/destroy the lab in ``path`` ``count`` times; yields each cycle's number and seconds, with a sample
    after the first cycle and every ``every`` cycles (stops at the first cycle that leaves anything)."""
    lab = Lab.from_file(path)
    for n in range(1, count + 1):
        t0 = time.perf_counter()
        with lab.deployed():
            if n == 1 or n % check == 0:
                far = lab.nodes[f"h{HOSTS - 1}"].intf("eth1").ip
                for src in ("h0", "n1/iphy"):
                    out = lab.nodes[src].cmd(f"ping -c1 -W2 {far}")
                    if "1 received" not in out:
                        raise SystemExit(f"cycle {n}: {src} did not reach h{HOSTS - 1}: {out}")
        took = time.perf_counter() - t0
        left = cleanup.left(lab.name)
        if left:
            raise SystemExit(f"cycle {n}: left behind {left}")
        yield {"cycle": n, "seconds": round(took, 3), **(sample() if n == 1 or n % every == 0 else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--csv", default="soak.csv")
    parser.add_argument("--check", type=int, default=100, help="ping across the lab every CHECK cycles (and after the first)")
    args = _smoke.parse(parser, cycles=3, every=1, check=2)
    rows, seconds = [], []
    with tempfile.TemporaryDirectory(prefix="nestlab-soak-") as folder, open(args.csv, "w", newline="") as fh:
        path = os.path.join(folder, "soak.yml")
        with open(path, "w") as topo:
            topo.write(topology("soak"))
        out = None
        for cycle in cycles(path, args.cycles, args.every, args.check):
            seconds.append(cycle["seconds"])
            if "fds" not in cycle:  # no sample this cycle
                continue
            rows.append(cycle)
            out = out or csv.DictWriter(fh, fieldnames=list(cycle))
            if len(rows) == 1:
                out.writeheader()
            out.writerow(cycle)
            fh.flush()
            print(" ".join(f"{k}={v}" for k, v in cycle.items()), flush=True)
    first, second, last = rows[0], rows[1] if len(rows) > 1 else rows[0], rows[-1]
    print(f"\n{args.cycles} cycles of a {HOSTS + 4}-node lab, kernel {os.uname().release}: 0 leftovers after every cycle\n")
    print(
        "| measure | after cycle 1 | after cycle "
        + f"{second['cycle']} | after cycle {last['cycle']} | change from cycle {second['cycle']} |"
    )
    print("|---|---|---|---|---|")
    for key in ("seconds", "fds", "threads", "tasks", "rss_kb", "slab_kb", "interfaces", "netns"):
        print(f"| {key} | {first[key]} | {second[key]} | {last[key]} | {last[key] - second[key]:+g} |")
    window = min(100, len(seconds))
    head, tail = seconds[:window], seconds[-window:]
    print(f"\n| cycles | seconds per cycle: median | fastest | slowest | median / the first {window}'s |\n|---|---|---|---|---|")
    for label, part in ((f"1-{window}", head), (f"{len(seconds) - window + 1}-{len(seconds)}", tail)):
        median = statistics.median(part)
        print(f"| {label} | {median:.3f} | {min(part):.3f} | {max(part):.3f} | {median / statistics.median(head):.2f} |")


if __name__ == "__main__":
    main()

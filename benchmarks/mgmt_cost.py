#!/usr/bin/env python3
"""What the management network costs a deploy, as a user waits for it: one run, A/B interleaved.

A star of N nodes (on bridges of at most 500 ports, chained) is deployed, inspected and destroyed
with the CLI (timed from the shell), once as it is and once with ``mgmt:`` (every node an eth0 on the management bridge, a name in
/etc/hosts and ``ip netns``, SSH, inventories).  The two take turns; the table gives each side's
median and the ratio.  After the last round it checks that nothing of either is left.

Usage (root):  python benchmarks/mgmt_cost.py [--nodes 500] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from benchmarks import _smoke  # noqa: E402
from benchmarks.ab_deploy import cli  # noqa: E402  (a CLI call from the shell, run from a tree)
from nestlab.engine import cleanup  # noqa: E402  (what `nestlab demo` checks after its destroy)


def star(name: str, n: int, mgmt: bool) -> str:
    switches = -(-n // 500)
    nodes = "".join(f"    sw{s}: {{kind: bridge}}\n" for s in range(switches))
    nodes += "".join(f"    h{i}: {{}}\n" for i in range(n))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw{i // 500}:p{i}"]\n' for i in range(n))
    links += "".join(f'    - endpoints: ["sw{s}:up", "sw{s + 1}:down"]\n' for s in range(switches - 1))
    top = "mgmt: {ipv4-subnet: 172.20.16.0/20}\n" if mgmt else ""
    return f"name: {name}\n{top}ipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n{nodes}  links:\n{links}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the raw timings here")
    args = _smoke.parse(parser, nodes=4, rounds=1)
    sides = {"without": False, "with mgmt": True}
    steps = ("deploy", "inspect", "destroy")
    times = {side: {step: [] for step in steps} for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for side, mgmt in sides.items():
            name = f"mg-cost-{'on' if mgmt else 'off'}"
            files[side] = (os.path.join(tmp, f"{name}.yml"), name)
            with open(files[side][0], "w") as fh:
                fh.write(star(name, args.nodes, mgmt))
        for r in range(args.rounds):
            for side in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                path, name = files[side]
                times[side]["deploy"].append(cli(ROOT, "deploy", "-t", path))
                times[side]["inspect"].append(cli(ROOT, "inspect", "--lab", name, "--format", "json"))
                times[side]["destroy"].append(cli(ROOT, "destroy", "--lab", name, "--cleanup"))
                time.sleep(2)  # the kernel frees namespaces asynchronously
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        left = [x for _, name in files.values() for x in cleanup.left(name)]
        left += glob.glob("/run/netns/clab-*") + glob.glob("/run/nestlab-mgmt/*.json") + glob.glob("/var/lib/nestlab/ssh/*")
    print(f"| {args.nodes}-node star | without | with mgmt | with / without |\n|---|---|---|---|")
    for step in steps:
        off, on = times["without"][step], times["with mgmt"][step]
        print(
            f"| {step} | {statistics.median(off):.2f} s ({min(off):.2f}-{max(off):.2f}) | "
            f"{statistics.median(on):.2f} s ({min(on):.2f}-{max(on):.2f}) | {statistics.median(on) / statistics.median(off):.2f} |"
        )
    print(f"left behind: {left or 'nothing'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(times, fh, indent=1)


if __name__ == "__main__":
    main()

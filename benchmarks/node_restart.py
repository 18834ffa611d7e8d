#!/usr/bin/env python3
"""What `nestlab node stop/start/restart` costs, as a user waits for it, beside a deploy of the same lab.

A star of N plain nodes on one bridge is deployed; then every node is restarted at once, stopped,
and started, each timed from the shell.  The deploy of the same file in the same run is the
baseline.  Whatever the lab's state, it is destroyed at the end and checked to leave nothing.

Usage (root):  python benchmarks/node_restart.py [--nodes 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from benchmarks.ab_deploy import cli  # noqa: E402  (a CLI call from the shell, run from a tree)
from nestlab.lab import cleanup  # noqa: E402

NAME = "node-restart"


def star(n: int) -> str:
    nodes = "    sw: {kind: bridge}\n" + "".join(f"    h{i}: {{}}\n" for i in range(n))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n))
    return f"name: {NAME}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n{nodes}  links:\n{links}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    nodes = [f"h{i}" for i in range(args.nodes)]
    steps = ("deploy", "restart", "stop", "start")
    times: dict[str, list[float]] = {step: [] for step in steps}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{NAME}.yml")
        with open(path, "w") as fh:
            fh.write(star(args.nodes))
        try:
            for _ in range(args.rounds):
                times["deploy"].append(cli(ROOT, "deploy", "-t", path))
                times["restart"].append(cli(ROOT, "node", "restart", "--lab", NAME, *nodes))
                times["stop"].append(cli(ROOT, "node", "stop", "--lab", NAME, *nodes))
                times["start"].append(cli(ROOT, "node", "start", "--lab", NAME, *nodes))
                cli(ROOT, "destroy", "--lab", NAME)
        finally:
            cli(ROOT, "destroy", "--lab", NAME)
    base = statistics.median(times["deploy"])
    print(f"{args.nodes} nodes on one bridge, {args.rounds} rounds, medians (from the shell):")
    for step in steps:
        median = statistics.median(times[step])
        print(
            f"  {step:8s} {median:6.2f} s   ({median / base:.2f}x the deploy)   all: {', '.join(f'{t:.2f}' for t in times[step])}"
        )
    left = cleanup.left(NAME)
    print("nothing left" if not left else f"LEFT: {left[:5]}")
    sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()

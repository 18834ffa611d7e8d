#!/usr/bin/env python3
"""Small commands on a running 500-node lab, each timed from the shell (docs/performance.md,
"Small commands on a 500-node lab"): the table there is this script's output.

A star of 500 hosts on one bridge is deployed; ``inspect`` (its table, then ``--format json``) is timed
``--repeat`` times each, taking turns, right after the deploy returns (as a user meets it: best and
median), then every command is run ``--repeat`` times and its best time kept.  With ``--before REF`` the same is done for that commit's tree (a git worktree, its
bytecode compiled as this tree's), the two taking turns over ``--rounds``, and the table has both.

Usage (root):  python benchmarks/small_commands.py [--before REF] [--rounds 2] [--repeat 3] [--nodes 500]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from benchmarks import _smoke  # noqa: E402
from benchmarks.ab_deploy import cli  # noqa: E402  (a CLI call from the shell, run from a tree)

LAB = "small500"


def star(n: int) -> str:
    nodes = "".join(f"    h{i}: {{}}\n" for i in range(n))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n))
    return f"name: {LAB}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n    sw: {{kind: bridge}}\n{nodes}  links:\n{links}"


COMMANDS = [
    ("nestlab --help", ["--help"]),
    ("link set --lab L h1:eth1 sw:p1 --rate 10mbit", ["link", "set", "--lab", LAB, "h1:eth1", "sw:p1", "--rate", "10mbit"]),
    ("link show --lab L h1:eth1 sw:p1", ["link", "show", "--lab", LAB, "h1:eth1", "sw:p1"]),
    ("link show --lab L --format json", ["link", "show", "--lab", LAB, "--format", "json"]),
    ("inspect --lab L", ["inspect", "--lab", LAB]),
    ("inspect --lab L --format json", ["inspect", "--lab", LAB, "--format", "json"]),
    ("inspect --all", ["inspect", "--all"]),
    ("events --lab L --since 0 --no-follow", ["events", "--lab", LAB, "--since", "0", "--no-follow"]),
    ("graph --lab L --format json", ["graph", "--lab", LAB, "--format", "json"]),
    ("clab inspect --name L --format json", ["clab", "inspect", "--name", LAB, "--format", "json"]),
]


AFTER_DEPLOY = [
    ("inspect --lab L right after deploy", ["inspect", "--lab", LAB]),
    ("inspect --lab L --format json right after deploy", ["inspect", "--lab", LAB, "--format", "json"]),
]


def measure(tree: str, topo: str, repeat: int) -> dict[str, float]:
    """Deploy, inspect's table and JSON ``repeat`` times each at once (best and median), every command's best of
    ``repeat``, destroy."""
    cli(tree, "deploy", "-t", topo)
    try:
        at_once: dict[str, list[float]] = {label: [] for label, _ in AFTER_DEPLOY}
        for _ in range(repeat):
            for label, args in AFTER_DEPLOY:
                at_once[label].append(cli(tree, *args))
        found = {}
        for label, times in at_once.items():
            found[f"{label}: best of {repeat}"] = min(times)
            found[f"{label}: median of {repeat}"] = statistics.median(times)
        for label, args in COMMANDS:
            found[label] = min(cli(tree, *args) for _ in range(repeat))
    finally:
        cli(tree, "destroy", "--lab", LAB)
        time.sleep(2)  # the kernel frees namespaces asynchronously
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a commit to compare this checkout with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=500)
    args = _smoke.parse(parser, repeat=1, rounds=1, nodes=10)
    with tempfile.TemporaryDirectory() as tmp:
        topo = os.path.join(tmp, "star.yml")
        with open(topo, "w") as fh:
            fh.write(star(args.nodes))
        trees = {"this checkout": ROOT}
        if args.before:
            before = os.path.join(tmp, "before")
            subprocess.run(
                ["git", "-C", ROOT, "worktree", "add", "--detach", before, args.before], check=True, capture_output=True
            )
            trees = {f"before ({args.before})": before, **trees}
        try:
            for tree in trees.values():
                compileall.compile_dir(os.path.join(tree, "nestlab"), quiet=1)
            results: dict[str, dict[str, float]] = {}
            for r in range(args.rounds):
                for side in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                    found = measure(trees[side], topo, args.repeat)
                    results[side] = {k: min(v, results.get(side, {}).get(k, v)) for k, v in found.items()}
        finally:
            if args.before:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", before], capture_output=True)
    sides = list(results)
    print("| command (L: a star of %d hosts) | %s |" % (args.nodes, " | ".join(sides)))
    print("|---|" + "---|" * len(sides))
    for label in results[sides[0]]:
        print(f"| `{label}` | " + " | ".join(f"{results[s][label]:.3f} s" for s in sides) + " |")


if __name__ == "__main__":
    main()

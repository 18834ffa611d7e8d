#!/usr/bin/env python3
"""A/B deploy timing in one run: this checkout against another commit, as a user waits for it.

Each case is deployed, inspected (``inspect --format json`` at once, as a user meets it right after
the deploy returns) and destroyed with the ``nestlab`` CLI (``python -m nestlab.cli.app``), timed
from the shell: interpreter start, imports, parsing, the work itself and the output.
The two trees take turns (A B, then B A, ...), so both see the same machine; the table gives
each side's median (and range) and the ratio of this checkout to the other.

Cases: a star of 500 nodes (``--nodes``) on one bridge, and seed 003's 12 x 5 nested MANET
(examples/nestednet-manet.yml: 12 drones holding 5 components each, on an OVS main switch).

Usage (root):  python benchmarks/ab_deploy.py --before REF [--rounds 5] [--nodes 500] [--json FILE]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from benchmarks import _smoke  # noqa: E402


def star(n: int) -> str:
    nodes = "".join(f"    h{i}: {{}}\n" for i in range(n))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n))
    return f"name: ab-star{n}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n    sw: {{kind: bridge}}\n{nodes}  links:\n{links}"


def cli(tree: str, *args: str) -> float:
    """Seconds one CLI call takes from the shell, run from ``tree`` (its nestlab is the one imported)."""
    env = {**os.environ, "PYTHONPATH": tree}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nestlab.cli.app", *args],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="the commit to compare this checkout with (required)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=500, help="hosts of the star")
    parser.add_argument("--json", help="also write the raw timings here")
    args = _smoke.parse(parser, before="HEAD", rounds=1, nodes=10)
    if not args.before:
        parser.error("--before REF is required")
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", "-q", args.before], capture_output=True).returncode:
        _smoke.skip(f"{ROOT} is not a git checkout holding {args.before}: another commit's tree cannot be made")
    with tempfile.TemporaryDirectory() as tmp:
        before = os.path.join(tmp, "before")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", before, args.before], check=True, capture_output=True)
        try:
            star_file = os.path.join(tmp, f"star{args.nodes}.yml")
            with open(star_file, "w") as fh:
                fh.write(star(args.nodes))
            cases = {
                f"star{args.nodes}": (star_file, f"ab-star{args.nodes}"),
                "manet 12x5 nested": (os.path.join(ROOT, "examples", "nestednet-manet.yml"), "nestednet-manet"),
            }
            sides = {"before": before, "after": ROOT}
            for tree in sides.values():  # bytecode as installed packages have it, on both sides
                compileall.compile_dir(os.path.join(tree, "nestlab"), quiet=1)
            steps = ("deploy", "inspect", "destroy")
            times: dict = {case: {side: {step: [] for step in steps} for side in sides} for case in cases}
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                for case, (path, lab) in cases.items():
                    for side in order:
                        times[case][side]["deploy"].append(cli(sides[side], "deploy", "-t", path, "--format", "json"))
                        times[case][side]["inspect"].append(cli(sides[side], "inspect", "--lab", lab, "--format", "json"))
                        times[case][side]["destroy"].append(cli(sides[side], "destroy", "--lab", lab))
                        time.sleep(2)  # the kernel frees namespaces asynchronously
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", before], capture_output=True)
    print(f"| case | step | before ({args.before}) | after (this checkout) | after / before |\n|---|---|---|---|---|")
    for case, per_side in times.items():
        for step in steps:
            b, a = per_side["before"][step], per_side["after"][step]
            print(
                f"| {case} | {step} | {statistics.median(b):.2f} s ({min(b):.2f}-{max(b):.2f}) | "
                f"{statistics.median(a):.2f} s ({min(a):.2f}-{max(a):.2f}) | {statistics.median(a) / statistics.median(b):.2f} |"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(times, fh, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What `nestlab node stop/start/restart` costs, as a user waits for it, beside a deploy of the same lab.

A star of N plain nodes on one bridge is deployed; then every node is restarted at once, stopped,
and started, each timed from the shell.  The deploy of the same file in the same run is the
baseline.  Then one node's downtime as its peer sees it: h0 pings h1 every 10 ms while h1 alone is
restarted (the pings lost, times 10 ms).  Whatever the lab's state, it is destroyed at the end and
checked to leave nothing.

Usage (root):  python benchmarks/node_restart.py [--nodes 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from benchmarks import _smoke  # noqa: E402
from benchmarks.ab_deploy import cli  # noqa: E402  (a CLI call from the shell, run from a tree)
from nestlab.engine import cleanup  # noqa: E402  (what `nestlab demo` checks after its destroy)

NAME = "node-restart"


def star(n: int) -> str:
    nodes = "    sw: {kind: bridge}\n" + "".join(f"    h{i}: {{}}\n" for i in range(n))
    links = "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n))
    return f"name: {NAME}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n{nodes}  links:\n{links}"


def downtime() -> float:
    """Seconds h1 did not answer h0's pings (one every 10 ms, for 3 s) while ``node restart h1`` ran."""
    nestlab = [sys.executable, "-m", "nestlab.cli.app", "exec", "--lab", NAME]
    shown = subprocess.run([*nestlab, "h1", "--", "ip", "-4", "-o", "addr", "show", "eth1"], capture_output=True, text=True)
    address = shown.stdout.split("inet ")[1].split("/")[0]
    ping = ["ping", "-n", "-q", "-i", "0.01", "-W", "0.1", "-w", "3", address]
    pinger = subprocess.Popen([*nestlab, "h0", "--", *ping], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(1)
    cli(ROOT, "node", "restart", "--lab", NAME, "h1")
    said = pinger.communicate()[0]
    sent, received = (int(n) for n in re.search(r"(\d+) packets transmitted, (\d+) received", said).groups())
    return (sent - received) * 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = _smoke.parse(parser, nodes=4, rounds=1)
    nodes = [f"h{i}" for i in range(args.nodes)]
    steps = ("deploy", "restart", "stop", "start", "one node's downtime")
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
                times["one node's downtime"].append(downtime())
                cli(ROOT, "destroy", "--lab", NAME)
        finally:
            cli(ROOT, "destroy", "--lab", NAME)
    base = statistics.median(times["deploy"])
    print(f"{args.nodes} nodes on one bridge, {args.rounds} rounds, every node at once, timed from the shell\n")
    print("| step | median | / the deploy | every round |\n|---|---|---|---|")
    for step in steps:
        median = statistics.median(times[step])
        print(f"| {step} | {median:.2f} s | {median / base:.2f} | {', '.join(f'{t:.2f}' for t in times[step])} |")
    left = cleanup.left(NAME)
    print("nothing left" if not left else f"LEFT: {left[:5]}")
    sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()

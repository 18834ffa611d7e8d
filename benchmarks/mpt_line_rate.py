#!/usr/bin/env python3
"""The MPT tunnel over 12 x 100 Mbit/s paths: this checkout's daemon against another's, and MPTCP, in one run.

Seed 001's testbed (nestlab.bench.suites.multipath, containerised, 12 paths) is deployed once per
variant: "after" (this checkout), and with --before REF also "before" (REF's daemon, the kernel's
default tun queue of 500 packets) and "after-q500" (this daemon, that queue).  The variants take
turns (A B C, then C B A, ...), so all see the same machine.  Each runs UDP offered at 1 200 Mbit/s
and one TCP connection through the tunnel; "after" also MPTCP on the same paths.  Beside each
result, where the machine's CPU went while it ran (both cores: the daemons; user, system, softirq,
steal, idle).

Usage (root):  python benchmarks/mpt_line_rate.py [--before REF] [--rounds 3] [--duration 10] [--json FILE]
REF is a commit whose mpt/ is built for the comparison (default: none, this checkout only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from nestlab.backends.services import mpt_daemon  # noqa: E402
from nestlab.bench import tools  # noqa: E402
from nestlab.bench.suites import multipath  # noqa: E402

PATHS = 12


def build(ref: str, out: str) -> str:
    """nestlab-mpt built from commit ``ref``'s mpt/ folder."""
    src = tempfile.mkdtemp(prefix="mpt-src-")
    tar = subprocess.run(["git", "-C", ROOT, "archive", ref, "mpt"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=tar, check=True)
    subprocess.run(
        ["go", "build", "-trimpath", "-o", out, "."],
        cwd=os.path.join(src, "mpt"),
        check=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    return out


def measure(lab, method: str, duration: float) -> dict:
    cell = {"placement": "containerised", "paths": PATHS, "method": method}
    summary = multipath.measure(lab, cell, duration, Discard())[-1]
    return {
        key: summary.get(key)
        for key in (
            "mbps",
            "capacity_pct",
            "retransmits",
            "lost_pct",
            "cpu_daemons_pct",
            "cpu_user_pct",
            "cpu_system_pct",
            "cpu_softirq_pct",
            "cpu_steal_pct",
            "cpu_idle_pct",
        )
    }


class Discard:
    """A recorder that keeps no raw output."""

    def raw(self, *_args) -> None:
        pass


def run(variant: str, binary: str, txqueuelen: int, results: list, duration: float, methods: list[str]) -> None:
    os.environ["NESTLAB_MPT"], mpt_daemon.TXQUEUELEN = binary, txqueuelen
    lab = multipath.testbed("containerised", PATHS)
    lab.deploy()
    try:
        for method in methods:
            r = measure(lab, method, duration)
            results.append({"variant": variant, "method": method, **r})
            print(
                f"{variant:10} {method:8} {r['mbps']:6.0f} Mbit/s {r['capacity_pct']:5.1f} %  retransmits {r['retransmits'] or 0:5}  "
                f"CPU: daemons {r['cpu_daemons_pct'] or 0:4.1f}  user {r['cpu_user_pct']:4.1f}  system {r['cpu_system_pct']:4.1f}  "
                f"softirq {r['cpu_softirq_pct']:4.1f}  steal {r['cpu_steal_pct']:4.1f}  idle {r['cpu_idle_pct']:4.1f}",
                flush=True,
            )
    finally:
        lab.destroy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="commit whose daemon is the baseline")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    tools.require("iperf3")
    variants = {"after": (mpt_daemon.binary(), mpt_daemon.TXQUEUELEN)}
    if args.before:
        old = build(args.before, os.path.join(tempfile.mkdtemp(prefix="mpt-before-"), "nestlab-mpt"))
        variants |= {
            "before": (old, 500),
            "after-q500": (mpt_daemon.binary(), 500),
        }  # the old daemon and queue; the new daemon alone
    results: list[dict] = []
    order = list(variants)
    for r in range(args.rounds):
        for variant in order if r % 2 == 0 else order[::-1]:
            methods = ["mpt-udp", "mpt-tcp"] + (["mptcp"] if variant == "after" else [])
            run(variant, *variants[variant], results, args.duration, methods)
    print(
        f"\n{'variant':10} {'method':8} {'Mbit/s median (range)':>22} {'% of 1200':>9} {'retransmits':>11} {'daemons % CPU':>13} {'idle %':>6}"
    )
    for variant in order:
        for method in ("mpt-udp", "mpt-tcp", "mptcp"):
            rows = [r for r in results if r["variant"] == variant and r["method"] == method]
            if not rows:
                continue
            mbps = [r["mbps"] for r in rows]
            print(
                f"{variant:10} {method:8} {statistics.median(mbps):8.0f} ({min(mbps):.0f}-{max(mbps):.0f}){'':4} "
                f"{statistics.median(r['capacity_pct'] for r in rows):9.1f} {statistics.median(r['retransmits'] or 0 for r in rows):11.0f} "
                f"{statistics.median(r['cpu_daemons_pct'] or 0 for r in rows):13.1f} {statistics.median(r['cpu_idle_pct'] for r in rows):6.1f}"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()

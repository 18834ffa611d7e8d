#!/usr/bin/env python3
"""The MPT tunnel at line rate: its kernel datapath against its daemon's, against another checkout's daemon, and MPTCP, in one run.

Seed 001's testbed (nestlab.bench.suites.multipath, containerised) over N x 100 Mbit/s paths (--paths, default
12 and 32) is deployed once per variant: "bpf" (this checkout, tc programs carry the packets), "user" (this
checkout's daemon reads every packet) and, with --before REF, "before" (REF's daemon).  The variants take turns
(A B C, then C B A, ...), so all see the same machine.  Each runs UDP offered at N x 100 Mbit/s with iperf3's
default socket buffers (as a user runs it) and one TCP connection through the tunnel; "bpf" also MPTCP on the
same paths.  Beside each result: the machine's idle share and its CPU per Gbit/s (every core, kernel work
included: a kernel datapath's work is softirq, a daemon's is its own).  A further variant, "plain", sends the
same UDP over one plain link at the paths' packet rate, no tunnel: what iperf3 gets on this machine at all,
and what its two ends cost, so "over plain" is the tunnel's own CPU per Gbit/s of UDP.

Usage (root):  python benchmarks/mpt_line_rate.py [--before REF] [--paths 12,32] [--rounds 3] [--duration 10] [--json FILE]
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

from benchmarks import _smoke  # noqa: E402
from nestlab.backends.services import mpt_daemon  # noqa: E402
from nestlab.bench import tools  # noqa: E402
from nestlab.bench.suites import multipath  # noqa: E402
from nestlab.lab.lab import Lab  # noqa: E402

KEYS = ("mbps", "capacity_pct", "retransmits", "lost_pct", "cpu_idle_pct", "cpu_softirq_pct", "cpu_steal_pct")
KEYS += ("machine_cpu_pct_per_gbps", "cpu_daemons_pct", "datapath_used")


def build(ref: str, out: str) -> str:
    """nestlab-mpt built from commit ``ref``'s mpt/ folder (its kernel program too, if it has one)."""
    src = tempfile.mkdtemp(prefix="mpt-src-")
    tar = subprocess.run(["git", "-C", ROOT, "archive", ref, "mpt"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=tar, check=True)
    folder = os.path.join(src, "mpt")
    if os.path.exists(os.path.join(folder, "bpf", "mpt.c")):
        machine = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout.strip()
        subprocess.run(
            ["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{machine}", "-c", "bpf/mpt.c", "-o", "mpt.bpf.o"],
            cwd=folder,
            check=True,
        )
    subprocess.run(
        ["go", "build", "-trimpath", "-o", out, "."], cwd=folder, check=True, env={**os.environ, "GOFLAGS": "-mod=mod"}
    )
    return out


class Discard:
    """A recorder that keeps no raw output."""

    def raw(self, *_args) -> None:
        pass


def run(variant: str, binary: str, datapath: str, paths: int, results: list, duration: float, methods: list[str]) -> None:
    os.environ["NESTLAB_MPT"] = binary
    lab = multipath.testbed("containerised", paths, datapath)
    lab.deploy()
    try:
        for method in methods:
            cell = {"placement": "containerised", "paths": paths, "method": method, "datapath": datapath}
            summary = multipath.measure(lab, cell, duration, Discard())[-1]
            r = {key: summary.get(key) for key in KEYS}
            results.append({"variant": variant, "paths": paths, "method": method, **r})
            print(
                f"{variant:7} {paths:3} paths {method:8} {r['mbps']:6.0f} Mbit/s {r['capacity_pct']:5.1f} %  "
                f"retransmits {r['retransmits'] or 0:5}  idle {r['cpu_idle_pct']:4.1f} %  softirq {r['cpu_softirq_pct']:4.1f} %  "
                f"steal {r['cpu_steal_pct']:4.1f} %  CPU/Gbit/s {r['machine_cpu_pct_per_gbps'] or 0:5.0f} %  ({r['datapath_used'] or '-'})",
                flush=True,
            )
    finally:
        lab.destroy()


def plain(paths: int, results: list, duration: float) -> None:
    """No tunnel: one link carrying the same 1 440-byte datagrams at the paths' packet rate (N x 100 Mbit/s of
    1 514-byte frames is N x 100 x 1 482/1 514 Mbit/s of 1 482-byte ones, so its ceiling is the tunnel's), the
    ends on the testbed's cores: what iperf3 with default socket buffers gets on this machine at all."""
    lab = Lab(f"bench-mp-plain-{paths}", ipv4_pool="10.81.0.0/16")
    for name, own in zip("ab", multipath.cores()):
        lab.add_node(name, **own)
    lab.add_link("a:eth1", "b:eth1", params={"rate": f"{paths * multipath.RATE_MBIT * 1000 * 1482 // 1514}kbit"})
    lab.deploy()
    try:
        before = tools.machine_cpu_seconds()
        result = tools.iperf3(
            lab.nodes["a"],
            lab.nodes["b"],
            lab.nodes["b"].intf("eth1").ip,
            duration,
            multipath.PORT,
            omit=1,
            udp=True,
            bitrate=f"{paths * multipath.RATE_MBIT}M",
            length=multipath.UDP_LENGTH,
        )
        spent = {kind: seconds - before[kind] for kind, seconds in tools.machine_cpu_seconds().items()}
        r = {"mbps": result["mbps"], "capacity_pct": result["mbps"] / paths, "lost_pct": result["lost_pct"]}
        r |= multipath.machine_cpu(spent, result["mbps"])
        results.append({"variant": "plain", "paths": paths, "method": "mpt-udp", **{key: r.get(key) for key in KEYS}})
        print(
            f"plain   {paths:3} paths udp      {r['mbps']:6.0f} Mbit/s {r['capacity_pct']:5.1f} %  lost {r['lost_pct']:4.2f} %  "
            f"idle {r['cpu_idle_pct']:4.1f} %  CPU/Gbit/s {r['machine_cpu_pct_per_gbps'] or 0:5.0f} %",
            flush=True,
        )
    finally:
        lab.destroy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="commit whose daemon is a further baseline")
    ap.add_argument("--paths", default="12,32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--json")
    args = _smoke.parse(ap, paths="2", rounds=1, duration=1.0)
    tools.require("iperf3")
    variants = {"bpf": (mpt_daemon.binary(), "bpf"), "user": (mpt_daemon.binary(), "user")}
    if args.before:
        variants["before"] = (build(args.before, os.path.join(tempfile.mkdtemp(prefix="mpt-before-"), "nestlab-mpt")), "auto")
    results: list[dict] = []
    order = [*variants, "plain"]
    for r in range(args.rounds):
        for paths in (int(p) for p in args.paths.split(",")):
            for variant in order if r % 2 == 0 else order[::-1]:
                if variant == "plain":
                    plain(paths, results, args.duration)
                    continue
                methods = ["mpt-udp", "mpt-tcp"] + (["mptcp"] if variant == "bpf" else [])
                run(variant, *variants[variant], paths, results, args.duration, methods)
    print(
        "\n| variant | paths | method | Mbit/s, median (range) | % of N x 100 | retransmits | idle % | CPU % per Gbit/s |", end=""
    )
    print(" over plain |\n|---|---|---|---|---|---|---|---|---|")

    def cpu_of(rows: list[dict]) -> float:
        return statistics.median(r["machine_cpu_pct_per_gbps"] or 0 for r in rows)

    for paths in (int(p) for p in args.paths.split(",")):
        floor = [r for r in results if r["variant"] == "plain" and r["paths"] == paths]  # what the two iperf3 ends cost
        for variant in order:
            for method in ("mpt-udp", "mpt-tcp", "mptcp"):
                rows = [r for r in results if r["variant"] == variant and r["method"] == method and r["paths"] == paths]
                if not rows:
                    continue
                mbps = [r["mbps"] for r in rows]
                cpu = cpu_of(rows)
                over = f"{cpu - cpu_of(floor):.0f}" if floor and method == "mpt-udp" and variant != "plain" else ""
                print(
                    f"| {variant} | {paths} | {method} | {statistics.median(mbps):.0f} ({min(mbps):.0f}-{max(mbps):.0f}) | "
                    f"{statistics.median(r['capacity_pct'] for r in rows):.1f} | {statistics.median(r['retransmits'] or 0 for r in rows):.0f} | "
                    f"{statistics.median(r['cpu_idle_pct'] for r in rows):.1f} | {cpu:.0f} | {over} |"
                )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()

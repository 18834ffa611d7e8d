#!/usr/bin/env python3
"""Goodput against distance on a wireless medium, by rate control (ideal: by mean signal; minstrel) and fading
(none; rayleigh), through real stations in one run (docs/wireless.md, "Rate control" and "Fast fading").

One lab, one 802.11g medium per combination, each with a sender at the origin and a receiver; for each distance
the receivers move there (``node move``) and each sender in turn floods its receiver with UDP (iperf3, 1400-byte
datagrams, more than the air carries) for a few seconds: Mbit/s that arrive.  Beside them, the same channel
simulated alone (the medium's own channel code, no kernel) for as long, as the model's figure.

Usage (root):  python benchmarks/wireless_rates.py [--distances 10,40,70,100,130] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402

COMBINATIONS = {"ideal": ("ideal", "none"), "minstrel": ("minstrel", "none"),
                "ideal-rayleigh": ("ideal", "rayleigh"), "minstrel-rayleigh": ("minstrel", "rayleigh")}  # fmt: skip


def topology(combos: list[str]) -> str:
    lines = ["name: wlrates", "topology:", "  nodes:"]
    links = []
    for k, combo in enumerate(combos):
        control, fading = COMBINATIONS[combo]
        lines.append(f"    air{k}: {{kind: wireless, rate_control: {control}, fading: {fading}}}")
        lines += [f"    s{k}: {{position: [0, {k * 5000}]}}", f"    r{k}: {{position: [10, {k * 5000}]}}"]
        links += [
            f'    - {{endpoints: ["s{k}:wlan0", "air{k}:s{k}"], ipv4: ["10.90.{k}.1/24", null]}}',
            f'    - {{endpoints: ["r{k}:wlan0", "air{k}:r{k}"], ipv4: ["10.90.{k}.2/24", null]}}',
        ]
    return "\n".join([*lines, "  links:", *links]) + "\n"


def udp_mbits(lab, k: int, seconds: float) -> float:
    """Mbit/s of UDP that r<k> receives while s<k> floods it for ``seconds``."""
    server = lab.nodes[f"r{k}"].popen(["iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        args = ["iperf3", "-c", f"10.90.{k}.2", "-p", "5301", "-u", "-b", "40M", "-l", "1400", "-t", str(seconds), "--json"]
        client = lab.nodes[f"s{k}"].popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = client.communicate(timeout=seconds + 30)
        end = json.loads(out)["end"]["sum"]
        return float(end["bits_per_second"]) * (1 - float(end["lost_percent"]) / 100) / 1e6
    finally:
        server.kill()
        server.wait()


def simulated(control: str, fading: str, far: float, seconds: float) -> float:
    """The same channel alone: one saturated sender of 1442-byte frames (1400 of UDP), Mbit/s of UDP delivered."""
    import numpy as np

    from nestlab.backends.services.channel import Channel
    from nestlab.model import radio
    from nestlab.model.wireless import Fading, Propagation

    pos = np.array([[0, 0, 0], [far, 0, 0]], dtype=float)
    ch = Channel(radio.PHYS["802.11g"], Propagation(), 2.412e9, -91.0, pos, np.full(2, 20.0), np.zeros(2), seed=1,
                 rate_control=control, fading=Fading(model=fading))  # fmt: skip
    got, now = 0, 0
    while now < seconds * 1e9:
        while ch.queued(0) < 20:
            ch.arrive(0, bytes(1442), 1, now)
        got += sum(1400 for j, _ in ch.run(now) if j == 1)
        now += 500_000
    return 8 * got / seconds / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distances", default="10,40,70,100,130", help="metres between sender and receiver")
    parser.add_argument("--combos", default=",".join(COMBINATIONS), help="rate control and fading combinations")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of traffic at each distance")
    args = _smoke.parse(parser, distances="40", combos="ideal,minstrel-rayleigh", seconds=1.0)
    if os.geteuid() != 0:
        _smoke.skip("needs root (namespaces)")
    from nestlab import Lab
    from nestlab.lab import wireless

    combos, distances = args.combos.split(","), [float(d) for d in args.distances.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "wlrates.yml")
        with open(path, "w") as fh:
            fh.write(topology(combos))
        lab = Lab.from_file(path)
        rows = []
        with lab.deployed():
            for far in distances:
                wireless.move(lab, {f"r{k}": [far, k * 5000] for k in range(len(combos))})
                row = []
                for k, combo in enumerate(combos):
                    row.append((udp_mbits(lab, k, args.seconds), simulated(*COMBINATIONS[combo], far, args.seconds)))
                rows.append((far, row))
    print(f"UDP goodput, Mbit/s, through the medium (the channel alone in brackets), {args.seconds:g} s each:\n")
    print("| distance | " + " | ".join(combos) + " |")
    print("|---|" + "---|" * len(combos))
    for far, row in rows:
        print(f"| {far:g} m | " + " | ".join(f"{real:.1f} ({model:.1f})" for real, model in row) + " |")


if __name__ == "__main__":
    main()

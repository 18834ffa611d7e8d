#!/usr/bin/env python3
"""A thousand mobile stations on one wireless medium: deploy time, and the medium's CPU while every station
moves at 10 Hz, against the same stations as point-to-point visibility links (``dynamics:``), in one run.

For each size N: N stations placed at random in a square sized so that each hears about 10 others (802.11g,
log-distance exponent 3), on one ``kind: wireless`` medium.  Timed from the shell as a user waits:
``nestlab deploy`` and ``nestlab destroy``.  While it runs: the medium process's CPU idle, then while every
station moves (a random walk, all N positions sent every 0.1 s through the medium's control socket, as
``nestlab run`` plays ``mobility:``), with each update's round trip; then its packet ceiling: UDP floods
between eight pairs of stations placed out of each other's range (each pair its own channel), as frames
delivered per second with the medium's CPU.  Baseline in the same run: the same stations as a visibility
graph (``dynamics:``), one veth pair per pair of stations, at the sizes where that is feasible.

Usage (root):  python benchmarks/wireless_scale.py [--sizes 100,1000] [--p2p-sizes 50,100,200] [--seconds 10]
               [--as-user UID --nestlab /path/to/that/users/venv/bin/nestlab]   (rootless: deploy as UID)
Internal:      python benchmarks/wireless_scale.py --drive LAB N SECONDS   (prints the updates' timings as JSON)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402

AREA_PER_NEIGHBOURS = math.pi * 150**2 / 10  # m² per station for ~10 in range (edge ~150 m at 20 dBm)
HZ = 10


def medium_topology(name: str, n: int, seed: int = 1) -> str:
    side = math.sqrt(n * AREA_PER_NEIGHBOURS)
    rng = random.Random(seed)
    lines = [f"name: {name}", "topology:", "  nodes:", "    air: {kind: wireless, standard: 802.11g}"]
    lines += [f"    s{i}: {{position: [{rng.uniform(0, side):.1f}, {rng.uniform(0, side):.1f}]}}" for i in range(n)]
    lines.append("  links:")
    lines += [
        f'    - {{endpoints: ["s{i}:wlan0", "air:s{i}"], ipv4: ["10.80.{i // 250}.{i % 250 + 1}/16", null]}}' for i in range(n)
    ]
    return "\n".join(lines) + "\n"


def p2p_topology(name: str, n: int, folder: str, seed: int = 1) -> str:
    """The same stations, as a visibility graph at their positions (range 150 m): a veth per pair of stations."""
    side = math.sqrt(n * AREA_PER_NEIGHBOURS)
    rng = random.Random(seed)
    positions = {f"s{i}": [round(rng.uniform(0, side), 1), round(rng.uniform(0, side), 1)] for i in range(n)}
    graph = os.path.join(folder, f"{name}-graph.json")
    with open(graph, "w") as fh:
        json.dump({"range": 150, "steps": [{"t": "0s", "positions": positions}]}, fh)
    nodes = "".join(f"    s{i}: {{}}\n" for i in range(n))
    return f"name: {name}\nipv4_pool: 10.0.0.0/8\ntopology:\n  nodes:\n{nodes}dynamics: {{type: visibility, graph: {graph}}}\n"


def timed(cmd: list[str]) -> float:
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    took = time.monotonic() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
    return took


def medium_pid(lab: str) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    args = fh.read().split(b"\0")
            except OSError:
                continue
            if b"nestlab.backends.services.medium" in args and any(f"/{lab}/wireless/".encode() in a for a in args):
                return int(entry)
    raise SystemExit(f"no medium process of lab {lab}")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_share(pid: int, seconds: float, during=None) -> tuple[float, object]:
    """The process's CPU (1.0 = one core) over ``seconds`` (or while ``during()`` runs), and what it returned."""
    before, start = cpu_seconds(pid), time.monotonic()
    result = during() if during else time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start), result


def drive(lab: str, n: int, seconds: float) -> dict:
    """Move all N stations at 10 Hz (a random walk) through the control socket; each update's round trip."""
    if os.geteuid() != 0:  # an ordinary user's lab: its folder is seen from the user's namespaces (docs/rootless.md)
        from nestlab.rootless import session

        session.enter()  # while this process has one thread: numpy's BLAS starts more
    import numpy as np

    from nestlab.backends.services import medium

    state = medium.ask(lab, "air", {"op": "state"})
    pos = np.array([state["stations"][f"s{i}"]["position"] for i in range(n)])
    rng = np.random.default_rng(1)
    trips, late = [], []
    start = time.monotonic()
    for k in range(int(seconds * HZ)):
        due = start + k / HZ
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        late.append(max(0.0, time.monotonic() - due) * 1000)
        pos[:, :2] += rng.normal(0, 0.5, (n, 2))  # ~5 m/s
        began = time.monotonic()
        medium.ask(lab, "air", {"op": "move", "positions": {f"s{i}": pos[i].tolist() for i in range(n)}})
        trips.append((time.monotonic() - began) * 1000)
    return {"updates": len(trips), "round_trip_ms_median": statistics.median(trips), "round_trip_ms_max": max(trips),
            "late_ms_median": statistics.median(late)}  # fmt: skip


def flood(lab: str, seconds: float) -> dict:
    """Eight pairs 10 m apart, 3 km from each other and everyone else; UDP floods within each pair.  A ninth pair,
    as far from all, pings every 10 ms meanwhile: its round trips less the air's time are the delivery lateness
    the loaded medium adds (two frames and two ACKs, about 0.25 ms of air at 54 Mbit/s)."""
    from nestlab import Lab
    from nestlab.backends.services import medium
    from nestlab.lab import wireless

    running = Lab.running(lab)
    pairs = [(f"s{2 * k}", f"s{2 * k + 1}") for k in range(8)]
    probe = ("s16", "s17")
    wireless.move(
        running,
        {n: [-3000.0 * (k + 1), -3000.0 + 10 * j, 0.0] for k, pair in enumerate([*pairs, probe]) for j, n in enumerate(pair)},
    )
    address = {f"s{i}": f"10.80.0.{i + 1}" for i in range(18)}
    servers = [
        running.nodes[b].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _, b in pairs
    ]
    time.sleep(0.5)
    before = medium.ask(lab, "air", {"op": "state"})["counts"]
    pid = medium_pid(lab)

    ping = ["ping", "-n", "-i", "0.01", "-w", "2", address[probe[1]]]
    idle = _rtts(running.nodes[probe[0]].popen(ping, stdout=subprocess.PIPE, text=True).communicate()[0])
    pinger = running.nodes[probe[0]].popen(
        ["ping", "-n", "-i", "0.01", "-w", str(max(1, round(seconds))), address[probe[1]]], stdout=subprocess.PIPE, text=True
    )

    def run() -> None:
        clients = [running.nodes[a].popen(["iperf3", "-u", "-b", "50M", "-l", "200", "-t", str(seconds), "-c", address[b]],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a, b in pairs]  # fmt: skip
        for c in clients:
            c.wait()

    started = time.monotonic()
    cpu, _ = cpu_share(pid, seconds, run)
    took = time.monotonic() - started
    after = medium.ask(lab, "air", {"op": "state"})["counts"]
    for s in servers:
        s.kill()
    loaded = _rtts(pinger.communicate()[0])
    return {"ping_ms_idle_p50": idle[len(idle) // 2], "ping_ms_idle_p99": idle[int(len(idle) * 0.99)],
            "ping_ms_p50": loaded[len(loaded) // 2], "ping_ms_p99": loaded[int(len(loaded) * 0.99)],
            "frames_per_s_offered": (after["frames"] - before["frames"]) / took,
            "frames_per_s_delivered": (after["delivered"] - before["delivered"]) / took,
            "dropped_per_s": (after["dropped"] - before["dropped"]) / took, "medium_cpu": cpu}  # fmt: skip


def _rtts(ping_output: str) -> list[float]:
    return sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", ping_output))


def measure_medium(n: int, seconds: float, folder: str, nestlab: list[str], user: list[str]) -> dict:
    lab = f"wlscale{n}"
    path = os.path.join(folder, f"{lab}.yml")
    with open(path, "w") as fh:
        fh.write(medium_topology(lab, n))
    os.chmod(folder, 0o755)
    os.chmod(path, 0o644)
    row: dict = {"stations": n, "mode": "rootless" if user else "root"}
    row["deploy_s"] = timed([*user, *nestlab, "deploy", "-t", path])
    try:
        pid = medium_pid(lab)
        row["medium_cpu_idle"], _ = cpu_share(pid, 3)
        driver = [*user, sys.executable if not user else os.path.join(os.path.dirname(nestlab[0]), "python"),
                  os.path.abspath(__file__), "--drive", lab, str(n), str(seconds)]  # fmt: skip
        cpu, done = cpu_share(pid, seconds, lambda: subprocess.run(driver, capture_output=True, text=True))
        assert isinstance(done, subprocess.CompletedProcess)
        row["medium_cpu_10hz"] = cpu
        row |= json.loads(done.stdout) if done.returncode == 0 else {"drive_error": done.stderr[-1500:]}
        if not user:
            row |= flood(lab, seconds)
    finally:
        row["destroy_s"] = timed([*user, *nestlab, "destroy", "--lab", lab])
    return row


def measure_p2p(n: int, folder: str, nestlab: list[str]) -> dict:
    lab = f"wlp2p{n}"
    path = os.path.join(folder, f"{lab}.yml")
    with open(path, "w") as fh:
        fh.write(p2p_topology(lab, n, folder))
    row: dict = {"stations": n, "mode": "root, point-to-point", "links": n * (n - 1) // 2}
    row["deploy_s"] = timed([*nestlab, "deploy", "-t", path])
    row["destroy_s"] = timed([*nestlab, "destroy", "--lab", lab])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--p2p-sizes", default="50,100,200")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--as-user", type=int, help="also deploy the medium labs as this ordinary user (rootless)")
    parser.add_argument("--nestlab", help="that user's nestlab (a venv they can read)")
    parser.add_argument("--home", help="that user's home folder (writable by them)")
    parser.add_argument("--drive", nargs=3, metavar=("LAB", "N", "SECONDS"))
    parser.add_argument("--out", default="wireless_scale.json")
    args = _smoke.parse(parser, sizes="18", p2p_sizes="4", seconds=1.0)  # the flood: eight pairs and a probe pair
    if args.drive:
        print(json.dumps(drive(args.drive[0], int(args.drive[1]), float(args.drive[2]))))
        return
    root_nestlab = [os.path.join(os.path.dirname(sys.executable), "nestlab")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="wlscale-") as folder:
        for n in [int(s) for s in args.sizes.split(",") if s]:
            rows.append(measure_medium(n, args.seconds, folder, root_nestlab, []))
            print(json.dumps(rows[-1]), flush=True)
            if args.as_user is not None:
                user = ["setpriv", f"--reuid={args.as_user}", f"--regid={args.as_user}", "--clear-groups",
                        "env", f"HOME={args.home or folder}"]  # fmt: skip
                rows.append(measure_medium(n, args.seconds, folder, [args.nestlab], user))
                print(json.dumps(rows[-1]), flush=True)
        for n in [int(s) for s in args.p2p_sizes.split(",") if s]:
            rows.append(measure_p2p(n, folder, root_nestlab))
            print(json.dumps(rows[-1]), flush=True)
    with open(args.out, "w") as fh:
        json.dump(rows, fh, indent=1)
    table(rows)
    if failed := [row["drive_error"] for row in rows if "drive_error" in row]:
        sys.exit(f"moving the stations failed: {failed}")


def table(rows: list[dict]) -> None:
    """The rows as one table (a cell a row lacks: -)."""
    keys = list(dict.fromkeys(key for row in rows for key in row if key != "drive_error"))
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        cells = (row.get(key, "-") for key in keys)
        print("| " + " | ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()

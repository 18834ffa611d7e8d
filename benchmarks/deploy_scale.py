#!/usr/bin/env python3
"""Deploy/destroy time and memory per node, nestlab vs the kernel floor vs Mininet, in one run.

Topologies: a star of N hosts on one bridge (N = 10, 100, 500) and a 12 x 5
"cluster" (each cluster: 5 hosts on an inner bridge; cluster bridges joined to a
main bridge).  Baselines, measured in the same run:

* kernel floor: the same namespaces, veths, bridge ports, addresses and link-ups
  issued by ``ip -batch`` files, one process per batch (the address/up work is
  issued inside one namespace holding N interfaces, as ``ip -batch`` cannot
  switch namespaces per line);
* Mininet (``mn --switch lxbr --controller none --topo single,N --test none``),
  run inside a namespace of its own because its cleanup is machine-wide.

With ``--shell``, the star is instead deployed, inspected and destroyed with the ``nestlab``
CLI, each call timed from the shell (interpreter, imports, parsing, the work, the output) as a
user waits for it, beside the kernel floor in the same run, with the deploying process's peak
memory.

Usage (root):  python benchmarks/deploy_scale.py [--sizes 10,100,500] [--reps 3] [--no-mininet]
               python benchmarks/deploy_scale.py --shell [--sizes 100,500,2000,10000] [--reps 1]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import _smoke  # noqa: E402
from nestlab import Lab  # noqa: E402


def meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as fh:
        return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in fh)}


def settle(nodes: int) -> None:
    """Give the kernel time to free the previous run's namespaces (it does so asynchronously,
    and a teardown still in progress would slow the next run down)."""
    time.sleep(1.0 + nodes / 200)


def star_lab(n: int) -> Lab:
    lab = Lab(f"bench-star{n}", ipv4_pool="10.64.0.0/10")
    lab.add_node("sw", kind="bridge")
    for i in range(n):
        lab.add_node(f"h{i}")
        lab.add_link(f"h{i}:eth1", f"sw:p{i}")
    return lab


def cluster_lab(clusters: int = 12, hosts: int = 5) -> Lab:
    lab = Lab("bench-cluster", ipv4_pool="10.64.0.0/10")
    lab.add_node("main", kind="bridge")
    for c in range(clusters):
        lab.add_node(f"c{c}", kind="bridge")
        lab.add_link(f"c{c}:up", f"main:c{c}")
        for h in range(hosts):
            lab.add_node(f"c{c}h{h}")
            lab.add_link(f"c{c}h{h}:eth1", f"c{c}:p{h}")
    return lab


def time_nestlab(make, reps: int) -> dict:
    deploys, destroys, mem, slab = [], [], [], []
    for _ in range(reps):
        lab = make()
        lab.plan  # check and address the topology before the clock starts
        before = meminfo()
        t0 = time.perf_counter()
        lab.deploy()
        t1 = time.perf_counter()
        after = meminfo()
        lab.destroy()
        t2 = time.perf_counter()
        deploys.append(t1 - t0)
        destroys.append(t2 - t1)
        nodes = len(lab.nodes)
        settle(nodes)
        mem.append((before["MemAvailable"] - after["MemAvailable"]) / nodes)
        slab.append((after["Slab"] - before["Slab"]) / nodes)
    return {
        "deploy": statistics.median(deploys),
        "destroy": statistics.median(destroys),
        "kb_per_node": statistics.median(mem),
        "slab_kb_per_node": statistics.median(slab),
    }


def _batch(lines: list[str], netns: str | None = None) -> None:
    """``ip -batch``, 1 000 lines per process (``ip`` keeps an fd per ``netns NAME`` it resolves)."""
    for start in range(0, len(lines), 1000):
        with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as fh:
            fh.write("\n".join(lines[start : start + 1000]) + "\n")
        try:
            cmd = ["ip", *(["-n", netns] if netns else []), "-batch", fh.name]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        finally:
            os.unlink(fh.name)


def time_floor(n: int, reps: int) -> dict:
    """The same kernel objects from ``ip -batch``, set up as nestlab sets them up: no IPv6 on the switches'
    ports, no link-local addresses on the hosts' interfaces (a quiet lab, model/ipv6.py)."""
    deploys, destroys = [], []
    leaves = _leaves(n)
    for _ in range(reps):
        hosts = [f"floor-h{i}" for i in range(n)]
        t0 = time.perf_counter()
        try:
            _batch([f"netns add {h}" for h in hosts] + ["netns add floor-sw", "netns add floor-all"])
            for ns, key in (("floor-sw", "disable_ipv6"), ("floor-all", "addr_gen_mode")):
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.default.{key}=1"], check=True)
            _batch([f"link add e{i} netns floor-all type veth peer name p{i} netns floor-sw" for i in range(n)])
            bridges = ["link add br0 type bridge", "link set br0 up"]
            if leaves > 1:  # one bridge per 1 000 ports, each joined to br0 by a veth
                for k in range(leaves):
                    bridges += [
                        f"link add br{k + 1} type bridge",
                        f"link set br{k + 1} up",
                        f"link add u{k} type veth peer name c{k}",
                        f"link set u{k} master br{k + 1} up",
                        f"link set c{k} master br0 up",
                    ]
            _batch(bridges + [f"link set p{i} master br{i // _PORTS + 1 if leaves > 1 else 0} up" for i in range(n)], "floor-sw")
            _batch(
                ["link set lo up"]
                + [f"addr add 10.{64 + i // 65536}.{i // 256 % 256}.{i % 256}/10 dev e{i}" for i in range(n)]
                + [f"link set e{i} up" for i in range(n)],
                "floor-all",
            )
            t1 = time.perf_counter()
        finally:  # whatever happened, nothing of the floor's stays
            done = time.perf_counter()
            _batch([f"netns del {h}" for h in hosts + ["floor-sw", "floor-all"] if os.path.exists(f"/run/netns/{h}")])
        t2 = time.perf_counter()
        deploys.append(t1 - t0)
        destroys.append(t2 - done)
        settle(n)
    return {"deploy": statistics.median(deploys), "destroy": statistics.median(destroys)}


_PORTS = 1000  # a Linux bridge takes at most 1 024 ports


def _leaves(n: int) -> int:
    """How many leaf bridges a star of ``n`` needs (1: one bridge, no leaves)."""
    return 1 if n <= _PORTS else -(-n // _PORTS)


def star_text(n: int) -> str:
    """A star of ``n`` hosts on one bridge; above 1 000, on leaf bridges of 1 000 ports joined to a core."""
    leaves = _leaves(n)
    if leaves == 1:
        switch = ["    sw: {kind: bridge}\n"]
        links = [f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n)]
    else:
        switch = ["    sw: {kind: bridge}\n"] + [f"    sw{k}: {{kind: bridge}}\n" for k in range(leaves)]
        links = [f'    - endpoints: ["sw{k}:up", "sw:p{k}"]\n' for k in range(leaves)]
        links += [f'    - endpoints: ["h{i}:eth1", "sw{i // _PORTS}:p{i % _PORTS}"]\n' for i in range(n)]
    nodes = "".join(switch) + "".join(f"    h{i}: {{}}\n" for i in range(n))
    return f"name: shell-star{n}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n{nodes}  links:\n{''.join(links)}"


def _timed(*args: str) -> tuple[float, int]:
    """Seconds and peak KiB of one CLI call, timed from the shell."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nestlab.cli.app", *args],
        stdout=subprocess.DEVNULL,
        cwd=os.path.join(os.path.dirname(__file__), ".."),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"nestlab {' '.join(args)} failed")
    return time.perf_counter() - t0, usage.ru_maxrss


def _first_ping(lab: str, n: int) -> float:
    """Whether the first host's first ping to the last host, right after the deploy, is answered (1.0) or not (0.0)."""
    cli = [sys.executable, "-m", "nestlab.cli.app", "exec", "--lab", lab]
    where = os.path.join(os.path.dirname(__file__), "..")
    shown = subprocess.run(
        [*cli, f"h{n - 1}", "--", "ip", "-4", "-o", "addr", "show", "eth1"], capture_output=True, text=True, cwd=where
    ).stdout
    address = shown.split("inet ")[1].split("/")[0]
    return float(
        subprocess.run([*cli, "h0", "--", "ping", "-c1", "-W2", address], capture_output=True, cwd=where).returncode == 0
    )


def time_shell(n: int, reps: int) -> dict:
    """The CLI from the shell: deploy, inspect (JSON), destroy of a star of ``n``, and the memory per node."""
    found: dict[str, list] = {"deploy": [], "inspect": [], "destroy": [], "peak_kb": [], "kb_per_node": [], "first_ping": []}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as fh:
        fh.write(star_text(n))
    try:
        for _ in range(reps):
            before = meminfo()["MemAvailable"]
            took, peak = _timed("deploy", "-t", fh.name)
            found["kb_per_node"].append((before - meminfo()["MemAvailable"]) / (n + 1))
            found["deploy"].append(took)
            found["peak_kb"].append(peak)
            found["inspect"].append(_timed("inspect", "--lab", f"shell-star{n}", "--format", "json")[0])
            found["first_ping"].append(_first_ping(f"shell-star{n}", n))
            found["destroy"].append(_timed("destroy", "--lab", f"shell-star{n}")[0])
            settle(n)
    finally:
        os.unlink(fh.name)
    return {k: statistics.median(v) for k, v in found.items()}


def shell_table(sizes: list[int], reps: int) -> None:
    # Bytecode as an installed package has it (pip compiles it; a source tree with PYTHONDONTWRITEBYTECODE
    # set would compile every changed module again on each call).
    compileall.compile_dir(os.path.join(os.path.dirname(__file__), "..", "nestlab"), quiet=1)
    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs, median of {reps}; CLI calls timed from the shell\n")
    print(
        "| star | deploy (shell) | kernel floor | deploy / floor | inspect --format json | first ping answered | destroy | deploying process peak | memory per node |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        ours = time_shell(n, reps)
        floor = time_floor(n, reps)
        print(
            f"| {n} | {ours['deploy']:.2f} s | {floor['deploy']:.2f} s | {ours['deploy'] / floor['deploy']:.2f} | {ours['inspect']:.2f} s | "
            f"{ours['first_ping']:.0%} | {ours['destroy']:.2f} s | {ours['peak_kb'] / 1024:.0f} MiB | {ours['kb_per_node']:.0f} KiB |",
            flush=True,
        )


def time_mininet(n: int) -> dict | None:
    if not shutil.which("mn"):
        return None
    subprocess.run(["ip", "netns", "add", "bench-mininet"], check=True)
    try:
        t0 = time.perf_counter()
        out = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                "bench-mininet",
                "mn",
                "--switch",
                "lxbr",
                "--controller",
                "none",
                "--topo",
                f"single,{n}",
                "--test",
                "none",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        total = time.perf_counter() - t0
    finally:
        subprocess.run(["ip", "netns", "del", "bench-mininet"], check=False)
    reported = re.search(r"completed in ([\d.]+) seconds", out.stdout + out.stderr)
    return {"total": total, "reported": float(reported.group(1)) if reported else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,500")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-mininet", action="store_true")
    parser.add_argument("--shell", action="store_true", help="time the nestlab CLI from the shell instead (see above)")
    args = _smoke.parse(parser, sizes="10", reps=1, no_mininet=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.shell or args.smoke:  # --smoke runs both tables
        shell_table(sizes, args.reps)
        if args.shell:
            return
    rows = []
    for n in sizes:
        ours = time_nestlab(lambda n=n: star_lab(n), args.reps)
        floor = time_floor(n, args.reps)
        mn = None if args.no_mininet or n > 100 else time_mininet(n)
        rows.append((f"star {n}", n + 1, ours, floor, mn))
    rows.append(("cluster 12x5", 12 * 6 + 1, time_nestlab(cluster_lab, args.reps), None, None))

    print(f"\nkernel {os.uname().release}, {os.cpu_count()} CPUs, median of {args.reps} runs, in-process (Python API)\n")
    print(
        "| topology | nodes | deploy | destroy | `ip -batch` floor | x floor | Mininet build+stop | Mininet / nestlab |", end=""
    )
    print(" KiB per node (MemAvailable) | slab KiB per node |\n|---|---|---|---|---|---|---|---|---|---|")
    for name, nodes, ours, floor, mn in rows:
        cells = [name, str(nodes), f"{ours['deploy']:.3f} s", f"{ours['destroy']:.3f} s"]
        cells += [f"{floor['deploy']:.3f} s", f"{ours['deploy'] / floor['deploy']:.2f}"] if floor else ["-", "-"]
        cells += [f"{mn['total']:.2f} s", f"{mn['total'] / (ours['deploy'] + ours['destroy']):.0f}x"] if mn else ["-", "-"]
        cells += [f"{ours['kb_per_node']:.0f}", f"{ours['slab_kb_per_node']:.0f}"]
        print("| " + " | ".join(cells) + " |")
    print("\nx floor = nestlab deploy / ip -batch deploy; Mininet / nestlab = its build+teardown / nestlab's deploy+destroy")


if __name__ == "__main__":
    main()

"""Parallel paths, MPTCP over them, and the nestlab-mpt tunnel: real traffic, counted where it went."""

from __future__ import annotations

import ipaddress
import json
import platform
import re
import socket
import struct
import subprocess
import threading
import time

import pytest
from conftest import assert_every_cell_judged, run_cli

from nestlab import names
from nestlab.backends.kernel import mptcp
from nestlab.backends.services import mpt_daemon
from nestlab.bench import tools
from nestlab.bench.suites import multipath
from nestlab.lab.lab import Lab
from nestlab.model.errors import TopologyError

BUNDLE = """
name: {name}
topology:
  nodes:
    a: {mptcp: {subflows: 8}}
    b: {mptcp: {subflows: 8}}
  links:
    - endpoints: [a, b]
      paths: 4
      params: {rate: 100mbit}
"""

TUNNEL = """
name: {name}
topology:
  nodes: {a: {}, b: {}}
  links:
    - endpoints: [a, b]
      paths: 2
      multipath: {type: mpt, weights: [WEIGHTS]}
"""


def test_bundle_makes_n_shaped_paths_each_on_its_own_subnet(lab_from):
    lab = lab_from(BUNDLE)
    for k in range(1, 5):
        link = lab.plan.links[f"a:p{k}=b:p{k}"]
        assert dict(link.shape_a)["rate"] == "100mbit"
        out = lab.nodes["a"].cmd(["ping", "-c", "1", "-W", "1", "-I", f"p{k}", link.b.ipv4[0].split("/")[0]])
        assert " 0% packet loss" in out
    networks = {ipaddress.ip_interface(lab.plan.links[f"a:p{k}=b:p{k}"].a.ipv4[0]).network for k in range(1, 5)}
    assert len(networks) == 4  # a subnet per path
    kernel = {e["address"] for e in mptcp.endpoints(names.netns_path(lab.name, "a"))}
    assert kernel == {lab.plan.links[f"a:p{k}=b:p{k}"].a.ipv4[0].split("/")[0] for k in range(1, 5)}


def test_twelve_paths_deploy_with_the_kernels_eight_mptcp_endpoints(lab_from):
    lab = lab_from(BUNDLE.replace("paths: 4", "paths: 12"))
    kernel = [e["address"] for e in mptcp.endpoints(names.netns_path(lab.name, "a"))]
    assert kernel == [lab.plan.links[f"a:p{k}=b:p{k}"].a.ipv4[0].split("/")[0] for k in range(1, 9)]
    far = lab.plan.links["a:p12=b:p12"].b.ipv4[0].split("/")[0]
    assert " 0% packet loss" in lab.nodes["a"].cmd(["ping", "-c", "1", "-W", "1", "-I", "p12", far])


@pytest.mark.throughput
def test_bench_run_mptcp_runs_both_ends_under_mptcp(lab_from, lab_name):
    from conftest import run_cli

    lab_from(BUNDLE)
    result = run_cli(
        "bench",
        "run",
        "--lab",
        lab_name,
        "--from",
        "a",
        "--to",
        "b",
        "--tool",
        "iperf3",
        "--mptcp",
        "--duration",
        "3",
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["mbps"] > 1.5 * 100  # more than one 100 Mbit/s path: subflows joined the server


def test_bundle_errors_name_the_fix(topo_file):
    with pytest.raises(TopologyError, match="give the two node names"):
        Lab.from_file(topo_file(BUNDLE.replace("[a, b]", "[a:x, b:y]")))
    with pytest.raises(TopologyError, match="3 weights for 2 paths"):
        Lab.from_file(topo_file(TUNNEL.replace("WEIGHTS", "1, 1, 1")))


@pytest.mark.throughput
def test_mptcp_aggregates_four_shaped_paths_and_survives_a_path_going_down(lab_from):
    lab = lab_from(BUNDLE)
    a, b = lab.nodes["a"], lab.nodes["b"]
    server = lab.plan.links["a:p1=b:p1"].b.ipv4[0].split("/")[0]
    # This VM's host steals CPU time, and HTB needs timely dequeues: each MPTCP run is judged against
    # what plain TCP gets at that moment through one path reshaped to the paths' total, 400 Mbit/s.
    runs = []
    for _ in range(3):
        lab.link("a:p4", "b:p4").set(rate="400mbit")
        p4 = lab.plan.links["a:p4=b:p4"].b.ipv4[0].split("/")[0]
        reference = tools.iperf3(a, b, p4, seconds=3, omit=1)["mbps"]
        lab.link("a:p4", "b:p4").set(rate="100mbit")
        before = multipath.tx_bytes(lab, "a", 4)
        mbps = tools.iperf3(a, b, server, seconds=5, omit=1, mptcp=True)["mbps"]
        floor = 0.85 * 400 * min(1.0, reference / (0.95 * 400))  # 0.85 x 400 on a machine that keeps up
        runs.append((mbps / floor, mbps, reference, [v - w for v, w in zip(multipath.tx_bytes(lab, "a", 4), before)]))
        if mbps >= floor:
            break
    score, mbps, reference, sent = max(runs, key=lambda run: run[0])
    assert score >= 1 and mbps > 200, runs
    assert all(v > 0.1 * sum(sent) for v in sent), sent  # every path carried its share
    # A path goes down in the middle of a transfer: the connection goes on over the others.
    srv = b.popen(["mptcpize", "run", "iperf3", "-s", "-1", "-B", server], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        client = a.popen(
            tools.iperf3_command(server, 5201, 6, mptcp=True, interval=1),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(2.5)
        lab.link("a:p2", "b:p2").set(state="down")
        out, _ = client.communicate(timeout=60)
    finally:
        srv.kill()
        srv.wait()
    assert client.returncode == 0, out[-2000:]
    after = [mbps for start, _, mbps in tools.iperf3_intervals(out) if start >= 4]
    assert after and min(after) > 0.5 * 300, after  # three paths left, still carrying


def _tunnel(lab_from, weights: str, datapath: str = "auto") -> Lab:
    return lab_from(TUNNEL.replace("WEIGHTS", weights).replace("type: mpt,", f"type: mpt, datapath: {datapath},"))


@pytest.mark.throughput
def test_mpt_tunnel_carries_ping_tcp_udp_and_splits_packets_by_weight(lab_from):
    lab = _tunnel(lab_from, "3, 1")
    a, b = lab.nodes["a"], lab.nodes["b"]
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    assert " 0% packet loss" in a.cmd(["ping", "-c", "3", "-i", "0.05", far])
    start = [p["tx_packets"] for p in mpt_daemon.counters(lab.name, "a")["paths"]]
    udp = tools.iperf3(a, b, far, seconds=2, udp=True, bitrate="50M", length=1200, window="2M")
    assert udp["mbps"] > 40 and udp["lost_pct"] < 5, udp
    time.sleep(0.5)  # the daemon writes its counters every 200 ms
    sent = [p["tx_packets"] - s for p, s in zip(mpt_daemon.counters(lab.name, "a")["paths"], start)]
    assert sent[0] / sent[1] == pytest.approx(3, rel=0.05), sent
    tcp = tools.iperf3(a, b, far, seconds=2)
    assert tcp["mbps"] > 50, tcp


@pytest.mark.throughput
def test_mpt_tunnel_routes_around_a_dead_path_within_a_second(lab_from):
    lab = _tunnel(lab_from, "1, 1")
    a = lab.nodes["a"]
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    pinger = a.popen(
        ["ping", "-n", "-i", "0.02", "-c", "150", "-W", "0.2", far], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(1.0)
    lab.link("a:p1", "b:p1").set(state="down")
    out, _ = pinger.communicate(timeout=60)
    answered = sorted(int(s) for s in re.findall(r"icmp_seq=(\d+)", out))
    lost = sorted(set(range(1, 151)) - set(answered))
    assert lost, "taking a path down lost nothing: the test did not exercise failover"
    assert (lost[-1] - lost[0]) * 0.02 < 1.0, lost  # losses stop within a second
    assert answered[-1] == 150 and all(s in answered for s in range(lost[-1] + 1, 151))
    paths = mpt_daemon.counters(lab.name, "a")["paths"]
    assert [p["alive"] for p in paths] == [False, True]


# The kernel datapath attaches with tcx (Linux 6.6+): this machine kind's kernel has it; Debian 12's 6.1 (the VM
# tier) does not, and gets the daemon's datapath, which every other tunnel test here covers.  On 6.6+ the tests run
# and fail if the programs do not load.
TCX = pytest.mark.skipif(
    tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2]) < (6, 6),
    reason="the MPT kernel datapath needs tcx (Linux 6.6+)",
)

KERNEL_TUNNEL = """
name: {name}
topology:
  nodes: {a: {}, b: {}}
  links:
    - endpoints: [a, b]
      paths: 4
      params: {rate: 100mbit}
      multipath: {type: mpt, datapath: DATAPATH}
"""


@pytest.mark.throughput
@TCX
def test_kernel_datapath_carries_the_tunnel_without_the_daemon_and_counts_every_packet(lab_from):
    """datapath: bpf over 4 x 100 Mbit/s: UDP at iperf3's default socket buffers fills >= 90 % of the paths, TCP
    too; the daemons spend (almost) no CPU meanwhile, and their counters match what iperf3 sent within 1 %."""
    lab = lab_from(KERNEL_TUNNEL.replace("DATAPATH", "bpf"))
    a, b = lab.nodes["a"], lab.nodes["b"]
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    assert {mpt_daemon.counters(lab.name, n)["datapath"] for n in "ab"} == {"bpf"}
    assert " gso_max_size 16384 " in a.cmd(["ip", "-d", "link", "show", "mpt0"])  # ~1.3 ms of a 100 Mbit/s path per burst
    assert " 0% packet loss" in a.cmd(["ping", "-c", "3", "-i", "0.05", far])
    cpu = sum(tools.cpu_seconds(pid) or 0 for pid in mpt_daemon.pids(lab.name))
    time.sleep(4)  # what the daemons spend on keepalives, counters and the maps, idle
    idle = sum(tools.cpu_seconds(pid) or 0 for pid in mpt_daemon.pids(lab.name)) - cpu
    before = sum(p["tx_packets"] for p in mpt_daemon.counters(lab.name, "a")["paths"])
    cpu = sum(tools.cpu_seconds(pid) or 0 for pid in mpt_daemon.pids(lab.name))
    server = b.popen(["iperf3", "-s", "-1", "-B", far], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    out = a.cmd(["iperf3", "-c", far, "-u", "-b", "400M", "-l", "1400", "-t", "4", "-J"], timeout=60)
    server.wait(timeout=10)
    spent = sum(tools.cpu_seconds(pid) or 0 for pid in mpt_daemon.pids(lab.name)) - cpu
    end = json.loads(out)["end"]
    received = end["sum_received"]["bits_per_second"] / 1e6 if "sum_received" in end else end["sum"]["bits_per_second"] / 1e6
    assert received >= 0.9 * 4 * 100 * 1400 / 1474, end  # a 1474-byte frame carries 1400 bytes: 380 Mbit/s at most
    assert spent - idle < 0.1, (
        f"the daemons used {spent:.2f} s of CPU for 4 s of 370 Mbit/s ({idle:.2f} s idle): packets crossed into them"
    )
    time.sleep(0.5)  # the daemon writes its counters every 200 ms
    counted = sum(p["tx_packets"] for p in mpt_daemon.counters(lab.name, "a")["paths"]) - before
    sent = end["sum"]["packets"]
    assert sent <= counted <= sent * 1.01, (sent, counted)  # iperf3's control connection rides the tunnel too
    tcp = tools.iperf3(a, b, far, seconds=3)
    assert tcp["mbps"] > 0.85 * 4 * 93.5, tcp


@TCX
def test_one_end_in_the_kernel_the_other_in_its_daemon(lab_from):
    """datapath: [bpf, user]: the two datapaths speak one wire format, both ways."""
    lab = lab_from(KERNEL_TUNNEL.replace("DATAPATH", "[bpf, user]"))
    a, b = lab.nodes["a"], lab.nodes["b"]
    assert [mpt_daemon.counters(lab.name, n)["datapath"] for n in "ab"] == ["bpf", "user"]
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    near = lab.plan.links["a:mpt0=b:mpt0"].a.ipv4[0].split("/")[0]
    assert " 0% packet loss" in a.cmd(["ping", "-c", "20", "-i", "0.02", far])
    assert " 0% packet loss" in b.cmd(["ping", "-c", "20", "-i", "0.02", near])
    tcp = tools.iperf3(a, b, far, seconds=2)
    assert tcp["mbps"] > 200, tcp
    time.sleep(0.5)
    report = json.loads(run_cli("inspect", "--lab", lab.name, "--format", "json").stdout)
    shown = {n["name"]: n["tunnels"]["mpt0"] for n in report["nodes"] if "tunnels" in n}
    assert [shown[n]["datapath"] for n in "ab"] == ["bpf", "user"], shown
    sent, got = shown["a"]["paths"], shown["b"]["paths"]
    assert all(p["tx_packets"] > 1000 for p in sent) and all(p["rx_packets"] > 1000 for p in got), (sent, got)


def test_mpt_tunnel_drops_and_counts_foreign_and_malformed_datagrams(lab_from):
    lab = _tunnel(lab_from, "1, 1")
    a = lab.nodes["a"]
    p1 = lab.plan.links["a:p1=b:p1"]
    a_ip, b_ip = p1.a.ipv4[0].split("/")[0], p1.b.ipv4[0].split("/")[0]
    # From a's address but another port: foreign.  From a's tunnel port: a raw datagram, GRE version 1.
    a.cmd(
        [
            "python3",
            "-c",
            f"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b'junk', ('{b_ip}', 4754)) for _ in range(5)]",
        ]
    )
    udp = struct.pack("!HHHH", 4754, 4754, 8 + 8, 0) + b"\x00\x01\x08\x00" + b"\x45\x00\x00\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(a_ip), socket.inet_aton(b_ip))
    script = (
        "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW); "
        f"[s.sendto(bytes.fromhex('{(ip + udp).hex()}'), ('{b_ip}', 0)) for _ in range(7)]"
    )
    a.cmd(["python3", "-c", script])
    time.sleep(0.5)
    counts = mpt_daemon.counters(lab.name, "b")
    assert counts["dropped_foreign"] >= 5 and counts["dropped_malformed"] >= 7, counts
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    assert " 0% packet loss" in a.cmd(["ping", "-c", "2", "-i", "0.05", far])  # still running


def test_mpt_tunnel_carries_bursts_over_a_path_whose_mtu_is_below_the_tunnels(lab_from):
    """Bursts go out as runs of equal datagrams (UDP segmentation offload); a run the kernel refuses, here because
    path 1's MTU is below the tunnel's datagrams, goes again a datagram at a time, fragmented as before
    (the daemon's own datapath: the kernel's leaves such datagrams to it)."""
    lab = _tunnel(lab_from, "1, 1", "user")
    a, b = lab.nodes["a"], lab.nodes["b"]
    for node in (a, b):
        node.cmd(["ip", "link", "set", "p1", "mtu", "1000"])
    far = lab.plan.links["a:mpt0=b:mpt0"].b.ipv4[0].split("/")[0]
    udp = tools.iperf3(a, b, far, seconds=2, udp=True, bitrate="100M", length=1400, window="2M")
    assert udp["mbps"] > 80 and udp["lost_pct"] < 2, udp
    time.sleep(0.5)  # the daemons write their counters every 200 ms
    sent, received = mpt_daemon.counters(lab.name, "a")["paths"], mpt_daemon.counters(lab.name, "b")["paths"]
    assert all(abs(s["tx_packets"] - r["rx_packets"]) <= 3 for s, r in zip(sent, received)), (
        sent,
        received,
    )  # all but a stray one
    assert min(p["tx_packets"] for p in sent) > 8000, sent  # both paths carried half of ~17 000 datagrams


@pytest.mark.throughput
def test_multipath_suite_aggregates_paths_native_and_containerised(tmp_path):
    """A slice of `nestlab bench multipath`: 3 paths, every method, both placements, and the inspect view of MPTCP's subflows."""
    import dataclasses

    from nestlab.bench import results, scenario
    from nestlab.bench.suites import SUITES

    suite = SUITES["multipath"]
    seen_subflows = {}

    def measure(lab, cell, duration, rec):
        if cell["method"] == "mptcp":  # look at the connection while it runs
            timer = threading.Timer(duration / 2 + 1, lambda: seen_subflows.update({cell["placement"]: lab.inspect()}))
            timer.start()
            try:
                return multipath.measure(lab, cell, duration, rec)
            finally:
                timer.join()
        return multipath.measure(lab, cell, duration, rec)

    axes = {
        "placement": ["containerised", "native"],
        "paths": [3],
        "method": multipath.METHODS,
        "datapath": ["user"],
        "rate": [100],
    }
    folder = scenario.run(
        dataclasses.replace(suite, quick_axes=axes, measure=measure), tmp_path / "run", quick=True, reps=1, duration=3
    )
    _, rows = results.load(folder)
    errors = [r for r in rows if r.get("error")]
    assert not errors, (errors, sorted(p.name for p in folder.rglob("*") if p.is_file()))
    cells = {(c["cell"]["placement"], c["cell"]["method"]): c for c in assert_every_cell_judged(folder)["cells"]}
    assert cells[("containerised", "tcp")]["figures"]["mbps"]["mean"] > 0
    total = {(r["placement"], r["method"]): r for r in rows if r["pair"] == "all"}
    for placement in ("containerised", "native"):
        plain, mptcp_, mpt_tcp, mpt_udp = (total[(placement, m)] for m in multipath.METHODS)
        assert plain["paths_used"] == 1 and plain["mbps"] < 100, plain  # one HTB-shaped 100 Mbit/s path
        for row in (mptcp_, mpt_tcp, mpt_udp):  # every path carries about a third
            assert row["paths_used"] == 3 and row["evenness_pct"] > 70, row
        for row in (mptcp_, mpt_udp):  # and more than one path's worth arrives
            assert row["mbps"] > 1.5 * plain["mbps"], row
        # TCP through a per-packet tunnel meets reordering (docs/multipath.md): at times it backs off to one path's worth.
        assert mpt_tcp["mbps"] > 0.8 * plain["mbps"] and mpt_tcp["retransmits"] is not None, mpt_tcp
        assert mpt_udp["tunnel_cpu_pct_per_gbps"] > 0 and mpt_udp["lost_pct"] is not None
    for placement, view in seen_subflows.items():
        conns = [c for node in view["nodes"] if node["name"] == "a" for c in node.get("mptcp", [])]
        devices = {s["device"] for c in conns for s in c["subflows"]}
        assert devices == {"p1", "p2", "p3"}, (placement, conns)
    page = (folder / "report.html").read_text()
    for fig in suite.figures:
        assert f'id="{fig.id}"' in page, fig.id

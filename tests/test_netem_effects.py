"""containerlab's `tools netem set --delay/--jitter/--loss/--corruption` and a topology file's `gemodel`, measured
with real packets (VM tier: this project's own kernel lacks netem) and read back from the qdisc the kernel reports.

The containerlab commands are run in this process (``nestlab.cli.clab.run``, what `nestlab clab ...` runs after
its start-up): under the VM tier's software emulation a fresh CLI takes about a minute just to import."""

from __future__ import annotations

import itertools
import json
import re
import statistics
import sys

import pytest
from conftest import run_cli
from netcheck import iqr, rtts

from nestlab.backends.kernel import probe
from nestlab.cli import clab

PAIR = """name: {name}
topology:
  nodes: {a: {}, b: {}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
PARAMS
"""
# Datagrams sent on a clock of their own (ping's interval slips where the VM's timers are coarse).
PACED = """
import socket, time
s, t0 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), time.monotonic()
for i in range({count}):
    time.sleep(max(0.0, t0 + i * {gap} - time.monotonic()))
    s.sendto(bytes({size}), ("{to}", 9))
"""


def pair(params: str = "") -> str:
    return PAIR.replace("PARAMS", f"      params: {params}" if params else "")


def containerlab(capsys, *args: str) -> str:
    """`nestlab clab ARGS` in this process: its exit code must be 0; returns what it printed."""
    capsys.readouterr()
    code = clab.run(list(args))
    printed = capsys.readouterr()
    assert code == 0, (args, printed.err)
    return printed.out


def netem_qdisc(node, iface: str = "eth1") -> dict:
    """The netem qdisc's options as the kernel reports them (`tc -j qdisc show`); {} when there is none."""
    qdiscs = json.loads(node.cmd(["tc", "-j", "qdisc", "show", "dev", iface], check=True))
    found = [q for q in qdiscs if q["kind"] == "netem"]
    return found[0]["options"] if found else {}


def udp_counters(node) -> dict[str, int]:
    """The node's own Udp: counters (/proc/net/snmp is per network namespace)."""
    lines = [line.split() for line in node.cmd(["cat", "/proc/net/snmp"], check=True).splitlines() if line.startswith("Udp:")]
    return dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=True))


@pytest.mark.kernel("netem")
def test_clab_netem_set_delays_jitters_loses_and_corrupts_what_the_node_sends(lab_from, capsys):
    lab = lab_from(pair())
    a, b = lab.nodes["a"], lab.nodes["b"]
    ip, node = b.intf("eth1").ip, f"clab-{lab.name}-a"
    base = statistics.median(rtts(a, ip))  # this machine's own RTT (slow under emulation)

    # delay: what a sends waits 30 ms, so the round trip grows by 30 ms (b's replies are not delayed)
    containerlab(capsys, "tools", "netem", "set", "-n", node, "-i", "eth1", "--delay", "30ms")
    assert netem_qdisc(a)["delay"]["delay"] == pytest.approx(0.030), netem_qdisc(a)
    assert netem_qdisc(b) == {}, "only what a sends"
    delayed = rtts(a, ip)
    assert 26 <= statistics.median(delayed) - base <= 36, (base, delayed)

    # jitter: the delay kept, each packet's varies by up to 10 ms either way: the RTTs spread out
    containerlab(capsys, "tools", "netem", "set", "-n", node, "-i", "eth1", "--jitter", "10ms")
    assert netem_qdisc(a)["delay"] == {"delay": pytest.approx(0.030), "jitter": pytest.approx(0.010), "correlation": 0}
    jittered = rtts(a, ip)
    assert 26 <= statistics.median(jittered) - base <= 36, (base, jittered)
    assert iqr(jittered) >= 5 and iqr(jittered) >= 2 * iqr(delayed), (iqr(delayed), delayed, jittered)
    shown = json.loads(containerlab(capsys, "tools", "netem", "show", "-n", node, "--format", "json"))[node]
    assert shown == [{"interface": "eth1", "delay": "30ms", "jitter": "10ms", "packet_loss": 0.0, "rate": 0, "corruption": 0.0}]

    # loss: 20 % of 2000 echo requests (a Bernoulli sample: 20 +- 0.9 %)
    containerlab(capsys, "tools", "netem", "reset", "-n", node, "-i", "eth1")
    assert "delay" not in netem_qdisc(a) and "loss-random" not in netem_qdisc(a), netem_qdisc(a)
    containerlab(capsys, "tools", "netem", "set", "-n", node, "-i", "eth1", "--loss", "20")
    assert netem_qdisc(a)["loss-random"]["loss"] == pytest.approx(0.20), netem_qdisc(a)
    out = a.cmd(["ping", "-n", "-c", "2000", "-i", "0.002", "-W", "1", ip], timeout=300)
    lost = 100 - 100 * len(set(re.findall(r"icmp_seq=(\d+)", out))) / 2000
    assert 16 <= lost <= 24, lost

    # corruption: 10 % of the frames get a bit flipped; b's UDP finds the checksum of nearly all of them wrong
    # (a 1042-byte frame: 97 % of its bytes are UDP's), and counts each; the rest of the datagrams pass clean
    containerlab(capsys, "tools", "netem", "set", "-n", node, "-i", "eth1", "--loss", "0", "--corruption", "10")
    assert netem_qdisc(a)["corrupt"]["corrupt"] == pytest.approx(0.10) and "loss-random" not in netem_qdisc(a), netem_qdisc(a)
    before = udp_counters(b)
    a.cmd([sys.executable, "-c", PACED.format(count=2000, gap=0.002, size=1000, to=ip)], timeout=120, check=True)
    after = udp_counters(b)
    bad = after["InCsumErrors"] - before["InCsumErrors"]
    clean = after["NoPorts"] - before["NoPorts"]  # nothing listens on port 9: every good datagram is counted there
    assert 140 <= bad <= 260 and bad + clean >= 1900, (bad, clean)

    containerlab(capsys, "tools", "netem", "reset", "-n", node, "-i", "eth1")
    assert not {"delay", "loss-random", "corrupt"} & set(netem_qdisc(a)), netem_qdisc(a)
    assert abs(statistics.median(rtts(a, ip)) - base) < 5


@pytest.mark.throughput
@pytest.mark.kernel("netem")
def test_gemodel_in_the_topology_file_loses_in_bursts(lab_from):
    """`params: {a: {gemodel: "5% 20%"}}` in the file: what a sends passes a Gilbert-Elliott channel the kernel
    reports with those figures; 20 % of the pings are lost (p / (p + r)), in runs averaging about 1 / r = 5
    (independent loss at that rate would average 1.25); b's replies lose nothing."""
    lab = lab_from(pair('{a: {gemodel: "5% 20%"}}'))
    a, b = lab.nodes["a"], lab.nodes["b"]
    model = netem_qdisc(a)["loss-gemodel"]
    assert model == {"p": pytest.approx(0.05), "r": pytest.approx(0.20), "1-h": pytest.approx(1.0), "1-k": 0}, model
    assert netem_qdisc(b) == {}, "only what a sends"
    out = a.cmd(["ping", "-n", "-c", "3000", "-i", "0.002", "-W", "1", b.intf("eth1").ip], timeout=300)
    seen = {int(m) for m in re.findall(r"icmp_seq=(\d+)", out)}
    lost = [seq not in seen for seq in range(1, 3001)]
    runs = [len(list(group)) for is_lost, group in itertools.groupby(lost) if is_lost]
    assert 12 <= 100 * sum(lost) / len(lost) <= 28, sum(lost)
    assert statistics.fmean(runs) >= 2.5, runs


@pytest.mark.skipif(probe.kernel()["netem"][0], reason="this kernel has netem (the refusal is for one without)")
def test_clab_netem_set_without_netem_is_refused_naming_it_and_changes_nothing(lab_from):
    lab = lab_from(pair())
    node = f"clab-{lab.name}-a"
    assert run_cli("clab", "tools", "netem", "set", "-n", node, "-i", "eth1", "--rate", "5000").returncode == 0
    for impairment in (["--delay", "20ms"], ["--jitter", "5ms"], ["--loss", "10"], ["--corruption", "1"]):
        refused = run_cli("clab", "tools", "netem", "set", "-n", node, "-i", "eth1", *impairment, "--rate", "7000")
        assert refused.returncode != 0 and "CONFIG_NET_SCH_NETEM" in refused.stderr, (impairment, refused.stderr)
    assert "rate 5Mbit" in lab.nodes["a"].cmd(["tc", "class", "show", "dev", "eth1"]), "the rate given with them was not applied"
    shown = json.loads(run_cli("clab", "tools", "netem", "show", "-n", node, "--format", "json", check=True).stdout)[node]
    assert shown == [{"interface": "eth1", "delay": "", "jitter": "", "packet_loss": 0.0, "rate": 5000, "corruption": 0.0}]

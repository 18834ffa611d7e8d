"""The shipped examples and the demo run as documented."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, leftovers, run_cli

from nestlab import Lab
from nestlab.bench.tools import parse_iperf3, parse_ping

PING_OUTPUT = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.

--- 10.0.0.2 ping statistics ---
10 packets transmitted, 9 received, 10% packet loss, time 1838ms
rtt min/avg/max/mdev = 0.048/0.056/0.068/0.006 ms
"""


def test_demo_measures_and_destroys():
    result = run_cli("demo", "-t", "examples/quickstart.yml")
    assert result.returncode == 0, result.stderr
    assert "10/10" in result.stdout and "Mbit/s" in result.stdout
    assert "nothing left behind (namespaces, mounts, processes, cgroups, interfaces checked)" in result.stderr
    assert leftovers() == []


def test_what_a_lab_leaves_is_named_until_it_is_gone(topo_file):
    """The check behind the demo's "nothing left behind": it names a running lab's objects, and none once destroyed."""
    from nestlab import Lab
    from nestlab.engine import cleanup

    lab = Lab.from_file(topo_file("name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links: [{endpoints: [a:eth1, b:eth1]}]\n"))
    with lab.deployed():
        there = cleanup.left(lab.name)
        assert {f"namespace /run/netns/nestlab.{lab.name}.{n}" for n in "ab"} <= set(there), there
        assert f"folder /run/nestlab/{lab.name}" in there
    assert cleanup.left(lab.name) == []


def test_api_example_runs():
    result = subprocess.run([sys.executable, "examples/api_demo.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "10.0.0.1/24" in result.stdout and "'received': 5" in result.stdout
    assert leftovers() == []


def test_parse_ping_counts_loss_and_rtt():
    assert parse_ping(PING_OUTPUT) == {
        "sent": 10,
        "received": 9,
        "loss_pct": 10.0,
        "rtt_min_ms": 0.048,
        "rtt_avg_ms": 0.056,
        "rtt_max_ms": 0.068,
        "rtt_mdev_ms": 0.006,
    }
    with pytest.raises(ValueError):
        parse_ping("ping: connect: Network is unreachable")


def test_parse_iperf3_reports_receiver_rate():
    text = (
        '{"start": {}, "intervals": [], "end": {"sum_sent": {"bits_per_second": 2e9, "retransmits": 3, "seconds": 3.0},'
        ' "sum_received": {"bits_per_second": 1.5e9, "seconds": 3.0}}}'
    )
    assert parse_iperf3(text) == {"mbps": 1500.0, "retransmits": 3, "lost_pct": None, "seconds": 3.0}


def test_parse_iperf3_udp_counts_only_what_arrived():
    # iperf3 3.12 (Debian 12) UDP: the client's "sum" carries the receiver's loss, and there is no sum_received.
    text = '{"start": {}, "intervals": [], "end": {"sum": {"bits_per_second": 1e9, "lost_percent": 25.0, "seconds": 2.0}}}'
    assert parse_iperf3(text) == {"mbps": 750.0, "retransmits": None, "lost_pct": 25.0, "seconds": 2.0}


def test_twohosts_example_deploys_and_connects(topo_file):
    from netcheck import echo, ping, reaches

    text = (ROOT / "examples" / "twohosts.yml").read_text().replace("name: twohosts", "name: {name}")
    lab = Lab.from_file(topo_file(text))
    with lab.deployed():
        n = lab.nodes
        assert reaches(n["c1"], n["s1"], "10.1.0.1")
        assert reaches(n["c2"], n["s2"], "10.9.0.1")
        assert ping(n["c2"], "10.9.0.1", size=8922)  # vxlan MTU 8950 over the 9000-byte cable
        assert echo(n["h0"], n["n1"], "10.200.0.2") == "HELLO seen-from 10.200.0.1"  # NATed to the server's NIC


def test_shaping_and_manet_examples_run(tmp_path):
    import shutil

    for name in ("shaping.yml", "manet.yml"):
        text = (ROOT / "examples" / name).read_text()
        lab_name = "tex" + name.split(".")[0][:4]
        (tmp_path / name).write_text(text.replace(f"name: {name.split('.')[0]}", f"name: {lab_name}"))
    shutil.copy(ROOT / "examples" / "manet-graph.yml", tmp_path / "manet-graph.yml")
    graph = (tmp_path / "manet-graph.yml").read_text().split("- t: 6s")[0]  # the first 6 s are enough here
    (tmp_path / "manet-graph.yml").write_text(graph)
    for name in ("shaping.yml", "manet.yml"):
        result = run_cli("run", "-t", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert "changes; worst lateness" in result.stderr
        assert re.search(r"^fidelity: (ok|\d+ of 1 not ok)", result.stderr, re.M), result.stderr  # the schedule's verdict


@pytest.mark.parametrize("name", ["nestednet-manet.yml", "nestednet-manet-flat.yml"])
def test_nestednet_manet_examples(name):
    lab = Lab.from_file(ROOT / "examples" / name)
    with lab.deployed():
        assert len([n for n in lab.nodes if "/" in n]) == 60  # 12 drones x (1 GNAB + 4 iPHY)
        radio = lab.nodes["drone12/iphy4"].intf("radio4").ip
        from netcheck import ping

        assert ping(lab.nodes["drone1/iphy1"], radio)  # across the main switch
        gnab = lab.nodes["drone1/gnab"]
        if "flat" in name:
            assert "radio4" in gnab.cmd("ip -br link")  # the drone's one stack holds every radio
        else:
            assert ping(gnab, "10.99.0.5")  # drone1/iphy4 on the internal switch
            assert "radio" not in gnab.cmd("ip -br link")
        assert lab.nodes["drone1"].limits()["cpus"] == "1"
    assert leftovers() == []


def test_measure_pairs_example_runs():
    result = subprocess.run([sys.executable, "examples/measure_pairs.py"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("4 pairs started within") == 3 and "95 % CI" in result.stdout
    assert leftovers() == []


def test_observe_example_draws_captures_and_streams(tmp_path):
    env = {"OUT": str(tmp_path), "NESTLAB": f"{sys.executable} -m nestlab.cli.app", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    result = subprocess.run(["bash", "examples/observe.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "twohosts.mmd").read_text().startswith("flowchart LR")
    assert "<mxfile" in (tmp_path / "twohosts.drawio").read_text()
    assert "events:  2 down, 2 up" in result.stdout
    assert (tmp_path / "vxlan.pcapng").stat().st_size > 0
    assert leftovers() == []


def test_clab_stages_example_waits_for_the_server(tmp_path):
    page = Path("/tmp/clab-stages-page")
    page.unlink(missing_ok=True)
    result = run_cli("deploy", "-t", "examples/clab-stages.yml", timeout=120)
    try:
        assert result.returncode == 0, result.stderr
        assert "Directory listing" in page.read_text(), "client fetched the page as soon as it configured: web was healthy first"
        assert run_cli("exec", "--lab", "clab-stages", "client", "--", "ping", "-c1", "-W1", "172.20.20.2").returncode == 0
    finally:
        run_cli("destroy", "--lab", "clab-stages")
        page.unlink(missing_ok=True)


def _get(url: str, within: float = 10.0) -> bytes:
    """The page at ``url``, retried while its server starts."""
    deadline = time.monotonic() + within
    while True:
        try:
            return urllib.request.urlopen(url, timeout=2).read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_clab_template_example_renders_forwards_and_restarts():
    result = run_cli("deploy", "-t", "examples/clab-template.clab.yml", timeout=120)
    try:
        assert result.returncode == 0 and "variables from examples/clab-template.clab_vars.yml" in result.stderr, result.stderr
        assert b"Directory listing" in _get("http://127.0.0.1:18080/"), "web's port 80 through this machine's loopback"
        assert "1 received" in run_cli("exec", "--lab", "clab-template", "h4", "--", "ping", "-c1", "-W1", "10.0.7.1").stdout
        assert run_cli("node", "restart", "--lab", "clab-template", "web").returncode == 0
        assert b"Directory listing" in _get("http://127.0.0.1:18080/"), "served again by the restarted cmd"
    finally:
        run_cli("destroy", "--lab", "clab-template", "--cleanup")


def test_wireless_minstrel_example_climbs_under_fading(topo_file):
    """examples/wireless-minstrel.yml: Minstrel and Rayleigh fading on an 802.11g medium.  a reaches c at 90 m; after
    two seconds of UDP from a to b (40 m, 23 dB over the noise on average, faded each frame), Minstrel has left the
    basic rate for b, and fading has cost attempts that were retried."""
    from nestlab.lab import wireless

    text = (ROOT / "examples" / "wireless-minstrel.yml").read_text().replace("name: wlm", "name: {name}")
    lab = Lab.from_file(topo_file(text))
    with lab.deployed():
        assert " 0% packet loss" in lab.nodes["a"].cmd("ping -c3 -i0.2 -W2 10.72.0.3"), "c at 90 m"
        server = lab.nodes["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            lab.nodes["a"].cmd("iperf3 -c 10.72.0.2 -u -b 30M -l 1400 -t 2", check=True)
        finally:
            server.kill()
            server.wait()
        state = wireless.state(lab, "air")
        assert (state["rate_control"], state["fading"]) == ("minstrel", "rayleigh")
        rates = {(p[0], p[1]): p[2] for p in state["pairs"]}
        assert rates[("a", "b")] > 6, state["pairs"]
        assert state["counts"]["retries"] > 10, state["counts"]
    assert leftovers() == []

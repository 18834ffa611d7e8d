"""Node kinds as plug-ins (nestlab/kinds): the iperf3 kind, added as its module, its tests and a docs row."""

from __future__ import annotations

import json
import time

from conftest import ROOT, leftovers, run_cli, star

from nestlab import Lab
from nestlab.backends.kernel.sockets import listening
from nestlab.registry import KINDS


def test_a_traffic_sink_serves_from_deploy_on():
    """The example's sink listens when deploy returns; a host measures through the shaped link; inspect shows the port."""
    lab = Lab.from_file(ROOT / "examples" / "traffic-sink.yml")
    try:
        lab.deploy()
        proc = lab.nodes["h1"].popen(
            ["iperf3", "-c", "10.0.1.2", "-p", "5301", "-t", "1", "--json"], stdout=-1, stderr=-1, text=True
        )
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err + out
        mbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        assert 10 < mbps < 60, mbps  # the link's 50 Mbit/s, not the veth's line rate
        shown = json.loads(run_cli("inspect", "--lab", "traffic-sink", "--format", "json", check=True).stdout)
        sink = next(n for n in shown["nodes"] if n["name"] == "sink")
        assert sink["kind"] == "iperf3" and sink["iperf3"] == {"port": 5301}
    finally:
        lab.destroy()
    assert leftovers() == []


def test_the_port_check_tells_listening_from_not(tmp_path):
    """``listening`` reads the process's own namespace: this test's listening socket counts, a free port does not."""
    import os
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert listening(os.getpid(), port)
    assert not listening(os.getpid(), port)


def test_a_kind_key_on_another_kind_is_refused(topo_file):
    """A key a kind owns, on a node of another kind: file:line:col, exit 2, nothing made."""
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    h1: {server_port: 5301}\n")
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stderr
    assert f"{path}:4:" in result.stderr and "'server_port' applies to kind: iperf3 nodes only" in result.stderr
    assert leftovers() == []


def test_every_kind_answers_what_it_is():
    """The registry's kinds: the words a file may use, and what each says of itself (the questions other layers ask)."""
    assert KINDS.canonical("host") == "linux"
    assert {k.name for k in KINDS.values() if k.switch} == {"bridge", "ovs", "wireless"}
    assert [k.name for k in KINDS.values() if k.machine] == ["machine"]
    assert KINDS.names()[0] == "machine"  # emulated hosts are made first, then switches, then nodes
    assert KINDS.get("ovs").link_mode == "ovs" and KINDS.get("frr").config_file == "/etc/frr/frr.conf"


def test_older_words_are_read_as_the_new_ones(topo_file, lab_name):
    """``mode: host`` on a link is the machine-veth mode, on a node it is ``mode: none``: files written before still load."""
    text = (
        "name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {mode: host}\n"
        '  links:\n    - endpoints: ["a:e1"]\n      mode: host\n      host_interface: v{name}\n'
    )
    plan = Lab.from_file(topo_file(text)).plan
    (att,) = plan.attachments.values()
    assert att.mode == "machine-veth" and att.option("host_interface") == f"v{lab_name}"
    assert plan.nodes["b"].shares is not None and plan.nodes["a"].shares is None


_JOIN = """
import socket, struct, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack("4s4s", socket.inet_aton("239.1.2.3"), socket.inet_aton(sys.argv[1])))
print("joined", flush=True)
time.sleep(30)
"""


def test_a_bridge_snoops_multicast_once_deployed(topo_file, lab_name):
    """A bridge is filled with snooping off (cheaper for the kernel) and snoops once deployed: it learns a
    host's group membership on that host's port only.  Deployed by the CLI, so the spares' helper makes it."""
    path = topo_file(star("{name}", 3))
    assert run_cli("deploy", "-t", str(path)).returncode == 0
    lab = Lab.from_file(path)
    shown = lab.nodes["sw"].cmd(["ip", "-d", "link", "show", "sw"])
    assert "mcast_snooping 1" in shown, shown
    member = lab.nodes["h1"].popen(["python3", "-c", _JOIN, lab.nodes["h1"].intf("eth1").ip], stdout=-1, text=True)
    try:
        assert member.stdout.readline().strip() == "joined"
        for _ in range(50):  # the IGMP report goes out at once; give the bridge a moment to take it in
            groups = lab.nodes["sw"].cmd(["bridge", "mdb", "show"])
            if "239.1.2.3" in groups:
                break
            time.sleep(0.1)
        assert [line.split()[3] for line in groups.splitlines() if "239.1.2.3" in line] == ["p1"], groups
    finally:
        member.kill()
        member.wait()

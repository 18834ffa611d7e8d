"""Labs split across servers: placement, the plan command, Kubernetes manifests, and whole labs on
emulated servers (namespaces with their own sshd) pinging, measuring and failing across them."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter

import pytest
import yaml
from conftest import ROOT, processes, run_cli

from nestlab import Lab
from nestlab.engine import state
from nestlab.errors import LabError
from nestlab.model.errors import TopologyError
from nestlab.model.schema.machines import ServerSpec
from nestlab.plan.placement import place
from nestlab.sites.k8s.manifests import render
from nestlab.sites.shares import place_and_partition
from nestlab.sites.ssh import remotes
from nestlab.testbeds import emulate

pytestmark = pytest.mark.skipif(not os.path.exists(emulate.SSHD), reason="needs Debian's openssh-server (make deps installs it)")


def two_clusters(n: int = 8) -> Lab:
    """Two rings of ``n`` nodes with chords, joined by one link a0-b0."""
    lab = Lab("clusters")
    for c in "ab":
        for i in range(n):
            lab.add_node(f"{c}{i}")
        for i in range(n):
            lab.add_link(f"{c}{i}:r{(i + 1) % n}", f"{c}{(i + 1) % n}:l{i}")
            if i < n // 2:
                lab.add_link(f"{c}{i}:c{i + n // 2}", f"{c}{i + n // 2}:c{i}")
    lab.add_link("a0:x", "b0:x")
    return lab


def test_placement_cuts_the_one_link_between_two_clusters_and_keeps_pins():
    lab = two_clusters()
    placed = place(lab.plan, {"s1": 1, "s2": 1}, {})
    assert placed.cut == [("a0:x", "b0:x")]
    assert len({placed.server_of[f"a{i}"] for i in range(8)}) == 1 and len({placed.server_of[f"b{i}"] for i in range(8)}) == 1
    pinned = place(lab.plan, {"s1": 1, "s2": 1, "s3": 1}, {"a3": "s3", "b5": "s1"})
    assert pinned.server_of["a3"] == "s3" and pinned.server_of["b5"] == "s1"
    counts = [list(pinned.server_of.values()).count(s) for s in ("s1", "s2", "s3")]
    assert max(counts) - min(counts) <= 2, counts
    weighted = place(lab.plan, {"s1": 3, "s2": 1}, {})
    assert list(weighted.server_of.values()).count("s1") == 12


def test_a_node_bigger_than_any_share_is_refused():
    lab = Lab("big")
    lab.add_node("n1", components={f"c{i}": {} for i in range(6)})
    lab.add_node("h1")
    lab.add_node("h2")
    lab.add_link("n1:eth1", "h1:eth1")
    with pytest.raises(LabError, match="n1 has 7 nodes with its components, more than any server's share"):
        place(lab.plan, {"s1": 1, "s2": 1}, {})


def test_a_share_holds_none_of_the_lab_s_checks():
    """The checks name nodes of every share: they are run where the whole lab is looked at, and each share still
    loads (a share with them would name nodes it lacks)."""
    from nestlab.model.load import load_data

    lab = Lab.from_text(
        "name: chk\ntopology:\n  nodes: {h1: {server: s1}, h2: {server: s2}}\n  links: [{endpoints: [h1:eth1, h2:eth1]}]\n"
        "checks:\n  - reach: {from: h1, to: h2}\n"
    )
    parts = place_and_partition(lab.blueprint, {s: ServerSpec(address=f"198.18.7.{i}") for i, s in enumerate(("s1", "s2"), 1)})
    for server, share in parts.shares.items():
        assert "checks" not in share.topology, server
        load_data(share.topology, f"{server}.yml")


INVENTORY = """servers:
  s1: {address: 198.18.7.1}
  s2: {address: 198.18.7.2, weight: 1}
"""


def test_plan_prints_the_split_and_bad_inventories_name_their_line(tmp_path, topo_file):
    topo = topo_file(
        "name: {name}\ntopology:\n  nodes:\n    a: {server: s1}\n    b: {server: s2}\n    c: {}\n"
        "  links:\n    - endpoints: [a:eth1, b:eth1]\n    - endpoints: [b:eth2, c:eth1]\n"
    )
    inventory = tmp_path / "inv.yml"
    inventory.write_text(INVENTORY)
    (tmp_path / "good.yml").write_text(INVENTORY)
    result = run_cli("plan", "-t", str(topo), "--servers", str(inventory), "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["servers"]["s1"][0] == "a" and "b" in report["servers"]["s2"] and report["cut"][0] == ["a:eth1", "b:eth1"]
    assert report["stitched_mtu"] == 1450
    shares = yaml.safe_load(run_cli("plan", "-t", str(topo), "--servers", str(inventory), "--format", "yaml").stdout)
    half = next(ln for ln in shares["s1"]["topology"]["links"] if ln["endpoints"] == ["a:eth1"])
    assert half["mode"] == "vxlan-remote" and half["remote"] == "198.18.7.2" and half["mtu"] == 1450
    inventory.write_text("servers:\n  s1: {address: 198.18.7.1}\n  s2: {adress: 198.18.7.2}\n")
    bad = run_cli("plan", "-t", str(topo), "--servers", str(inventory))
    assert bad.returncode == 2 and "inv.yml:3:" in bad.stderr and "adress" in bad.stderr, bad.stderr
    unknown = topo_file(
        "name: {name}\nservers: {s1: {address: 198.18.7.1}}\ntopology:\n  nodes:\n    a: {server: s9}\n", "unknown.yml"
    )
    bad = run_cli("plan", "-t", str(unknown))
    assert bad.returncode == 2 and "unknown.yml:5:" in bad.stderr and "server 's9' is not under servers:" in bad.stderr, (
        bad.stderr
    )
    waiting = topo_file(
        "name: {name}\ntopology:\n  nodes:\n    a: {server: s1, stages: {configure: {wait-for: [{node: b}]}}}\n"
        "    b: {server: s2}\n",
        "waiting.yml",
    )
    bad = run_cli("plan", "-t", str(waiting), "--servers", str(inventory.with_name("good.yml")))
    assert bad.returncode == 1 and "waits for b (configure), which runs on another server" in bad.stderr, bad.stderr


def test_a_server_named_in_a_lab_without_servers_is_a_file_error(topo_file):
    """It is the file that names the server: exit 2 at its line, nothing made (the CLI and the API alike)."""
    topo = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {server: s1}\n")
    refused = run_cli("deploy", "-t", str(topo))
    assert refused.returncode == 2 and f"{topo}:5:" in refused.stderr and "server 's1' is named here" in refused.stderr, (
        refused.stderr
    )
    with pytest.raises(TopologyError, match="but this lab has no servers"):
        Lab.from_file(topo).deploy()


def test_kubernetes_manifests_are_valid_and_split_like_the_ssh_path():
    lightkube = pytest.importorskip("lightkube.codecs", reason="lightkube validates the manifests (make deps installs it)")
    lab = two_clusters()
    manifests, parts = render(lab, 3, "nestlab:test")
    for manifest in manifests:
        obj = lightkube.from_dict(manifest)  # required fields and types, by the Kubernetes API models
        assert obj.to_dict() == manifest, f"{manifest['kind']} has keys the API does not know"
    kinds = [m["kind"] for m in manifests]
    assert kinds == ["Secret", "Service", "Pod", "Pod", "Pod"]
    ssh = place_and_partition(lab, {s: ServerSpec(address=f"198.18.7.{i}") for i, s in enumerate(("s1", "s2", "s3"), 1)})
    assert ssh.placement.server_of == parts.placement.server_of and ssh.placement.cut == parts.placement.cut
    shares = {k.removesuffix(".yml"): yaml.safe_load(base64.b64decode(v)) for k, v in manifests[0]["data"].items()}
    assert manifests[2]["spec"]["volumes"][0]["secret"]["defaultMode"] == 0o400  # the topology: root's alone
    for server, share in ssh.shares.items():
        assert set(shares[server]["topology"]["nodes"]) == set(share.topology["topology"]["nodes"])
        remotes = {ln.get("remote") for ln in shares[server]["topology"]["links"]} - {None}
        assert all(re.fullmatch(r"\$\{NESTLAB_PEER_S\d\}", r) for r in remotes), remotes


# -- on emulated servers ------------------------------------------------------------------------------
def _emulated(tmp_path, count: int):
    """``count`` emulated servers' inventory, removed (with everything inside them) afterwards."""
    name = "srv" + os.urandom(3).hex()
    inventory = tmp_path / "inv.yml"
    emulate.emulate(count, name, copy_to=str(inventory))
    try:
        yield inventory
    finally:
        emulate.destroy(name)


@pytest.fixture
def servers(tmp_path):
    yield from _emulated(tmp_path, 3)


def share_labs(inventory) -> dict[str, list[str]]:
    """The labs each server holds, asked over SSH."""
    found = {}
    for name, remote in remotes(yaml.safe_load(inventory.read_text())["servers"], "/").items():
        answer = remote.run(remote.nestlab_cmd("inspect", "--all", "--format", "json"))
        assert answer.returncode == 0, answer.stderr
        found[name] = [row["lab"] for row in json.loads(answer.stdout)]
    return found


def thirty(name: str) -> str:
    """30 hosts on three chained switches (one L2 segment), plus a cut veth pair, pinned to span all servers."""
    nodes = {"sw1": {"kind": "bridge"}, "sw2": {"kind": "bridge"}, "sw3": {"kind": "bridge"}}
    links = [{"endpoints": ["sw1:up", "sw2:down"]}, {"endpoints": ["sw2:up", "sw3:down"]}]
    for i in range(1, 29):
        nodes[f"h{i}"] = {"sysctls": {"net.ipv4.icmp_echo_ignore_broadcasts": 0}}
        links.append({"endpoints": [f"h{i}:eth1", f"sw{1 + (i - 1) // 10}:p{i}"], "ipv4": [f"10.0.9.{i}/24", None]})
    for i, server in ((1, "s2"), (2, "s3"), (11, "s1"), (12, "s3"), (21, "s1"), (22, "s2")):
        nodes[f"h{i}"]["server"] = server  # every switch has ports on every server
    nodes["x"] = {"server": "s1"}
    nodes["y"] = {"server": "s3"}
    links.append({"endpoints": ["x:eth1", "y:eth1"], "ipv4": ["10.0.8.1/30", "10.0.8.2/30"], "params": {"rate": "1gbit"}})
    nodes["x2"] = {"server": "s1"}
    nodes["y2"] = {"server": "s1"}
    links.append({"endpoints": ["x2:eth1", "y2:eth1"], "ipv4": ["10.0.8.5/30", "10.0.8.6/30"], "params": {"rate": "1gbit"}})
    return yaml.safe_dump({"name": name, "topology": {"nodes": nodes, "links": links}})


def _pings(lab: str, node: str, targets: list[str]) -> str:
    loop = " ".join(targets)
    script = f"for ip in {loop}; do (ping -c1 -W3 $ip >/dev/null && echo ok $ip || echo FAIL $ip) & done; wait"
    return run_cli("exec", "--lab", lab, node, "--", "sh", "-c", script, timeout=120).stdout


def test_thirty_nodes_on_three_servers_reach_each_other_and_leave_nothing(servers, topo_file, lab_name):
    topo = topo_file(thirty(lab_name))
    result = run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300)
    try:
        assert result.returncode == 0, result.stderr
        assert "35 nodes on 3 servers" in result.stderr and "MTU 1450" in result.stderr, result.stderr
        report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json").stdout)
        on = {n["name"]: n["server"] for n in report["nodes"]}
        pins = {"h1": "s2", "h2": "s3", "h11": "s1", "h12": "s3", "h21": "s1", "h22": "s2", "x": "s1", "y": "s3"}
        assert {node: on[node] for node in pins} == pins
        hosts = [f"10.0.9.{i}" for i in range(1, 29)]
        for i in range(1, 29):  # every host pings every other, most of them on other servers
            answer = _pings(lab_name, f"h{i}", [ip for ip in hosts if ip != f"10.0.9.{i}"])
            assert answer.count("ok ") == 27, (f"h{i}", answer)
        # A broadcast crosses the stitched switches: answers come from hosts on every server.
        broadcast = run_cli("exec", "--lab", lab_name, "h5", "--", "ping", "-b", "-c2", "-W2", "10.0.9.255").stdout
        answering = {int(ip.rsplit(".", 1)[1]) for ip in re.findall(r"from (10\.0\.9\.\d+)", broadcast)}
        assert {on[f"h{i}"] for i in answering} == {"s1", "s2", "s3"}, broadcast
        assert "1 received" in run_cli("exec", "--lab", lab_name, "x", "--", "ping", "-c1", "-W2", "10.0.8.2").stdout
        assert " mtu 1450 " in run_cli("exec", "--lab", lab_name, "x", "--", "ip", "-o", "link", "show", "eth1").stdout
    finally:
        destroyed = run_cli("destroy", "--lab", lab_name, timeout=300)
    assert destroyed.returncode == 0 and "removed from servers s1, s2, s3" in destroyed.stderr, destroyed.stderr
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}
    assert lab_name not in state.labs()


def test_a_command_reads_the_inventory_and_checks_the_topology_once(servers, topo_file, lab_name, monkeypatch):
    """`deploy -t FILE --servers INV` (run in this process, where the reads are counted) reads and checks the
    inventory once, checks the topology once with its servers and checks no server's entry again: the servers'
    nestlab and the topology are handed what was read.  `destroy --lab` reads the lab's record once."""
    from typer.testing import CliRunner

    import nestlab.sites
    from nestlab.cli.app import build
    from nestlab.engine import where
    from nestlab.model import load
    from nestlab.model import servers as inventories

    counted: Counter[str] = Counter()

    def count(owner, name: str, what: str) -> None:
        real = getattr(owner, name)

        def counting(*args, **kwargs):
            counted[what] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)

    count(inventories, "read_source", "inventory read")
    count(load, "load_data", "topology checked")
    count(where, "read", "record read")
    count(nestlab.sites, "read", "record read")
    validate = ServerSpec.model_validate.__func__

    def checked(cls, *args, **kwargs):
        counted["server checked"] += 1
        return validate(cls, *args, **kwargs)

    monkeypatch.setattr(ServerSpec, "model_validate", classmethod(checked))
    topo = topo_file(
        "name: {name}\ntopology:\n  nodes:\n    a: {server: s1}\n    b: {server: s2}\n    c: {server: s3}\n"
        "  links:\n    - endpoints: [a:eth1, b:eth1]\n    - endpoints: [b:eth2, c:eth1]\n"
    )
    app, cli = build(), CliRunner()
    try:
        deployed = cli.invoke(app, ["deploy", "-t", str(topo), "--servers", str(servers)])
        assert deployed.exit_code == 0, deployed.output
        assert {k: counted[k] for k in ("inventory read", "topology checked", "server checked")} == {
            "inventory read": 1,
            "topology checked": 1,
            "server checked": 3,  # each of the three servers' entries, as the inventory is read
        }, counted
        counted.clear()
        destroyed = cli.invoke(app, ["destroy", "--lab", lab_name])
        assert destroyed.exit_code == 0 and "removed from servers s1, s2, s3" in destroyed.output, destroyed.output
        assert counted == {"record read": 1, "server checked": 3}, counted
    finally:
        run_cli("destroy", "--lab", lab_name, timeout=300)
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}


@pytest.mark.throughput
def test_stitched_link_carries_nine_tenths_of_the_same_link_on_one_server(servers, topo_file, lab_name):
    topo = topo_file(thirty(lab_name))
    assert run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300).returncode == 0
    try:
        rates = {}
        for client, server_ip, server in (("x", "10.0.8.2", "y"), ("x2", "10.0.8.6", "y2")):
            daemon = subprocess.Popen(
                [*_exec(lab_name, server), "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(1)
            answer = run_cli("exec", "--lab", lab_name, client, "--", "iperf3", "-c", server_ip, "-t", "3", "-J", timeout=60)
            daemon.wait(timeout=30)
            rates[client] = json.loads(answer.stdout)["end"]["sum_received"]["bits_per_second"]
        assert rates["x"] >= 0.9 * rates["x2"], rates
        assert max(rates.values()) <= 1.05e9, f"both are shaped at 1gbit, the stitched one on each server: {rates}"
    finally:
        run_cli("destroy", "--lab", lab_name, timeout=300)


def _exec(lab: str, node: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "nestlab.cli.app", "exec", "--lab", lab, node, "--"]


def test_a_server_failing_mid_deploy_is_named_and_every_server_is_cleaned(servers, topo_file, lab_name):
    topo = topo_file(thirty(lab_name))
    # s2's nestlab is killed while it deploys its share.
    killed = []

    emulation = yaml.safe_load(servers.read_text())["servers"]["s1"]["key"].split("/")[3]  # /run/nestlab/NAME/client/...
    started = f"/run/nestlab/{emulation}/nodes/s2/run/{lab_name}/uts"  # s2's own /run/nestlab: it has begun making namespaces

    def killer():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            if os.path.isdir(started):
                for pid, cmd in processes():
                    if "deploy -t /dev/stdin" in cmd and _server_of(pid, emulation) == "s2":
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        break
            time.sleep(0.005)

    thread = threading.Thread(target=killer)
    thread.start()
    result = run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300)
    thread.join()
    assert killed, "s2's deploy was not caught running"
    assert result.returncode == 1 and "server s2" in result.stderr and "every server was cleaned up" in result.stderr, (
        result.stderr
    )
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}
    assert lab_name not in state.labs()
    # An unreachable server: named, nothing made anywhere.
    data = yaml.safe_load(servers.read_text())
    data["servers"]["s3"]["address"] = "198.18.0.250"
    servers.write_text(yaml.safe_dump(data))
    result = run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300)
    assert result.returncode == 1 and "server s3: SSH failed" in result.stderr, result.stderr
    data["servers"]["s3"]["address"] = "198.18.0.3"
    servers.write_text(yaml.safe_dump(data))
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}


def _server_of(pid: int, emulation: str) -> str | None:
    """Which emulated server a process runs in (by its network namespace)."""
    try:
        ino = os.stat(f"/proc/{pid}/ns/net").st_ino
    except FileNotFoundError:
        return None
    for server in ("s1", "s2", "s3"):
        if os.stat(f"/run/netns/nestlab.{emulation}.{server}").st_ino == ino:
            return server
    return None


def test_servers_example_runs_on_emulated_servers(servers):
    planned = run_cli("plan", "-t", "examples/servers.yml", "--servers", str(servers))
    assert planned.returncode == 0 and "cut links: 1; switches spanning servers: 1" in planned.stdout, (
        planned.stdout + planned.stderr
    )
    result = run_cli("deploy", "-t", "examples/servers.yml", "--servers", str(servers), timeout=300)
    try:
        assert result.returncode == 0, result.stderr
        assert "1 received" in run_cli("exec", "--lab", "servers-demo", "h1", "--", "ping", "-c1", "-W2", "10.0.3.6").stdout
        assert "1 received" in run_cli("exec", "--lab", "servers-demo", "a", "--", "ping", "-c1", "-W2", "10.0.4.2").stdout
        # This machine's record lost: each server still cleans its share on its own.
        shutil.rmtree("/run/nestlab/servers-demo")
        assert share_labs(servers) == {"s1": ["servers-demo"], "s2": ["servers-demo"], "s3": ["servers-demo"]}
        for remote in remotes(yaml.safe_load(servers.read_text())["servers"], "/").values():
            assert remote.run(remote.nestlab_cmd("cleanup", "servers-demo")).returncode == 0
    finally:
        run_cli("destroy", "--lab", "servers-demo", timeout=300)
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}


def test_an_ovs_switch_spanning_servers_is_one_switch(servers, topo_file, lab_name):
    topo = topo_file(
        "name: {name}\ntopology:\n  nodes:\n    sw: {kind: ovs, server: s1}\n    h1: {server: s1}\n"
        "    h2: {server: s2}\n    h3: {server: s3}\n  links:\n"
        + "".join(f'    - {{endpoints: ["h{i}:eth1", "sw:p{i}"], ipv4: ["10.0.5.{i}/24", null]}}\n' for i in (1, 2, 3))
    )
    result = run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300)
    try:
        assert result.returncode == 0 and "2 VXLAN tunnels" in result.stderr, result.stderr
        assert "1 received" in run_cli("exec", "--lab", lab_name, "h2", "--", "ping", "-c1", "-W3", "10.0.5.3").stdout
        assert "1 received" in run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c1", "-W3", "10.0.5.2").stdout
    finally:
        run_cli("destroy", "--lab", lab_name, timeout=300)
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}


@pytest.fixture
def two_servers(tmp_path):
    yield from _emulated(tmp_path, 2)


def test_capture_events_and_link_set_ask_the_site_of_a_lab_on_two_servers(two_servers, topo_file, lab_name, tmp_path):
    """The commands that work on a node (capture, events, link set) run where the node is: its server's
    nestlab does the work, its output relayed here, as on this machine."""
    from pcapng import FileScanner, blocks

    topo = topo_file(
        yaml.safe_dump(
            {
                "name": lab_name,
                "topology": {
                    "nodes": {"a": {"server": "s1"}, "b": {"server": "s1"}, "c": {"server": "s2"}},
                    "links": [
                        {"endpoints": ["a:eth1", "b:eth1"], "ipv4": ["10.0.6.1/30", "10.0.6.2/30"]},
                        {"endpoints": ["b:eth2", "c:eth1"], "ipv4": ["10.0.6.5/30", "10.0.6.6/30"]},
                    ],
                },
            }
        )
    )
    assert run_cli("deploy", "-t", str(topo), "--servers", str(two_servers), timeout=300).returncode == 0
    try:
        pcap = tmp_path / "a.pcapng"
        capture = subprocess.Popen(
            [
                *_exec(lab_name, "a")[:3],
                "capture",
                "--lab",
                lab_name,
                "a:eth1",
                "-f",
                "icmp",
                "-c",
                "4",
                "-d",
                "20",
                "-w",
                str(pcap),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        events = subprocess.Popen(
            [*_exec(lab_name, "a")[:3], "events", "--lab", lab_name, "--format", "json", "-d", "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)  # both streams open on s1 (over SSH)
        assert "2 received" in run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-c2", "-W2", "10.0.6.2").stdout
        assert capture.wait(timeout=60) == 0, capture.stderr.read()
        with open(pcap, "rb") as fh:
            packets = [b.packet_data for b in FileScanner(fh) if isinstance(b, blocks.EnhancedPacket)]
        assert len(packets) == 4 and all(p[12:14] == b"\x08\x00" and p[23] == 1 for p in packets), packets

        down = run_cli("link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--down")
        assert down.returncode == 0, down.stderr
        assert run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-c1", "-W1", "10.0.6.2").returncode != 0
        shaped = run_cli("link", "set", "--lab", lab_name, "a:eth1", "b:eth1", "--up", "--rate", "10mbit")
        assert shaped.returncode == 0, shaped.stderr
        qdiscs = run_cli("exec", "--lab", lab_name, "a", "--", "tc", "class", "show", "dev", "eth1").stdout
        assert "rate 10Mbit" in qdiscs, qdiscs
        assert "1 received" in run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-c1", "-W2", "10.0.6.2").stdout

        # node stop/start: each server's nestlab stops its own; inspect (here and containerlab's) asks them.
        stopped = run_cli("node", "stop", "--lab", lab_name, "a", "c")
        said = stopped.stdout + stopped.stderr
        assert stopped.returncode == 0 and "stopped a" in said and "stopped c" in said, said
        assert run_cli("exec", "--lab", lab_name, "b", "--", "ping", "-c1", "-W1", "10.0.6.1").returncode != 0
        found = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json").stdout)
        assert {n["name"]: n["state"] for n in found["nodes"]} == {"a": "stopped", "b": "running", "c": "stopped"}, found
        clab = json.loads(run_cli("clab", "inspect", "--name", lab_name, "--format", "json").stdout)[lab_name]
        assert {c["name"].rsplit("-", 1)[1]: c["state"] for c in clab} == {"a": "exited", "b": "running", "c": "exited"}, clab
        assert run_cli("node", "start", "--lab", lab_name, "a", "c").returncode == 0
        assert "1 received" in run_cli("exec", "--lab", lab_name, "b", "--", "ping", "-c1", "-W2", "10.0.6.1").stdout
        assert "1 received" in run_cli("exec", "--lab", lab_name, "b", "--", "ping", "-c1", "-W2", "10.0.6.6").stdout

        cut = run_cli("link", "set", "--lab", lab_name, "b:eth2", "c:eth1", "--rate", "10mbit")
        assert cut.returncode == 1 and "s1, s2" in cut.stderr and "pin both ends to one server" in cut.stderr, cut.stderr

        out, err = events.communicate(timeout=60)  # it ends by itself (-d) and ends its server's stream
        assert events.returncode == 0, err
        seen = [json.loads(line) for line in out.splitlines()]
        moved = {(e["node"], e["event"]) for e in seen if e.get("interface") == "eth1"}
        assert {("a", "down"), ("a", "up")} <= moved, seen
        assert any(e["what"].get("set", {}).get("rate") == "10mbit" for e in seen if e["event"] == "change"), seen
    finally:
        destroyed = run_cli("destroy", "--lab", lab_name, timeout=300)
    assert destroyed.returncode == 0 and "removed from servers s1, s2" in destroyed.stderr, destroyed.stderr
    assert share_labs(two_servers) == {"s1": [], "s2": []}


# A tunnel daemon too slow for its tun device: it reads 50 packets a second (tests/test_fidelity.py has the same).
_SLOW_TUN = """
import fcntl, os, struct, subprocess, time
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", b"tun0", 0x0001 | 0x1000))
subprocess.run("ip addr add 10.77.0.1/24 dev tun0 && ip link set tun0 up", shell=True, check=True)
print("ready", flush=True)
while True:
    os.read(fd, 2048)
    time.sleep(0.02)
"""
_PACED = """
import socket, time
s, t0 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), time.monotonic()
for i in range({count}):
    time.sleep(max(0.0, t0 + i * {gap} - time.monotonic()))
    s.sendto(bytes(1000), ("{to}", 9))
"""


def test_a_lab_on_two_servers_is_judged_from_samples_taken_on_each(two_servers, topo_file, lab_name):
    """Each server samples its own share (its nestlab, over SSH): a light run is ok and shows the links of both
    servers; a tunnel daemon too slow on s2 fails the run, naming s2 and the device."""
    import sys

    from nestlab.lab.fidelity import Watch

    shaped = {"rate": "10mbit"}
    links = [
        {"endpoints": ["a:eth1", "b:eth1"], "ipv4": ["10.0.7.1/30", "10.0.7.2/30"], "params": shaped},
        {"endpoints": ["c:eth1", "d:eth1"], "ipv4": ["10.0.7.5/30", "10.0.7.6/30"], "params": shaped},
    ]
    nodes = {"a": {"server": "s1"}, "b": {"server": "s1"}, "c": {"server": "s2"}, "d": {"server": "s2"}}
    topo = topo_file(yaml.safe_dump({"name": lab_name, "topology": {"nodes": nodes, "links": links}}))
    assert run_cli("deploy", "-t", str(topo), "--servers", str(two_servers), timeout=300).returncode == 0
    try:
        lab = Lab.running(lab_name)
        with Watch(lab) as light:  # 2 Mbit/s on each 10 Mbit/s link for 2 s
            senders = [
                subprocess.Popen([*_exec(lab_name, node), sys.executable, "-c", _PACED.format(count=500, gap=0.004, to=to)])
                for node, to in (("a", "10.0.7.2"), ("c", "10.0.7.6"))
            ]
            assert [p.wait(timeout=60) for p in senders] == [0, 0]
        figures = light.verdict.figures
        assert light.verdict.level == "ok", light.verdict.to_json()
        assert figures["links"]["a:eth1"]["share"] == "s1" and figures["links"]["c:eth1"]["share"] == "s2", figures
        assert figures["links"]["a:eth1"]["sent_mbit"] > 1 and figures["links"]["c:eth1"]["sent_mbit"] > 1, figures
        assert set(figures["shares"]) == {"s1", "s2"} and figures["samples"] >= 20, figures

        reader = subprocess.Popen([*_exec(lab_name, "c"), sys.executable, "-c", _SLOW_TUN], stdout=subprocess.PIPE, text=True)
        try:
            assert reader.stdout.readline().strip() == "ready"
            with Watch(lab) as slow:
                flood = _PACED.format(count=10000, gap=0.0002, to="10.77.0.2")
                assert run_cli("exec", "--lab", lab_name, "c", "--", sys.executable, "-c", flood, timeout=60).returncode == 0
        finally:
            reader.kill()
            reader.wait()
        assert slow.verdict.level == "failed", slow.verdict.to_json()
        assert slow.verdict.figures["tuns"]["c:tun0"]["share"] == "s2", slow.verdict.figures
        assert any(r.startswith("s2: c:tun0 dropped") for r in slow.verdict.reasons), slow.verdict.reasons
    finally:
        run_cli("destroy", "--lab", lab_name, timeout=300)


def test_one_management_network_spans_the_servers(servers):
    """examples/servers-mgmt.yml, unchanged: nodes on three servers share one management segment: each reaches
    every other's management address (spoke to spoke through the first server), leaves through its own server's
    gateway, is reached by `nestlab ssh` through its server, and the lab directory here lists every one of them."""
    topo, lab_name = ROOT / "examples" / "servers-mgmt.yml", "servers-mgmt"
    planned = run_cli("plan", "-t", str(topo), "--servers", str(servers)).stdout
    assert "management network: one segment over s1, s2, s3 (its gateway on s1)" in planned, planned
    result = run_cli("deploy", "-t", str(topo), "--servers", str(servers), timeout=300)
    folder = topo.parent / f"clab-{lab_name}"
    try:
        assert result.returncode == 0, result.stderr
        inventory = yaml.safe_load((folder / "ansible-inventory.yml").read_text())
        address = {
            name.rsplit("-", 1)[1]: host["ansible_host"]
            for group in inventory["all"]["children"].values()
            for name, host in group["hosts"].items()
        }
        assert sorted(address) == ["a", "b", "c", "d"] and address["c"] == "172.31.77.50", address
        for node in address:  # every node answers every other's management address, over two tunnels at most
            answer = _pings(lab_name, node, [ip for other, ip in address.items() if other != node])
            assert answer.count("ok ") == 3, (node, answer)
        data = json.loads((folder / "topology-data.json").read_text())
        assert data["nodes"]["c"]["mgmt-ipv6-address"] == "3fff:172:31:77::32", data["nodes"]["c"]  # 50 = 0x32
        v6 = run_cli("exec", "--lab", lab_name, "b", "--", "ping", "-6", "-c1", "-W3", "3fff:172:31:77::32").stdout
        assert "1 received" in v6, v6
        routes = {n: run_cli("exec", "--lab", lab_name, n, "--", "ip", "-4", "route", "show", "default").stdout for n in "abc"}
        assert "via 172.31.77.1 " in routes["a"] and len({r.split()[2] for r in routes.values()}) == 3, routes
        assert " mtu 1450 " in run_cli("exec", "--lab", lab_name, "d", "--", "ip", "-o", "link", "show", "eth0").stdout
        relayed = run_cli("ssh", "--lab", lab_name, "c", "--", "hostname", timeout=60)
        assert relayed.returncode == 0 and relayed.stdout.strip() == "c", relayed.stdout + relayed.stderr
        report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json").stdout)
        assert sorted(n["name"] for n in report["nodes"]) == ["a", "b", "c", "d"]  # not the servers' joint
    finally:
        destroyed = run_cli("destroy", "--lab", lab_name, "--cleanup", timeout=300)
    assert destroyed.returncode == 0, destroyed.stderr
    assert not folder.exists()
    assert share_labs(servers) == {"s1": [], "s2": [], "s3": []}

"""The management network: every node reached as containerlab's are, by name, `ip netns`, SSH and
inventories; NAT out and nothing in; two labs at once; bad input refused with its line; nothing left."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import NESTLAB, ROOT, leftovers, run_cli

from nestlab.backends.kernel import namespaces
from nestlab.model.mgmt import machine_routes

LAB = """name: {name}
topology:
  nodes:
    a: {kind: linux, labels: {ansible-group: edge}}
    b: {kind: linux, mgmt-ipv4: 172.20.20.77}
    sw: {kind: bridge}
  links:
    - endpoints: ["a:eth1", "sw:p1"]
    - endpoints: ["b:eth1", "sw:p2"]
"""


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def _hosts_block(lab: str) -> list[str]:
    with open("/etc/hosts") as fh:
        lines = fh.read().splitlines()
    start, end = lines.index(f"###### CLAB-{lab}-START ######"), lines.index(f"###### CLAB-{lab}-END ######")
    return lines[start + 1 : end]


@contextlib.contextmanager
def outside():
    """A namespace of ours standing for the world beyond this machine: 198.51.100.2 behind a veth from
    this machine (198.51.100.1), with no route to the management subnet."""
    name = "nlout" + os.urandom(3).hex()
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", name],
        ["ip", "addr", "add", "198.51.100.1/24", "dev", name],
        ["ip", "link", "set", name, "up"],
        ["ip", "-n", name, "addr", "add", "198.51.100.2/24", "dev", "eth0"],
        ["ip", "-n", name, "link", "set", "eth0", "up"],
        ["ip", "-n", name, "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_a_containerlab_file_is_reached_by_name_ip_netns_ssh_and_inventories(tmp_path, lab_name):
    topo = tmp_path / "lab.clab.yml"
    topo.write_text(LAB.replace("{name}", lab_name))
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        # First, at once: the IPv6 gateway answers (unprobed), and the bridge's ports carry no address of their own.
        v6 = run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-6", "-c1", "-W1", "3fff:172:20:20::1")
        assert v6.returncode == 0, v6.stdout
        assert not re.findall(r"^\d+: mg[0-9a-f]{8} .*inet6", _run("ip", "-o", "addr").stdout, re.M)
        a, b = f"clab-{lab_name}-a", f"clab-{lab_name}-b"
        block = _hosts_block(lab_name)
        assert block[0].startswith("172.20.20.") and block[0].endswith(f"\t{a}\t# Kind: linux"), block
        assert f"172.20.20.77\t{b}\t# Kind: linux" in block and len(block) == 4, block  # a, b; then their IPv6 lines
        assert not any("sw" in line for line in block), "a switch has no management interface"
        for name in (a, b):
            assert _run("ping", "-c1", "-W2", name).returncode == 0, f"ping {name} from this machine"
            shown = _run("ip", "netns", "exec", name, "ip", "-br", "-4", "addr", "show", "eth0").stdout
            assert "172.20.20." in shown, shown
        ssh = _run("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", b, "hostname; ip -br -4 addr show eth0")
        assert ssh.returncode == 0 and ssh.stdout.splitlines()[0] == "b" and "172.20.20.77/24" in ssh.stdout, ssh.stderr
        via_cli = run_cli("ssh", "--lab", lab_name, "a", "--", "cat", "/proc/sys/kernel/hostname")
        assert via_cli.stdout.strip() == "a", via_cli.stderr
        # The node reaches this machine's gateway address, and what lies beyond it through NAT only.
        assert run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-c1", "-W2", "172.20.20.1").returncode == 0
        with outside() as world:
            assert run_cli("exec", "--lab", lab_name, "a", "--", "ping", "-c1", "-W2", "198.51.100.2").returncode == 0
            subprocess.run(["ip", "-n", world, "route", "add", "172.20.20.0/24", "via", "198.51.100.1"], check=True)
            inward = _run("ip", "netns", "exec", world, "ping", "-c1", "-W1", "172.20.20.77")
            assert inward.returncode != 0, "nothing from outside reaches a node"
        report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json").stdout)
        eth0 = next(i for n in report["nodes"] if n["name"] == "b" for i in n["interfaces"] if i["name"] == "eth0")
        assert eth0["mode"] == "mgmt:clab" and "172.20.20.77/24" in eth0["addresses"], eth0
        folder = tmp_path / f"clab-{lab_name}"
        data = json.loads((folder / "topology-data.json").read_text())
        assert data["name"] == lab_name and data["nodes"]["b"]["mgmt-ipv4-address"] == "172.20.20.77"
        assert data["nodes"]["a"]["longname"] == a and data["nodes"]["b"]["mgmt-ipv4-prefix-length"] == 24
        inventory = yaml.safe_load((folder / "ansible-inventory.yml").read_text())["all"]["children"]
        assert inventory["linux"]["hosts"][b] == {"ansible_host": "172.20.20.77"}
        assert list(inventory["edge"]["hosts"]) == [a], "the ansible-group label makes a group"
        nornir = yaml.safe_load((folder / "nornir-simple-inventory.yml").read_text())
        assert nornir["b"]["hostname"] == "172.20.20.77"
        assert oct(os.stat(f"/var/lib/nestlab/ssh/{lab_name}/id_ed25519").st_mode & 0o777) == "0o600"
        gates = [
            p for p in os.listdir("/proc") if p.isdigit() and b"nestlab.engine.sshgate" in open(f"/proc/{p}/cmdline", "rb").read()
        ]
        assert len(gates) == 1, "one process holds every node's SSH socket"
    finally:
        gone = run_cli("destroy", "-t", str(topo), timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []
    assert (tmp_path / f"clab-{lab_name}" / "ansible-inventory.yml").exists(), "destroy keeps the lab directory"
    assert run_cli("deploy", "-t", str(topo), timeout=120).returncode == 0
    assert run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120).returncode == 0
    assert not (tmp_path / f"clab-{lab_name}").exists(), "destroy --cleanup takes it along"
    assert leftovers() == []


def test_two_labs_share_the_network_and_their_addresses_do_not_clash(tmp_path):
    names = ["tmg" + os.urandom(3).hex() for _ in range(2)]
    files = []
    for name in names:
        path = tmp_path / f"{name}.clab.yml"
        path.write_text(f"name: {name}\ntopology:\n  nodes:\n    n1: {{}}\n    n2: {{}}\n")
        files.append(path)
    try:
        for path in files:
            assert run_cli("deploy", "-t", str(path), timeout=120).returncode == 0
        held = [
            {line.split("\t")[1]: line.split("\t")[0] for line in _hosts_block(name) if "." in line.split("\t")[0]}
            for name in names
        ]
        addresses = [ip for lab in held for ip in lab.values()]
        assert len(set(addresses)) == 4, held
        for lab in held:
            for long in lab:
                assert _run("ping", "-c1", "-W2", long).returncode == 0
        first = names[0]
        assert run_cli("exec", "--lab", first, "n1", "--", "ping", "-c1", "-W2", held[1][f"clab-{names[1]}-n1"]).returncode == 0
        # A third lab naming the network with another subnet would be cut off from the bridge's gateway: refused.
        other = tmp_path / "other.clab.yml"
        other.write_text("name: tmgother\nmgmt: {ipv4-subnet: 172.31.9.0/24}\ntopology:\n  nodes:\n    n1: {}\n")
        refused = run_cli("deploy", "-t", str(other))
        assert (
            refused.returncode == 2
            and "other.clab.yml:2:" in refused.stderr
            and "give ipv4-subnet: 172.20.20.0/24" in refused.stderr
        ), refused.stderr
        assert run_cli("destroy", "-t", str(files[0])).returncode == 0
        assert _run("ping", "-c1", "-W2", f"clab-{names[1]}-n2").returncode == 0, "the other lab keeps the network"
    finally:
        for path in files:
            run_cli("destroy", "-t", str(path))
    assert leftovers() == []


def _eth0(lab: str, node: str) -> dict:
    """``ip -j link show eth0`` of a node of ``lab``, as read from inside it."""
    (link,) = json.loads(_run("ip", "-n", f"clab-{lab}-{node}", "-j", "link", "show", "eth0").stdout)
    return link


def _frames(sock, seconds: float) -> list[bytes]:
    """What an AF_PACKET socket received (not sent) within ``seconds``."""
    got, until = [], time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            frame, where = sock.recvfrom(2048)
        except TimeoutError:
            break
        if where[2] != socket.PACKET_OUTGOING:
            got.append(frame)
    return got


def _mld(frame: bytes) -> bool:
    """An MLD report or done: ICMPv6 types 131, 132, 143 behind IPv6's hop-by-hop header."""
    if frame[20] != 0:
        return False
    hop = frame[54:]
    return hop[0] == 58 and hop[(hop[1] + 1) * 8] in (131, 132, 143)


def test_the_segment_floods_multicast_but_not_the_nodes_mld_reports(tmp_path):
    """A node joining a group sends an MLD report; with snooping off the bridge would hand it to every
    other node (500 nodes: 250 000 frames while they come up).  The report stays off the segment, and
    other multicast still reaches every node."""
    name = "tmg" + os.urandom(3).hex()
    path = tmp_path / f"{name}.clab.yml"
    path.write_text(f"name: {name}\ntopology:\n  nodes:\n    n1: {{}}\n    n2: {{}}\n")
    try:
        assert run_cli("deploy", "-t", str(path), timeout=120).returncode == 0
        with namespaces.entered(f"/run/netns/clab-{name}-n1"):
            seen = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
            seen.bind(("eth0", 0))
        with namespaces.entered(f"/run/netns/clab-{name}-n2"):
            index = socket.if_nametoindex("eth0")
            joiner, sender = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM), socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        mac = bytes.fromhex(_eth0(name, "n2")["address"].replace(":", ""))
        with seen, joiner, sender:
            group = socket.inet_pton(socket.AF_INET6, "ff02::1:3") + index.to_bytes(4, sys.byteorder)
            joiner.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, group)
            sender.sendto(b"to every node", ("ff02::1", 9, 0, index))
            frames = _frames(seen, 2.0)
        assert any(f[20] == 17 and f[56:58] == (9).to_bytes(2, "big") for f in frames), "multicast crosses the segment"
        assert not [f for f in frames if f[6:12] == mac and _mld(f)], "n2's MLD report reached n1"
    finally:
        run_cli("destroy", "-t", str(path))
    assert leftovers() == []


def test_nodes_past_a_bridges_ports_hang_on_child_bridges_and_reach_every_other(tmp_path):
    """A bridge takes 256 host numbers (a /24); the nodes past them hang on child bridges joined to it."""
    network = "t" + os.urandom(3).hex()
    name = "tmg" + os.urandom(3).hex()
    path = tmp_path / f"{name}.clab.yml"
    path.write_text(
        f"name: {name}\nmgmt: {{network: {network}, ipv4-subnet: 172.20.24.0/22}}\ntopology:\n  nodes:\n"
        "    n1: {mgmt-ipv4: 172.20.24.10}\n    n2: {mgmt-ipv4: 172.20.25.10}\n    n3: {mgmt-ipv4: 172.20.26.200}\n"
    )
    try:
        assert run_cli("deploy", "-t", str(path), timeout=120).returncode == 0
        here = {i["ifindex"]: i for i in json.loads(_run("ip", "-j", "link", "show").stdout)}
        masters = {node: here[_eth0(name, node)["link_index"]]["master"] for node in ("n1", "n2", "n3")}
        assert masters == {"n1": f"br-{network}", "n2": f"br-{network}-1", "n3": f"br-{network}-2"}
        for node, other in (("n3", "172.20.24.10"), ("n3", "172.20.25.10"), ("n2", "172.20.24.1"), ("n1", "172.20.26.200")):
            assert run_cli("exec", "--lab", name, node, "--", "ping", "-c1", "-W2", other).returncode == 0, (node, other)
        assert _run("ping", "-c1", "-W2", "172.20.26.200").returncode == 0
    finally:
        run_cli("destroy", "-t", str(path))
    assert not [i for i in json.loads(_run("ip", "-j", "link", "show").stdout) if network in i["ifname"]]
    assert leftovers() == []


@pytest.mark.parametrize(
    "node, mgmt, message",
    [
        ("{mgmt-ipv4: 10.9.9.9}", "", "is not inside the management subnet 172.20.20.0/24"),
        ("{mgmt-ipv4: 172.20.20.1}", "", "network, broadcast or gateway address"),
        ("{network-mode: bridgey}", "", "network-mode: bridgey is not a network mode (none, host or container:NODE)"),
        ("{}", "mgmt: {ipv4-subnet: ROUTE}\n", "overlaps this machine's route"),
        (
            "{}",
            "mgmt: {ipv4-subnet: 10.77.0.0/30}\n",
            "ipv4-subnet 10.77.0.0/30 has 1 addresses for nodes and the lab has 2 nodes",
        ),
    ],
)
def test_bad_management_input_is_a_file_error_and_makes_nothing(tmp_path, lab_name, node, mgmt, message):
    route = next((str(net) for net, iface in machine_routes() if not iface.startswith("br-")), "127.0.0.0/8")
    path = tmp_path / "bad.clab.yml"
    path.write_text(f"name: {lab_name}\n{mgmt.replace('ROUTE', route)}topology:\n  nodes:\n    n1: {node}\n    n2: {{}}\n")
    refused = run_cli("deploy", "-t", str(path))
    assert refused.returncode == 2 and message in refused.stderr and f"{path}:" in refused.stderr, refused.stderr
    assert leftovers() == []


def test_planning_is_handed_the_leases_and_reads_none(tmp_path, lab_name, monkeypatch):
    """The engine reads a management network's leases once, as it hands a blueprint out to be planned; planning
    takes them as a value (held addresses kept, other labs' and the gateway skipped) and reads no file."""
    from nestlab import Lab
    from nestlab.backends.kernel import mgmtleases
    from nestlab.engine.handout import handed_out
    from nestlab.errors import LabError
    from nestlab.plan.blueprint import Blueprint
    from nestlab.plan.mgmt import Leases

    path = tmp_path / "pure.clab.yml"
    path.write_text(f"name: {lab_name}\nmgmt: {{network: tpure}}\ntopology:\n  nodes:\n    n1: {{}}\n    n2: {{}}\n")
    reads = []
    monkeypatch.setattr(mgmtleases, "_file", lambda network: reads.append(network) or {})
    lab = Lab.from_file(path)
    assert lab.topology.mgmt is not None and reads == []  # checking it needs no leases
    handed = handed_out(lab.blueprint)
    handed.plan, handed.plan
    assert reads == ["tpure"] and handed.leases == Leases("tpure", "", {})
    held = Leases("tpure", "172.20.20.0/24", {"other": {"x": "172.20.20.2"}, lab_name: {"n2": "172.20.20.7"}})
    blueprint = Blueprint(lab.name, lab.source, lab.document(), checked=lab.topology, leases=held)
    addresses = {a.end.node: a.end.ipv4[0] for a in blueprint.plan.attachments.values()}
    assert addresses == {"n1": "172.20.20.3/24", "n2": "172.20.20.7/24"} and reads == ["tpure"]
    with pytest.raises(LabError, match="not handed the leases of its management network tpure"):
        Blueprint(lab.name, lab.source, lab.document(), checked=lab.topology).plan


def test_two_nodes_with_one_address_are_refused_at_the_second(tmp_path, lab_name):
    path = tmp_path / "dup.clab.yml"
    path.write_text(
        f"name: {lab_name}\ntopology:\n  nodes:\n    n1: {{mgmt-ipv4: 172.20.20.9}}\n    n2: {{mgmt-ipv4: 172.20.20.9}}\n"
    )
    refused = run_cli("deploy", "-t", str(path))
    assert refused.returncode == 2 and f"{path}:5:" in refused.stderr and "node n1's mgmt-ipv4 already" in refused.stderr


def test_a_new_lab_that_cannot_be_published_is_not_left_running(tmp_path, lab_name):
    """The lab directory planted as a symbolic link (never followed) stops the deploy after its nodes are made:
    the new lab is removed again, as when making its nodes fails, and the link's target is untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"clab-{lab_name}").symlink_to(elsewhere)
    path = tmp_path / "planted.clab.yml"
    path.write_text(f"name: {lab_name}\ntopology:\n  nodes:\n    n1: {{}}\n")
    refused = run_cli("deploy", "-t", str(path))
    assert refused.returncode == 1, refused.stderr
    assert "a symbolic link is not followed" in refused.stderr and "nothing was left behind" in refused.stderr, refused.stderr
    assert list(elsewhere.iterdir()) == []
    assert lab_name not in run_cli("inspect", "--all").stdout
    assert leftovers() == []


def test_a_killed_deploy_then_cleanup_leaves_no_name_address_rule_or_bridge(tmp_path, lab_name):
    nodes = "".join(f"    n{i}: {{}}\n" for i in range(60))
    path = tmp_path / "big.clab.yml"
    path.write_text(f"name: {lab_name}\ntopology:\n  nodes:\n{nodes}")
    proc = subprocess.Popen([*NESTLAB, "deploy", "-t", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.exists(f"/run/nestlab/{lab_name}/access.json"):
        if os.path.exists("/run/nestlab-mgmt/clab.json") and os.path.exists("/sys/class/net/br-clab"):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run_cli("cleanup", lab_name).returncode == 0
    assert leftovers() == []
    assert ipaddress.ip_address("172.20.20.1") not in {
        ipaddress.ip_interface(a).ip for a in _run("ip", "-o", "-4", "addr").stdout.split() if a.count(".") == 3 and "/" in a
    }


def test_the_example_is_reached_by_name_and_ssh():
    done = run_cli("deploy", "-t", "examples/mgmt.clab.yml", timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        assert _run("ping", "-c1", "-W2", "clab-mgmt-demo-r1").returncode == 0
        answer = _run("ssh", "-o", "BatchMode=yes", "clab-mgmt-demo-h1", "ping -c1 -W2 192.168.1.3 >/dev/null && hostname")
        assert answer.stdout.strip() == "h1", answer.stderr
        assert (ROOT / "examples" / "clab-mgmt-demo" / "topology-data.json").exists()
    finally:
        run_cli("destroy", "-t", "examples/mgmt.clab.yml", "--cleanup", timeout=120)
    assert not (ROOT / "examples" / "clab-mgmt-demo").exists()
    assert leftovers() == []


@pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")
def test_ansible_configures_ospf_over_ssh_and_a_second_run_changes_nothing(tmp_path):
    """ansible-core, unchanged, drives the lab through clab-LAB/ansible-inventory.yml over SSH."""
    example = ROOT / "examples" / "ansible"
    for name in ("ospf.clab.yml", "ospf.yml"):
        shutil.copy(example / name, tmp_path / name)
    topo = tmp_path / "ospf.clab.yml"
    playbook = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(tmp_path / "clab-ansible-ospf" / "ansible-inventory.yml"),
        "--private-key",
        "/var/lib/nestlab/ssh/ansible-ospf/id_ed25519",
        str(tmp_path / "ospf.yml"),
    ]
    env = {
        **os.environ,
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",  # the nodes see this machine's files: Debian's Python, not pyenv's
    }
    assert run_cli("deploy", "-t", str(topo), timeout=120).returncode == 0
    try:
        first = subprocess.run(playbook, capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
        recap = [line for line in first.stdout.splitlines() if "ok=" in line]
        assert len(recap) == 3 and all("changed=1" in line for line in recap), first.stdout[-2000:]
        again = subprocess.run(playbook, capture_output=True, text=True, timeout=300, env=env)
        assert (
            again.returncode == 0
            and [line for line in again.stdout.splitlines() if "changed=" in line and "changed=0" not in line] == []
        )
        deadline = time.monotonic() + 60
        full = 0
        while time.monotonic() < deadline and full < 2:
            out = run_cli("exec", "--lab", "ansible-ospf", "r2", "--", "vtysh", "-c", "show ip ospf neighbor json").stdout
            full = sum(
                1 for entries in json.loads(out or "{}").get("neighbors", {}).values() for n in entries if "Full" in str(n)
            )
            time.sleep(0.5)
        assert full == 2, "r2 is Full with r1 and r3 once Ansible configured them"
        deadline = time.monotonic() + 30  # once SPF has run on both ends, r1 reaches r3's far side through r2
        while run_cli("exec", "--lab", "ansible-ospf", "r1", "--", "ping", "-c1", "-W1", "10.0.23.3").returncode:
            assert time.monotonic() < deadline, run_cli("exec", "--lab", "ansible-ospf", "r1", "--", "ip", "route").stdout
    finally:
        run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert leftovers() == []


CREDENTIALS = """name: {name}
mgmt: {ipv4-subnet: 172.20.29.0/24}
topology:
  defaults:
    credentials: {username: admin, password: lab-Secret1}
  kinds:
    linux: {labels: {ansible-group: hosts}}      # a kind's labels reach its nodes, as containerlab's
  nodes:
    a: {kind: linux}
    b: {kind: linux}
    c: {kind: linux, credentials: {password: c-Secret2}}
    d: {kind: linux, ssh: false}
"""


def _with_password(password: str, *args: str) -> subprocess.CompletedProcess:
    """OpenSSH's own client, given the password by SSH_ASKPASS (no terminal), refusing keys."""
    askpass = Path(os.environ.get("TMPDIR", "/tmp")) / f"askpass-{os.getpid()}"
    askpass.write_text(f"#!/bin/sh\necho '{password}'\n")
    askpass.chmod(0o700)
    try:
        return subprocess.run(
            [
                "ssh",
                "-o",
                "PubkeyAuthentication=no",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "NumberOfPasswordPrompts=1",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"},
        )
    finally:
        askpass.unlink()


def test_credentials_log_in_with_their_password_and_fill_the_inventories(topo_file, tmp_path, lab_name):
    """containerlab's credentials: (defaults, overridden per node): each node answers its username and
    password on port 22 of its management address as the lab's unprivileged user, a wrong password is refused, the ssh config
    names the user, the inventories carry the passwords where containerlab puts them, and Ansible (through
    sshpass, as a user runs it with passwords) reaches every node with them; the machine's files are untouched."""
    topo = topo_file(CREDENTIALS, "lab.clab.yml")
    passwd_before = Path("/etc/passwd").read_bytes()
    shadow_before = Path("/etc/shadow").read_bytes()
    done = run_cli("deploy", "-t", str(topo), timeout=120)
    assert done.returncode == 0, done.stderr
    try:
        report = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json").stdout)
        address = {
            n["name"]: a.split("/")[0]
            for n in report["nodes"]
            for i in n["interfaces"]
            if i["name"] == "eth0"
            for a in i["addresses"]
            if "." in a
        }
        ok = _with_password("lab-Secret1", f"admin@{address['a']}", "id -u; hostname")
        assert ok.returncode == 0 and ok.stdout.split()[1:] == ["a"] and ok.stdout.split()[0] != "0", ok.stderr
        assert _with_password("c-Secret2", f"admin@{address['c']}", "hostname").stdout.strip() == "c"
        wrong = _with_password("lab-Secret1", f"admin@{address['c']}", "hostname")
        assert wrong.returncode == 255 and "Permission denied" in wrong.stderr, wrong.stderr
        assert _with_password("lab-Secret1", f"root@{address['a']}", "hostname").returncode == 255, "root has no password"
        keyed = _run("ssh", "-o", "BatchMode=yes", f"clab-{lab_name}-b", "echo $LOGNAME")
        assert keyed.returncode == 0 and keyed.stdout.strip() == "admin", keyed.stderr  # User admin, the lab's key
        assert Path("/etc/passwd").read_bytes() == passwd_before and Path("/etc/shadow").read_bytes() == shadow_before
        folder = tmp_path / f"clab-{lab_name}"
        inventory = yaml.safe_load((folder / "ansible-inventory.yml").read_text())["all"]
        assert inventory["vars"]["ansible_user"] == "admin" and inventory["vars"]["ansible_password"] == "lab-Secret1"
        hosts = inventory["children"]["linux"]["hosts"]
        assert hosts[f"clab-{lab_name}-c"]["ansible_password"] == "c-Secret2", hosts  # its own: on the host
        assert list(inventory["children"]["hosts"]["hosts"]) == [f"clab-{lab_name}-{n}" for n in "abcd"]
        nornir = yaml.safe_load((folder / "nornir-simple-inventory.yml").read_text())
        assert nornir["c"]["username"] == "admin" and nornir["c"]["password"] == "c-Secret2"
        env = {
            **os.environ,
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible"),
            "ANSIBLE_NOCOLOR": "1",
        }
        ansible = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible"),
                "-i",
                str(folder / "ansible-inventory.yml"),
                "linux:!*-d",
                "-m",
                "raw",
                "-a",
                "hostname",
                "--ssh-extra-args=-o PubkeyAuthentication=no -o UserKnownHostsFile=/dev/null",  # each run's lab has new host keys
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert ansible.returncode == 0 and ansible.stdout.count("CHANGED") == 3, ansible.stdout[-2000:] + ansible.stderr[-1000:]
    finally:
        gone = run_cli("destroy", "-t", str(topo), "--cleanup", timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []

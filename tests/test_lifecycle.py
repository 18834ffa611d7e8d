"""Deploy, use and destroy labs: connectivity, hostnames, exec/sysctls/env, reconcile, the CLI."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import weakref

import pytest
from conftest import ROOT, leftovers, root_links, run_cli

from nestlab import Lab, LabError
from nestlab.engine import gc_pause
from nestlab.model.errors import TopologyError

# The shipped example, under a unique lab name.
QUICKSTART = (ROOT / "examples" / "quickstart.yml").read_text().replace("name: quickstart", "name: {name}")

ECHO_SERVER = textwrap.dedent(
    """
    import socket, sys
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((sys.argv[1], 7007)); srv.listen(1); print("ready", flush=True)
    conn, peer = srv.accept(); data = conn.recv(100); conn.sendall(data.upper() + b" from " + socket.gethostname().encode())
    """
)


def test_quickstart_via_cli_ping_and_tcp(topo_file, lab_name):
    before = root_links()
    path = topo_file(QUICKSTART)
    deployed = run_cli("deploy", "-t", str(path), "--format", "json")
    assert deployed.returncode == 0, deployed.stderr
    report = json.loads(deployed.stdout)
    addrs = {n["name"]: n["interfaces"] for n in report["nodes"]}
    assert addrs["h1"][0]["addresses"] == ["10.0.0.1/24"]
    assert addrs["h2"][0]["addresses"] == ["10.0.0.2/24"]  # automatic, inside h1's subnet behind the bridge
    assert {i["name"]: i["master"] for i in addrs["s1"]} == {"s1": None, "p1": "s1", "p2": "s1"}
    assert root_links() == before, "a bridge lab must not add interfaces to the root namespace"

    ping = run_cli("exec", "--lab", lab_name, "h1", "--", "ping", "-c", "2", "-W", "1", "10.0.0.2")
    assert ping.returncode == 0 and "2 received" in ping.stdout

    lab = Lab.running(lab_name)
    server = lab.nodes["h2"].popen([sys.executable, "-c", ECHO_SERVER, "10.0.0.2"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        reply = lab.nodes["h1"].cmd(
            [
                sys.executable,
                "-c",
                "import socket; s=socket.create_connection(('10.0.0.2',7007),timeout=5); s.sendall(b'hi'); print(s.recv(100).decode())",
            ]
        )
        assert reply.strip() == "HI from h2"
    finally:
        server.kill()
        server.wait()

    gone = run_cli("destroy", "--lab", lab_name)
    assert gone.returncode == 0, gone.stderr
    assert leftovers() == []


def test_python_api_builds_in_code(lab_name):
    lab = Lab(lab_name)
    lab.add_node("a")
    lab.add_node("b")
    lab.add_link("a:eth1", "b:eth1")  # point-to-point veth, automatic /30
    with lab.deployed():
        a, b = lab.nodes["a"], lab.nodes["b"]
        assert a.intf("eth1").peer == "b:eth1"
        assert a.cmd("hostname").strip() == "a" and b.cmd("hostname").strip() == "b"
        assert "1 received" in a.cmd(f"ping -c1 -W1 {b.intf('eth1').ip}")
        assert "state UNKNOWN" in a.cmd("ip link show lo") and "LOOPBACK,UP" in a.cmd("ip link show lo")
        # No way out: the only routes are the lab's own subnets.
        assert "unreachable" in a.cmd("ip route get 192.0.2.1").lower()
    assert not lab.is_running() and leftovers() == []


def test_deploy_runs_no_cycle_collection_and_leaves_the_collector_on(topo_file, lab_name):
    """Loading and deploying walk none of the lab's objects (each collection walks them all); afterwards
    the collector is on, also after a file that fails its check, and still frees a cycle left as garbage."""
    collections: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        lab = Lab.from_file(topo_file(QUICKSTART))
        lab.deploy()
        try:
            assert collections == [], "a collection ran while the lab was loaded or deployed"
            assert gc.isenabled()
        finally:
            lab.destroy()
        with pytest.raises(TopologyError):
            Lab.from_file(topo_file("name: x\ntopology: {nodes: {a: {kind: nosuch}}}\n"))
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(seen)

    class Cycle:
        me: Cycle

    with gc_pause.paused():
        with gc_pause.paused():
            pass
        assert not gc.isenabled(), "an inner pause leaves the outer one to end it"
        garbage = Cycle()
        garbage.me = garbage
        gone = weakref.ref(garbage)
        del garbage
        gc.collect(0)  # asked for, a collection still runs
        assert gone() is None
        garbage = Cycle()
        garbage.me = garbage
        gone = weakref.ref(garbage)
        del garbage
    assert gc.isenabled() and gone() is not None, "what the pause made waits in the oldest generation"
    gc.collect()
    assert gone() is None


def test_nodes_are_isolated_namespaces(lab_from):
    lab = lab_from(QUICKSTART)
    h1 = lab.nodes["h1"]
    assert h1.cmd("ip -o link show | wc -l").strip() == "2"  # lo + eth1, nothing of the host's
    host_ns = subprocess.run(["readlink", "/proc/self/ns/net"], capture_output=True, text=True).stdout
    assert h1.cmd("readlink /proc/self/ns/net") != host_ns
    with pytest.raises(KeyError, match="has no interface 'eth9'.*eth1"):
        h1.intf("eth9")


def test_exec_sysctls_env(lab_from):
    # A new namespace inherits IPv4 forwarding from the machine (a Docker engine turns it on), so
    # r1 asks for the opposite of the machine's value and h1 must keep the machine's.
    machine = open("/proc/sys/net/ipv4/ip_forward").read().strip()
    wanted = "0" if machine == "1" else "1"
    lab = lab_from(
        """
name: {name}
topology:
  nodes:
    r1:
      sysctls: {net.ipv4.ip_forward: {WANTED}}
      env: {GREETING: hello}
      exec: ["echo $GREETING > /proc/self/fd/1", "ip addr add 192.0.2.7/32 dev lo"]
    h1: {env: {GREETING: other}}
  links:
    - endpoints: ["r1:eth1", "h1:eth1"]
""".replace("{WANTED}", wanted)
    )
    r1, h1 = lab.nodes["r1"], lab.nodes["h1"]
    assert r1.cmd("cat /proc/sys/net/ipv4/ip_forward").strip() == wanted
    assert h1.cmd("cat /proc/sys/net/ipv4/ip_forward").strip() == machine
    assert r1.cmd("echo $GREETING").strip() == "hello" and h1.cmd("echo $GREETING").strip() == "other"
    assert "192.0.2.7/32" in r1.cmd("ip -4 addr show lo")  # exec: ran inside r1 after deploy


def test_exit_code_passes_through(lab_from, lab_name):
    lab_from(QUICKSTART)
    assert run_cli("exec", "--lab", lab_name, "h1", "--", "sh", "-c", "exit 7").returncode == 7
    missing = run_cli("exec", "--lab", lab_name, "h1", "--", "no-such-command")
    assert missing.returncode == 127 and "command not found" in missing.stderr
    nonode = run_cli("exec", "--lab", lab_name, "h9", "--", "true")
    assert nonode.returncode == 1 and "no node or host 'h9'" in nonode.stderr


def test_shell_runs_inside_the_node(lab_from, lab_name):
    lab_from(QUICKSTART)
    result = subprocess.run(
        [sys.executable, "-m", "nestlab.cli.app", "shell", "--lab", lab_name, "h2"],
        input="hostname; ip -o -4 addr show eth1; exit 3\n",
        capture_output=True,
        text=True,
        timeout=30,
        env={"SHELL": "/bin/sh", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert result.returncode == 3
    assert result.stdout.splitlines()[0] == "h2" and "10.0.0.2/24" in result.stdout


def test_second_deploy_is_idempotent_and_reconciles(topo_file, lab_name):
    path = topo_file(QUICKSTART)
    assert run_cli("deploy", "-t", str(path)).returncode == 0
    again = run_cli("deploy", "-t", str(path))
    assert again.returncode == 0 and "nothing to change" in again.stderr
    # Grow the lab: h3 joins the bridge; h2's link is dropped.
    path.write_text(
        QUICKSTART.replace("{name}", lab_name)
        .replace("    h2: {}\n", "    h2: {}\n    h3: {}\n")
        .replace('["h2:eth1", "s1:p2"]', '["h3:eth1", "s1:p3"]')
    )
    grown = run_cli("deploy", "-t", str(path), "--format", "json")
    assert grown.returncode == 0, grown.stderr
    assert "1 nodes to create, 1 links to create" in grown.stderr and "1 links to delete" in grown.stderr
    lab = Lab.running(lab_name)
    assert "1 received" in lab.nodes["h3"].cmd("ping -c1 -W1 10.0.0.1")
    ports = lab.nodes["s1"].cmd("ip -o link show master s1")
    assert "p3" in ports and "p1" in ports and "p2" not in ports
    assert lab.nodes["h2"].cmd("ip -o link show | wc -l").strip() == "1"  # only lo is left
    assert run_cli("destroy", "-t", str(path)).returncode == 0


def test_containerlab_file_loads_and_runs(topo_file, lab_name):
    path = topo_file(
        """
name: {name}
mgmt: {network: clab, ipv4-subnet: 172.20.20.0/24}
topology:
  kinds:
    linux: {image: alpine:3}
  nodes:
    srv: {kind: linux, image: "wbitt/network-multitool:latest", exec: ["ip addr add 10.9.0.10/24 dev eth1"]}
    cli: {kind: linux, binds: ["/tmp:/tmp"]}
    br-1: {kind: bridge}
  links:
    - endpoints: ["srv:eth1", "br-1:e1"]
      ipv4: [null, null]
    - type: veth
      endpoints: [{node: cli, interface: eth1}, {node: br-1, interface: e2}]
      ipv4: ["10.9.0.2/24", null]
"""
    )
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 0, result.stderr
    assert "image: ignored" in result.stderr
    assert ":6:13: topology.kinds.linux.image" in result.stderr  # notices carry file:line:col
    assert "2 attachments to create" in result.stderr  # mgmt: srv and cli on the management network (not the bridge)
    assert run_cli("exec", "--lab", lab_name, "cli", "--", "ping", "-c1", "-W1", "10.9.0.10").returncode == 0
    assert run_cli("exec", "--lab", lab_name, "cli", "--", "ping", "-c1", "-W1", "172.20.20.1").returncode == 0
    assert "binds" not in result.stderr  # binds mount into cli's own view (docs/routers.md)


def test_running_lab_unknown_name():
    with pytest.raises(LabError, match="no lab named 'nope-nope'"):
        Lab.running("nope-nope")


def test_groups_give_nodes_their_keys_node_first(topo_file, lab_name):
    """containerlab's groups: node beats group beats kind beats defaults."""
    path = topo_file(
        """
name: {name}
topology:
  kinds:
    linux: {env: {WHO: kind}, sysctls: {net.ipv4.ip_forward: 0}}
  groups:
    routers: {kind: linux, sysctls: {net.ipv4.ip_forward: 1}, env: {WHO: group}}
    switches: {kind: bridge}
  nodes:
    r1: {group: routers}
    r2: {group: routers, env: {WHO: node}}
    h1: {}
    s1: {group: switches}
  links:
    - endpoints: [r1:eth1, s1:p1]
    - endpoints: [r2:eth1, s1:p2]
"""
    )
    lab = Lab.from_file(path)
    plan = lab.plan
    assert plan.nodes["s1"].kind == "bridge"
    assert (
        dict(plan.nodes["r1"].sysctls)["net.ipv4.ip_forward"] == "1"
        and dict(plan.nodes["h1"].sysctls)["net.ipv4.ip_forward"] == "0"
    )
    assert (
        dict(plan.nodes["r1"].env)["WHO"] == "group"
        and dict(plan.nodes["r2"].env)["WHO"] == "node"
        and dict(plan.nodes["h1"].env)["WHO"] == "kind"
    )
    with lab.deployed():
        assert lab.nodes["r1"].cmd("cat /proc/sys/net/ipv4/ip_forward").strip() == "1"
        assert "1 received" in lab.nodes["r1"].cmd(f"ping -c1 -W1 {lab.nodes['r2'].intf('eth1').ip}")


def test_a_group_no_groups_entry_defines_is_a_name_only(topo_file, lab_name):
    """As containerlab: `group:` is a node's group name (inspect, inventories); only `groups:` entries give keys."""
    path = topo_file(
        "name: {name}\ntopology:\n  groups: {spines: {env: {ROLE: spine}}}\n  nodes:\n"
        "    a: {group: leaves}\n    b: {group: spines}\n"
    )
    try:
        assert run_cli("deploy", "-t", str(path)).returncode == 0
        assert run_cli("exec", "--lab", lab_name, "b", "--", "sh", "-c", "echo $ROLE").stdout.strip() == "spine"
        assert run_cli("exec", "--lab", lab_name, "a", "--", "sh", "-c", "echo ${ROLE:-none}").stdout.strip() == "none"
    finally:
        run_cli("destroy", "--lab", lab_name)

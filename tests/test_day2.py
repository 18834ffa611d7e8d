"""Day-2 work on a running lab: nodes stopped and started with their links kept (traffic reroutes, OSPF
comes back), components alone or with their node, containerlab's stop/start/restart, destroy by name."""

from __future__ import annotations

import json
import os
import time

from conftest import run_cli

from nestlab import names
from nestlab.backends.kernel import namespaces

EXAMPLE = "examples/node-stop.yml"
LAB = "node-stop"


def _wait(check, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def _in(node: str, *cmd: str, lab: str = LAB) -> str:
    return run_cli("exec", "--lab", lab, node, "--", *cmd).stdout


def _pids(lab: str, node: str) -> list[int]:
    return namespaces.pids_in({namespaces.inode(names.netns_path(lab, node))})


def _full(router: str) -> int:
    neighbors = json.loads(_in(router, "vtysh", "-c", "show ip ospf neighbor json") or "{}").get("neighbors", {})
    return sum(1 for entries in neighbors.values() for n in entries if n.get("nbrState", "").startswith("Full"))


def _states(lab: str) -> dict[str, str]:
    found = json.loads(run_cli("inspect", "--lab", lab, "--format", "json").stdout)
    return {n["name"]: n["state"] for n in found["nodes"]}


def test_stopped_router_reroutes_traffic_and_comes_back_with_ospf_full():
    deployed = run_cli("deploy", "-t", EXAMPLE, timeout=120)
    try:
        assert deployed.returncode == 0, deployed.stderr
        assert _wait(lambda: _full("r1") == 2 and _full("r3") == 2, 60), _in("r1", "vtysh", "-c", "show ip ospf neighbor")
        assert _wait(lambda: "10.0.12.2" in _in("r1", "ip", "route", "show", "10.3.3.0/24"), 20)
        # h1 carries an IPv6 address and a static route of its own: both must outlive a stop.
        assert (
            run_cli("exec", "--lab", LAB, "h1", "--", "ip", "addr", "add", "fd00:1::10/64", "dev", "eth1", "nodad").returncode
            == 0
        )
        assert run_cli("exec", "--lab", LAB, "h1", "--", "ip", "route", "add", "10.77.0.0/16", "via", "10.1.1.1").returncode == 0

        stopped = run_cli("node", "stop", "--lab", LAB, "r2", "h1")
        assert stopped.returncode == 0 and "stopped r2, h1" in stopped.stderr, stopped.stderr
        assert _pids(LAB, "r2") == [], "FRR and everything else in r2 ended"
        assert "NO-CARRIER" in _in("r1", "ip", "link", "show", "eth1"), "r2's peer sees its carrier go"
        assert "10.0.12.2/24" in _in("r2", "ip", "-br", "addr"), "addresses are kept"
        assert _states(LAB)["r2"] == "stopped"
        clab = json.loads(run_cli("clab", "inspect", "--name", LAB, "--format", "json").stdout)[LAB]
        assert {c["name"]: c["state"] for c in clab}["clab-node-stop-r2"] == "exited"
        # r1 goes round through r4 now; h2's host behind r3 still answers r1.
        rerouted = lambda: _in("r1", "ip", "route", "show", "10.3.3.0/24")  # noqa: E731
        assert _wait(lambda: "10.0.12.2" not in rerouted() and "via 10.0.14.4" in rerouted(), 15), rerouted()
        # r3's way back to r1 changes when its own SPF runs, a moment after r1's (OSPF throttles SPF)
        assert _wait(lambda: "1 received" in _in("r1", "ping", "-c1", "-W1", "10.3.3.10"), 15), rerouted()

        again = run_cli("node", "stop", "--lab", LAB, "r2")
        assert again.returncode == 0 and "already stopped" in again.stderr, again.stderr

        started = run_cli("node", "start", "--lab", LAB, "r2", "h1")
        assert started.returncode == 0 and "started r2, h1" in started.stderr, started.stderr
        assert "fd00:1::10/64" in _in("h1", "ip", "-br", "addr"), "the IPv6 address the kernel dropped is back"
        assert "10.77.0.0/16 via 10.1.1.1" in _in("h1", "ip", "route"), "and the route it was given"
        assert "default via 10.1.1.1" in _in("h1", "ip", "route")
        assert _wait(lambda: _full("r2") == 2, 60), _in("r2", "vtysh", "-c", "show ip ospf neighbor")
        assert _wait(lambda: "10.0.12.2" in _in("r1", "ip", "route", "show", "10.3.3.0/24"), 60), (
            "r2 carries traffic again: "
            + _in("r1", "ip", "route", "show", "10.3.3.0/24")
            + _in("r1", "vtysh", "-c", "show ip route 10.3.3.0/24")
            + _in("r1", "vtysh", "-c", "show ip ospf neighbor")
        )
        assert _wait(lambda: "1 received" in _in("h1", "ping", "-c1", "-W1", "10.3.3.10"), 10)
        assert set(_states(LAB).values()) == {"running"}

        restarted = run_cli("clab", "restart", "--name", LAB, "--node", "r3,h2")
        assert restarted.returncode == 0 and "restarted r3, h2" in restarted.stderr, restarted.stderr
        assert _wait(lambda: _full("r3") == 2, 60)
        assert _wait(lambda: "1 received" in _in("h1", "ping", "-c1", "-W1", "10.3.3.10"), 20)
        events = run_cli("events", "--lab", LAB, "--since", "0", "--format", "json", "-d", "1").stdout
        assert '"action": "stop"' in events and '"action": "start"' in events, events[-500:]
    finally:
        run_cli("destroy", "--lab", LAB)


def test_a_component_stops_alone_or_with_its_node(lab_from):
    lab = lab_from(
        "name: {name}\ntopology:\n  nodes:\n"
        "    n1:\n      components:\n        c1: {}\n        c2: {}\n"
        "    n2: {}\n"
        "  links:\n"
        '    - {endpoints: ["n1/c1:eth1", "n2:eth1"], ipv4: ["10.5.0.1/24", "10.5.0.2/24"]}\n'
    )
    sleeper = lab.nodes["n1/c2"].popen("sleep 600")
    try:
        assert run_cli("node", "stop", "--lab", lab.name, "n1/c1").returncode == 0
        assert "NO-CARRIER" in lab.nodes["n2"].cmd("ip link show eth1")
        assert sleeper.poll() is None, "a component stopped alone leaves its siblings running"
        assert run_cli("node", "start", "--lab", lab.name, "n1/c1").returncode == 0
        assert _wait(lambda: "1 received" in lab.nodes["n2"].cmd("ping -c1 -W1 10.5.0.1"), 10)
        both = run_cli("node", "stop", "--lab", lab.name, "n1")
        assert both.returncode == 0 and "n1/c1" in both.stderr and "n1/c2" in both.stderr, both.stderr
        assert _wait(lambda: sleeper.poll() is not None, 5), "the whole node's processes end"
        assert {n: s for n, s in _states(lab.name).items() if n.startswith("n1")} == dict.fromkeys(
            ["n1", "n1/c1", "n1/c2"], "stopped"
        )
        assert run_cli("node", "start", "--lab", lab.name, "n1").returncode == 0
        assert _wait(lambda: "1 received" in lab.nodes["n2"].cmd("ping -c1 -W1 10.5.0.1"), 10)
        assert "hello" in lab.nodes["n1/c2"].cmd("echo hello"), "a component's init stayed: it runs commands again"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_started_node_tells_its_peers_it_is_back(lab_from):
    """A peer that tried the stopped node holds a neighbour entry for it that is pending, failed or stale;
    the node, once started, announces itself (a gratuitous ARP), so the peer's next packet goes at once to
    the right address rather than failing while its probes run out.  Here the peer's entry is a wrong
    address, which nothing but the announcement would correct within 5 s."""
    lab = lab_from(
        "name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n"
        '    - {endpoints: ["a:eth1", "b:eth1"], ipv4: ["10.5.1.1/24", "10.5.1.2/24"]}\n'
    )
    mac = lab.nodes["a"].cmd("ip -o link show eth1").split("link/ether ")[1].split()[0]
    assert run_cli("node", "stop", "--lab", lab.name, "a").returncode == 0
    # the kernel flushes b's neighbours once it has seen its carrier go (linkwatch, up to a second later): after that
    assert _wait(lambda: "state DOWN" in lab.nodes["b"].cmd("ip link show eth1"), 5, 0.05)
    lab.nodes["b"].cmd("ip neigh replace 10.5.1.1 lladdr 02:00:00:00:00:01 dev eth1 nud stale")
    assert run_cli("node", "start", "--lab", lab.name, "a").returncode == 0
    assert f"lladdr {mac}" in lab.nodes["b"].cmd("ip neigh show 10.5.1.1")
    assert "1 received" in lab.nodes["b"].cmd("ping -c1 -W1 10.5.1.1")
    assert lab.nodes["a"].cmd("cat /proc/sys/net/ipv4/conf/all/arp_notify").strip() == "0", "the setting is put back"


def test_unknown_node_is_refused_before_anything_stops(lab_from):
    lab = lab_from("name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n")
    refused = run_cli("node", "stop", "--lab", lab.name, "a", "ghost")
    assert refused.returncode == 1 and "ghost is not a node of it" in refused.stderr, refused.stderr
    assert _states(lab.name)["a"] == "running"


def test_destroy_by_file_needs_only_its_name(topo_file, lab_name, tmp_path):
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n")
    assert run_cli("deploy", "-t", str(path)).returncode == 0
    # The file no longer checks (a link to a node it does not have).
    path.write_text(path.read_text() + '    - {endpoints: ["a:eth2", "gone:eth1"]}\n')
    assert run_cli("deploy", "-t", str(path)).returncode != 0
    destroyed = run_cli("destroy", "-t", str(path))
    assert destroyed.returncode == 0 and f"lab {lab_name}: removed 2 namespaces" in destroyed.stderr, destroyed.stderr
    assert not os.path.exists(names.lab_dir(lab_name))
    nameless = tmp_path / "nameless.yml"
    nameless.write_text("topology:\n  nodes: {a: {}}\n")
    refused = run_cli("destroy", "-t", str(nameless))
    assert refused.returncode == 2 and "nameless.yml:1:1" in refused.stderr and "needs a name" in refused.stderr, refused.stderr


def test_dry_run_lists_exactly_what_the_next_deploy_changes(topo_file, lab_name):
    from nestlab.lab.lab import Lab

    base = (
        "name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n    c: {}\n  links:\n"
        '    - {endpoints: ["a:eth1", "b:eth1"]}\n'
        '    - {endpoints: ["b:eth2", "c:eth1"], params: {rate: 10mbit}}\n'
    )
    first = topo_file(base, "first.yml")
    assert run_cli("deploy", "-t", str(first)).returncode == 0
    changed = base.replace("    c: {}\n", "    d: {}\n").replace('"c:eth1"]', '"d:eth1"]').replace("10mbit", "20mbit")
    changed = changed.replace('["a:eth1", "b:eth1"]}', '["a:eth1", "b:eth1"], mtu: 9000}')
    changed = changed + '    - {endpoints: ["a:eth2", "b:eth3"], params: {rate: 5mbit}}\n'
    second = topo_file(changed, "second.yml")
    dry = run_cli("deploy", "-t", str(second), "--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    said = {(c["what"], c["name"], c["action"]): c["why"] for c in json.loads(dry.stdout)["changes"]}
    assert said[("link", "a:eth1=b:eth1", "recreate")] == "mtu none -> 9000", said
    assert os.path.exists(names.netns_path(lab_name, "c")) and not os.path.exists(names.netns_path(lab_name, "d")), (
        "nothing changed"
    )

    changes = Lab.from_file(second).deploy().changes
    done = {("node", n.name) for n in changes.add_nodes + changes.del_nodes}
    done |= {("link", x.key) for x in changes.add_links + changes.del_links + changes.reshape}
    assert {(what, name) for what, name, _ in said} == done, (said, done)
    recreated = {x.key for x in changes.add_links} & {x.key for x in changes.del_links}
    assert {name for what, name, action in said if action == "recreate"} == recreated
    assert run_cli("deploy", "-t", str(second), "--dry-run").stderr.strip().endswith("nothing to change; nothing was changed")


def test_validate_checks_everything_deploy_checks_and_makes_nothing(topo_file, lab_name):
    good = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n    - endpoints: [a:eth1, b:eth1]\n")
    ok = run_cli("validate", "-t", str(good))
    assert ok.returncode == 0 and f"lab {lab_name} is valid" in ok.stderr, ok.stderr
    pinned = topo_file("name: {name}\ntopology:\n  nodes:\n    a: {server: s9}\n", "pinned.yml")
    refused = run_cli("validate", "-t", str(pinned))
    assert refused.returncode == 2 and "pinned.yml:4:" in refused.stderr and "server 's9'" in refused.stderr, refused.stderr
    clash = topo_file(
        "name: {name}\ntopology:\n  nodes:\n    a: {}\n    b: {}\n  links:\n"
        '    - {endpoints: [a:eth1, b:eth1], ipv4: ["10.1.0.1/24", "10.1.0.1/24"]}\n',
        "clash.yml",
    )
    refused = run_cli("validate", "-t", str(clash))
    assert refused.returncode == 2 and "clash.yml:" in refused.stderr, refused.stderr
    assert not os.path.exists(names.lab_dir(lab_name)), "validate makes nothing"

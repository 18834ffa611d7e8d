"""Routers and filesystem views: FRR in nodes (OSPF, BGP), binds, save; each node's /etc/frr and /run/frr its own."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from nestlab import names
from nestlab.backends.kernel import views
from nestlab.lab.lab import Lab

pytestmark = pytest.mark.skipif(not shutil.which("vtysh"), reason="needs Debian's frr package (make deps installs it)")


def _ospf_lab(text: str) -> str:
    return text.replace("name: frr-ospf", "name: {name}")


def _wait(what, timeout: float = 60.0, step: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def _full(lab: Lab, router: str) -> int:
    out = lab.nodes[router].cmd("vtysh -c 'show ip ospf neighbor json'")
    try:
        neighbors = json.loads(out).get("neighbors", {})
    except json.JSONDecodeError:
        return 0
    return sum(1 for entries in neighbors.values() for n in entries if n.get("state", n.get("nbrState", "")).startswith("Full"))


def test_ospf_triangle_converges_routes_reroutes_and_saves(topo_file, tmp_path):
    (tmp_path / "frr-ospf").mkdir()
    for conf in (ROOT / "examples" / "frr-ospf").iterdir():
        shutil.copy(conf, tmp_path / "frr-ospf" / conf.name)
    lab = Lab.from_file(topo_file(_ospf_lab((ROOT / "examples" / "frr-ospf.yml").read_text())))
    lab.deploy()
    try:
        assert all(_wait(lambda r=r: _full(lab, r) == 2) for r in ("r1", "r2", "r3")), [_full(lab, r) for r in ("r1", "r2", "r3")]
        assert _wait(lambda: "1 received" in lab.nodes["h1"].cmd("ping -c1 -W1 10.3.3.10"), 30), (
            "h1 reaches h2 across two routers"
        )
        # The direct r1-r3 link, once SPF has run with every adjacency Full (the route may pass r2 a moment before).
        assert _wait(lambda: "via 10.0.13.3" in lab.nodes["r1"].cmd("ip route get 10.3.3.10"), 10), lab.nodes["r1"].cmd(
            "ip route"
        )
        # Cut r1-r3: OSPF (dead interval 4 s) must reroute through r2.
        t0 = time.monotonic()
        lab.link("r1:eth2", "r3:eth2").set(state="down")
        assert _wait(lambda: "via 10.0.12.2" in lab.nodes["r1"].cmd("ip route get 10.3.3.10"), 15), lab.nodes["r1"].cmd(
            "ip route"
        )
        took = time.monotonic() - t0
        # Usually 0.2-0.5 s (the interface goes down, OSPF recomputes); up to 10 s was seen under load.
        assert took < 12, f"rerouted after {took:.1f} s (dead interval 4 s, SPF hold at most 0.5 s)"
        assert _wait(lambda: "1 received" in lab.nodes["h1"].cmd("ping -c1 -W1 10.3.3.10"), 15)
        # Each router sees its own configuration and runtime folder.
        assert "hostname r1" in lab.nodes["r1"].cmd("cat /etc/frr/frr.conf")
        assert "hostname r2" in lab.nodes["r2"].cmd("cat /etc/frr/frr.conf")
        pids = {r: lab.nodes[r].cmd("cat /run/frr/zebra.pid").strip() for r in ("r1", "r2")}
        assert pids["r1"] and pids["r2"] and pids["r1"] != pids["r2"], pids
        assert "zebra.pid" not in lab.nodes["h1"].cmd("ls /run/frr 2>&1"), "a plain node keeps the machine's /run"
        # save: the running configuration (with a change made live) back into the lab folder and --to.
        lab.nodes["r2"].cmd("vtysh -c 'conf t' -c 'router ospf' -c 'auto-cost reference-bandwidth 1000'")
        saved = run_cli("save", "--lab", lab.name, "--to", str(tmp_path / "saved"))
        assert saved.returncode == 0, saved.stderr
        assert "auto-cost reference-bandwidth 1000" in (tmp_path / "saved" / "r2" / "frr.conf").read_text()
        assert "auto-cost reference-bandwidth 1000" in lab.nodes["r2"].cmd("cat /etc/frr/frr.conf")
        assert "hostname r3" in (tmp_path / "saved" / "r3" / "frr.conf").read_text()
    finally:
        lab.destroy()
    assert not Path(names.node_dir(lab.name, "r1")).exists()


def test_bgp_ring_example_announces_across(tmp_path, topo_file):
    lab = Lab.from_file(topo_file((ROOT / "examples" / "frr-bgp.yml").read_text().replace("name: frr-bgp", "name: {name}")))
    lab.deploy()
    try:
        assert _wait(lambda: "1 received" in lab.nodes["h1"].cmd("ping -c1 -W1 192.168.3.10"), 60), lab.nodes["r1"].cmd(
            "vtysh -c 'show bgp summary'"
        )
        routes = lab.nodes["r2"].cmd("vtysh -c 'show ip bgp json'")
        assert "192.168.1.0/24" in routes and "192.168.3.0/24" in routes
    finally:
        lab.destroy()


def test_a_path_below_an_earlier_bound_folder_is_looked_for_in_its_source(tmp_path):
    """What the view shows below a bound folder is that folder's source: a router's file bound into its own
    /etc/frr needs no root of the node's own (an ordinary user may not read the machine's /etc/frr at all), a
    path the source lacks does, even where the machine has it."""
    own = tmp_path / "share"
    own.mkdir()
    (own / "daemons").write_text("")
    binds = [(str(own), "/usr/share", False), (str(tmp_path / "daemons"), "/usr/share/daemons", False)]
    assert not views.needs_own_root(binds)
    assert views.needs_own_root([*binds, (str(own), "/usr/share/doc", False)])  # the machine's, not the view's


def test_binds_give_a_node_its_own_files(lab_from, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("hello from a\n")
    (tmp_path / "motd").write_text("node b\n")
    lab = lab_from(
        "name: {name}\ntopology:\n  nodes:\n"
        "    a: {binds: ['site:/run/www:ro']}\n"
        "    b: {binds: ['motd:/tmp/motd']}\n"
        "    c: {}\n"
        "    d: {binds: ['motd:/etc/nestlab-nowhere/motd']}\n"
        "  links: [{endpoints: [a:eth1, b:eth1]}]\n"
    )
    assert lab.nodes["a"].cmd("cat /run/www/index.html") == "hello from a\n"
    assert "Read-only" in lab.nodes["a"].cmd("touch /run/www/x 2>&1")
    assert lab.nodes["b"].cmd("cat /tmp/motd") == "node b\n"
    lab.nodes["b"].cmd("echo mine > /tmp/scratch")
    assert "No such file" in lab.nodes["a"].cmd("cat /tmp/scratch 2>&1"), "each view has its own /tmp"
    assert not Path("/tmp/scratch").exists() and not Path("/run/www").exists(), "nothing reaches the machine"
    assert "nestlab" not in lab.nodes["c"].cmd("findmnt -n -o FSTYPE /tmp || true"), (
        "a node without binds keeps the machine's /tmp"
    )
    # A path the machine lacks: the node gets a root of its own, the machine's files under a layer of the node's.
    assert lab.nodes["d"].cmd("cat /etc/nestlab-nowhere/motd") == "node b\n"
    lab.nodes["d"].cmd("echo mine > /etc/nestlab-scratch")
    assert lab.nodes["d"].cmd("cat /etc/nestlab-scratch") == "mine\n" and not Path("/etc/nestlab-scratch").exists()
    assert not Path("/etc/nestlab-nowhere").exists() and "No such file" in lab.nodes["c"].cmd(
        "cat /etc/nestlab-nowhere/motd 2>&1"
    )
    assert lab.nodes["d"].cmd("findmnt -n -o FSTYPE /") == "overlay\n" and "1 received" in lab.nodes["d"].cmd(
        "ping -c1 -W1 127.0.0.1"
    )


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ("{binds: ['missing:/tmp/x']}", "bind source 'missing' does not exist"),
        ("{binds: ['lab.yml:/proc']}", "is not allowed"),
        ("{binds: ['lab.yml']}", "is not src:dst"),
        ("{kind: frr, startup-config: r9.conf}", "startup-config 'r9.conf' does not exist"),
    ],
)
def test_bad_binds_are_clear_errors_and_create_nothing(topo_file, node, message):
    path = topo_file("name: {name}\ntopology:\n  nodes:\n    a: " + node + "\n")
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr and "lab.yml:4:" in result.stderr, result.stderr


def test_containerlab_frr_image_runs_as_a_router(lab_from):
    lab = lab_from("name: {name}\ntopology:\n  nodes:\n    r1: {kind: linux, image: 'frrouting/frr:v8.4.1'}\n")
    assert lab.plan.nodes["r1"].router == "frr"
    assert "runs as kind: frr" in " ".join(n.message for n in lab.notices)
    assert _wait(lambda: "zebra" in lab.nodes["r1"].cmd("vtysh -c 'show daemons'"), 20)


def test_containerlab_frr01_example_runs_unchanged():
    """containerlab's own FRR example (groups, frrouting/frr and network-multitool images, binds of
    daemons and frr.conf, exec on the PCs), as published: it deploys, OSPF converges, PCs reach each other."""
    lab = Lab.from_file(ROOT / "tests" / "fixtures" / "clab-frr01" / "frr01.clab.yml")
    notes = " ".join(n.message for n in lab.notices)
    assert notes.count("runs as kind: frr") == 3
    lab.deploy()
    try:
        # Broadcast links: DR election waits one dead interval (40 s by default) before going Full.
        assert _wait(lambda: "2 received" in lab.nodes["PC1"].cmd("ping -c2 -W1 192.168.13.2"), 120), lab.nodes["router1"].cmd(
            "vtysh -c 'show ip ospf neighbor'"
        )
        assert _wait(lambda: "2 received" in lab.nodes["PC2"].cmd("ping -c2 -W1 192.168.11.2"), 60)
        assert "ldpd" in lab.nodes["router1"].cmd("vtysh -c 'show daemons'"), "its own daemons file is used"
    finally:
        lab.destroy(folder_too=True)

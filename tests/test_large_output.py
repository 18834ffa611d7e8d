"""Large labs read well: deploy ends with a summary, inspect picks nodes and pages."""

from __future__ import annotations

import json
import os

from conftest import run_cli

from nestlab import names
from nestlab.backends.kernel import namespaces, rtdump

STAR = (
    "name: {name}\ntopology:\n  nodes:\n    sw: {kind: bridge}\n"
    + "".join(f"    h{i}: {{}}\n" for i in range(60))
    + "  links:\n"
    + "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(60))
)


def test_deploy_summarises_and_inspect_picks_and_pages(topo_file, lab_name):
    path = topo_file(STAR)
    deployed = run_cli("deploy", "-t", str(path), check=True)
    assert f"lab {lab_name}: 61 namespaces (60 linux, 1 bridge); 60 links (60 veth)" in deployed.stdout
    assert f"nestlab inspect --lab {lab_name}" in deployed.stdout and "┃" not in deployed.stdout, "no 120-row table for 61 nodes"
    one = json.loads(run_cli("inspect", "--lab", lab_name, "--node", "h7", "--format", "json", check=True).stdout)
    assert [n["name"] for n in one["nodes"]] == ["h7"] and one["nodes"][0]["interfaces"][0]["name"] == "eth1"
    some = json.loads(run_cli("inspect", "--lab", lab_name, "--filter", "h1?", "--format", "json", check=True).stdout)
    assert sorted(n["name"] for n in some["nodes"]) == [f"h{i}" for i in range(10, 20)]
    first = run_cli("inspect", "--lab", lab_name, check=True)
    assert "page 1 of 2 (50 nodes a page): --page 2 for more" in first.stderr
    # The switch's 61 interfaces (itself and 60 ports): 11 rows and a count, all of them with --node.
    assert "... 50 more" in first.stdout and "(--node sw lists them all)" in first.stdout and " p9 " in first.stdout
    assert " p10 " not in first.stdout and " p59 " in run_cli("inspect", "--lab", lab_name, "--node", "sw", check=True).stdout
    second = run_cli("inspect", "--lab", lab_name, "--page", "2", check=True)
    assert "h59" in second.stdout and "h5 " not in second.stdout
    assert "no node of lab" in run_cli("inspect", "--lab", lab_name, "--filter", "zz*").stderr
    assert run_cli("inspect", "--lab", lab_name, "--node", "nope").returncode == 1
    run_cli("destroy", "--lab", lab_name, check=True)


def test_small_lab_deploy_still_shows_its_table(topo_file, lab_name):
    path = topo_file("name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links: [{endpoints: [a:eth1, b:eth1]}]\n")
    deployed = run_cli("deploy", "-t", str(path), check=True)
    assert "2 namespaces (2 linux)" in deployed.stdout and "eth1" in deployed.stdout and "┃" in deployed.stdout
    run_cli("destroy", "--lab", lab_name, check=True)


def _star(n: int) -> str:
    return (
        "name: {name}\nipv4_pool: 10.64.0.0/10\ntopology:\n  nodes:\n    sw: {kind: bridge}\n"
        + "".join(f"    h{i}: {{}}\n" for i in range(n))
        + "  links:\n"
        + "".join(f'    - endpoints: ["h{i}:eth1", "sw:p{i}"]\n' for i in range(n))
    )


def test_batches_larger_than_one_sendmsg_deploy_whole(lab_from):
    """300 ports: the bridge's veths, lookups and addresses go out in several batches of at most 256 messages."""
    lab = lab_from(_star(300))
    states = {}
    for i in range(300):  # read at once, by dump (which, unlike a single lookup, does not hurry the kernel along)
        fd, nl = namespaces.open_netlink(names.netns_path(lab.name, f"h{i}"))
        try:
            states[f"h{i}"] = {link.name: link.state for link in rtdump.interfaces(nl, counters=False)}["eth1"]
        finally:
            nl.close()
            os.close(fd)
    assert {n for n, state in states.items() if state != "UP"} == set(), "deploy returns when every interface carries traffic"
    assert lab.nodes["h299"].cmd(f"ping -c1 -W2 {lab.nodes['h0'].intf('eth1').ip}").count("1 received") == 1
    assert lab.nodes["h150"].intf("eth1").ip != lab.nodes["h151"].intf("eth1").ip


def test_a_bridge_past_1024_ports_is_refused_clearly(topo_file):
    result = run_cli("deploy", "-t", str(topo_file(_star(1030))))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "a Linux bridge takes at most 1024 ports" in result.stderr and "nothing was left behind" in result.stderr, (
        result.stderr[-500:]
    )

"""Bad topologies: each gives one clear error with file:line:col, exit code 2, and creates nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, leftovers, root_links, run_cli

from nestlab import Lab, TopologyError

GOOD_HEAD = """name: {name}
topology:
  nodes:
    h1: {}
    h2: {}
"""

CASES = {
    "unknown key": (
        GOOD_HEAD.replace("h2: {}", "h2: {knd: linux}") + "  links: []\n",
        ":5:10: topology.nodes.h2.knd: unknown key 'knd'; allowed here: kind, exec, sysctls, env",
    ),
    "unknown kind": (
        GOOD_HEAD.replace("h2: {}", "h2: {kind: router}"),
        ":5:16: topology.nodes.h2.kind: input should be 'bridge', 'frr', 'host', 'iperf3', 'linux', 'ovs' or 'wireless' (got 'router')",
    ),
    "duplicate node": (
        GOOD_HEAD + "    h1: {}\n",
        ":6:5: topology.nodes.h1: duplicate key 'h1'",
    ),
    "link to a missing node": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:eth1", "h3:eth1"]\n',
        ":7:30: topology.links[0].endpoints[1]: node 'h3' is not defined under topology.nodes (defined: h1, h2)",
    ),
    "interface name too long": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:averyveryverylongname", "h2:eth1"]\n',
        ":7:19: topology.links[0].endpoints[0]: interface name 'averyveryverylongname' must be 1-15 characters",
    ),
    "address conflict": (
        GOOD_HEAD
        + '    h3: {}\n  links:\n    - endpoints: ["h1:eth1", "h2:eth1"]\n      ipv4: ["10.1.0.1/24", "10.1.0.2/24"]\n'
        + '    - endpoints: ["h3:eth1", "h1:eth2"]\n      ipv4: ["10.1.0.2/24", null]\n',
        ":11:14: topology.links[1].ipv4[0]: address 10.1.0.2 is already assigned by topology.links[0]",
    ),
    "endpoint used twice": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:eth1", "h2:eth1"]\n    - endpoints: ["h1:eth1", "h2:eth2"]\n',
        ":8:19: topology.links[1].endpoints[0]: endpoint 'h1:eth1' is already used by topology.links[0]",
    ),
    "malformed YAML": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:eth1", "h2:eth1"\n',
        "malformed YAML",
    ),
    "bad address": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:eth1", "h2:eth1"]\n      ipv4: ["10.0.0.300/24", null]\n',
        ":8:14: topology.links[0].ipv4[0]: '10.0.0.300/24' is not an address with a prefix length",
    ),
    "address without prefix": (
        GOOD_HEAD + '  links:\n    - endpoints: ["h1:eth1", "h2:eth1"]\n      ipv4: ["10.0.0.3", null]\n',
        "'10.0.0.3' needs a prefix length, e.g. 10.0.0.3/24",
    ),
    "non-net sysctl": (
        GOOD_HEAD.replace("h2: {}", "h2: {sysctls: {kernel.pid_max: 10}}"),
        "'kernel.pid_max' is not per-namespace; a node or host may set only net.* sysctls",
    ),
    "missing name": (
        "topology:\n  nodes: {h1: {}}\n",
        ":1:1: name: 'name' is required",
    ),
    "address on a bridge port": (
        GOOD_HEAD
        + '    s1: {kind: bridge}\n  links:\n    - endpoints: ["h1:eth1", "s1:p1"]\n      ipv4: [null, "10.0.0.5/24"]\n',
        "'s1:p1' is a switch port and cannot hold an address; use null",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_topology_is_refused(case, topo_file):
    text, expected = CASES[case]
    before = root_links()
    path = topo_file(text)
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr
    assert expected in result.stderr, result.stderr
    assert leftovers() == [] and root_links() == before


def test_malformed_yaml_points_at_the_line(topo_file):
    path = topo_file(GOOD_HEAD + "  links:\n    - endpoints: [h1:eth1\n  oops\n")
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and f"{path}:9:" in result.stderr, result.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    result = run_cli("deploy", "-t", str(tmp_path / "nope.yml"))
    assert result.returncode == 2 and "cannot read the topology file" in result.stderr


def test_the_cli_starts_without_importing_pyroute2():
    """pyroute2 costs every CLI call 0.2 s to import (a minute in the VM tier); only the commands that use it may pay."""
    code = (
        "import importlib, sys\n"
        "from nestlab.cli.app import COMMANDS\n"
        "for module, _ in COMMANDS.values(): importlib.import_module('nestlab.cli.' + module)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyroute2'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def test_python_api_errors_name_the_path(lab_name):
    lab = Lab(lab_name)
    lab.add_node("h1")
    with pytest.raises(TopologyError, match=r"topology.links\[0\].endpoints\[1\]: node 'zz' is not defined"):
        lab.add_link("h1:eth1", "zz:eth1")
    assert list(lab.nodes) == ["h1"]  # a refused change leaves the lab as it was


MODE_CASES = {
    "veth across hosts": (
        'hosts: {a: {}, b: {}}\ntopology:\n  nodes: {x: {host: a}, y: {host: b}}\n  links:\n    - endpoints: ["x:e1", "y:e1"]\n',
        ":6:18: topology.links[0].endpoints: x is on host a and y on b: a veth link cannot cross hosts",
    ),
    "macvlan without parent": (
        'topology:\n  nodes: {x: {}}\n  links:\n    - endpoints: ["x:e1"]\n      mode: macvlan\n',
        ":6:13: topology.links[0].mode: mode: macvlan needs parent: HOST:NIC",
    ),
    "parent on another host": (
        (
            'hosts: {a: {}, b: {}}\nwires: [{endpoints: ["a:n0", "b:n0"]}]\ntopology:\n  nodes: {x: {host: a}}\n'
            '  links:\n    - endpoints: ["x:e1"]\n      mode: macvlan\n      parent: b:n0\n'
        ),
        ":9:15: topology.links[0].parent: x runs on host a; its parent must be a NIC of that host, not of b",
    ),
    "undeclared NIC": (
        'hosts: {a: {}}\ntopology:\n  nodes: {x: {host: a}}\n  links:\n    - endpoints: ["x:e1"]\n      mode: macvlan\n      parent: a:eth0\n',
        "'a:eth0' is not a NIC of a wire (NICs of a: none); to use a real interface of this machine write parent: IFACE with allow_host_interfaces: true",
    ),
    "option of another mode": (
        'topology:\n  nodes: {x: {}}\n  links:\n    - endpoints: ["x:e1"]\n      mode: bridge\n      macvlan_mode: private\n',
        ":7:21: topology.links[0].macvlan_mode: 'macvlan_mode' applies to mode: macvlan links only (this link is mode: bridge)",
    ),
    "vxlan on one host": (
        'topology:\n  nodes: {x: {}, y: {}}\n  links:\n    - endpoints: ["x:e1", "y:e1"]\n      mode: vxlan\n',
        "a vxlan overlay joins nodes on different hosts; x and y are both on local (use veth)",
    ),
    "unknown host": (
        "topology:\n  nodes: {x: {host: mars}}\n",
        ":3:21: topology.nodes.x.host: host 'mars' is not declared under hosts: (declared: none; declare them under hosts:)",
    ),
    "nat with an uplink": (
        'topology:\n  nodes: {x: {}}\n  links:\n    - endpoints: ["x:e1"]\n      mode: bridge\n      nat: true\n      parent: nic0\n',
        ":7:12: topology.links[0].nat: nat: true routes out of the host's NICs; it cannot also bridge a NIC",
    ),
    "bridge on a real interface": (
        'allow_host_interfaces: true\ntopology:\n  nodes: {x: {}}\n  links:\n    - endpoints: ["x:e1"]\n      mode: bridge\n      parent: eth0\n',
        "bridge mode on a real interface would re-plumb this machine's own network",
    ),
    "bad wire rate": (
        'hosts: {a: {}, b: {}}\nwires:\n  - endpoints: ["a:n0", "b:n0"]\n    params: {rate: fast}\ntopology: {nodes: {}}\n',
        ":5:20: wires[0].params.rate: 'fast' is not a rate such as 100mbit, 10gbit or 1.5gbit",
    ),
}


@pytest.mark.parametrize("body,expected", list(MODE_CASES.values()), ids=list(MODE_CASES))
def test_bad_mode_use_is_refused(topo_file, body, expected):
    path = topo_file("name: {name}\n" + body)
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    "entry,expected",
    [
        ('{at: 1s, node: a, link: ["a:e1", "b:e1"], action: stop}', "give either link: [A, B] or node: NAME"),
        ('{at: soon, link: ["a:e1", "b:e1"], state: down}', "'soon' is not a time such as 20ms, 1.5s or 500us"),
        ('{at: 1s, link: ["a:e1", "b:e1"]}', "say what happens to the link: set:, state: or action:"),
        ('{at: 1s, link: ["a:e1", "b:e1"], set: {rate: 1mbit, jiter: 1ms}}', "unknown key 'jiter'"),
        ('{at: 1s, link: ["a:e1", "c:e9"], state: down}', "no link of the file joins a:e1 and c:e9"),
        ("{at: 1s, node: c, action: stop}", "node 'c' is not under topology.nodes"),
    ],
)
def test_bad_schedule_is_refused(topo_file, entry, expected):
    path = topo_file(
        'name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links: [{endpoints: ["a:e1", "b:e1"]}]\nschedule:\n  - '
        + entry
        + "\n"
    )
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and ":6:" in result.stderr and expected in result.stderr, result.stderr

"""mode: vlan (nestlab/links/vlan.py): 802.1Q and QinQ sub-interfaces of a host NIC or of a node's own interface.

This machine's kernel lacks 8021q: the traffic tests are marked ``kernel("vlan")`` and run in
``make test-vm``; the checks of the file and the refusal to deploy run everywhere.
"""

from __future__ import annotations

from ipaddress import ip_interface

import pytest
from conftest import leftovers, run_cli
from netcheck import ping, reaches

from nestlab import Lab, LabError, TopologyError

HOSTS = """name: {name}
hosts: {server: {}, client: {}}
wires: [{endpoints: ["server:nic0", "client:nic0"]}]
topology:
  nodes:
    s1: {host: server}
    c1: {host: client}
    s2: {host: server}
    c2: {host: client}
  links:
    - {endpoints: ["s1:eth1.10"], mode: vlan, parent: "server:nic0", vlan_id: 10PROTO}
    - {endpoints: ["c1:eth1.10"], mode: vlan, parent: "client:nic0", vlan_id: 10PROTO}
    - {endpoints: ["s2:eth1.20"], mode: vlan, parent: "server:nic0", vlan_id: 20PROTO}
    - {endpoints: ["c2:eth1.20"], mode: vlan, parent: "client:nic0", vlan_id: 20PROTO}
"""

ON_A_STICK = """name: {name}
topology:
  nodes: {r1: {}, h1: {}}
  links:
    - endpoints: ["r1:trunk", "h1:trunk"]
    - {endpoints: ["r1:trunk.10"], mode: vlan, parent: "r1:trunk", vlan_id: 10}
    - {endpoints: ["h1:trunk.10"], mode: vlan, parent: "h1:trunk", vlan_id: 10}
    - {endpoints: ["r1:trunk.20"], mode: vlan, parent: "r1:trunk", vlan_id: 20}
    - {endpoints: ["h1:trunk.20"], mode: vlan, parent: "h1:trunk", vlan_id: 20}
"""


@pytest.mark.kernel("vlan")
@pytest.mark.parametrize("protocol", ["802.1Q", "802.1ad"])
def test_vlans_on_a_host_wire_are_separate_segments(lab_from, protocol):
    lab = lab_from(HOSTS.replace("PROTO", f", vlan_protocol: {protocol}" if protocol != "802.1Q" else ""))
    s1, c1, s2, c2 = (lab.nodes[n] for n in ("s1", "c1", "s2", "c2"))
    assert f"vlan protocol {protocol} id 10" in s1.cmd("ip -d link show eth1.10")
    assert reaches(c1, s1, s1.intf("eth1.10").ip), "the same VLAN across the wire must carry ping, TCP and UDP"
    assert reaches(c2, s2, s2.intf("eth1.20").ip)
    nets = {
        ip_interface(n.intf(i).ipv4[0]).network for n, i in ((s1, "eth1.10"), (c1, "eth1.10"), (s2, "eth1.20"), (c2, "eth1.20"))
    }
    assert len(nets) == 2, f"each VLAN gets its own subnet, shared by its two ends: {nets}"
    # The wire itself carries the tags: the hosts' untagged NICs see no VLAN 10 traffic as their own.
    assert not ping(lab.hosts["client"], s1.intf("eth1.10").ip)


@pytest.mark.kernel("vlan")
def test_router_on_a_stick_tags_its_own_interface(lab_from):
    lab = lab_from(ON_A_STICK)
    r1, h1 = lab.nodes["r1"], lab.nodes["h1"]
    for vid in (10, 20):
        assert ping(h1, r1.intf(f"trunk.{vid}").ip, count=2), f"VLAN {vid} over the trunk"
    assert "id 20" in r1.cmd("ip -d link show trunk.20")


@pytest.mark.kernel("vlan")
def test_vlan_destroy_leaves_nothing(topo_file):
    lab = Lab.from_file(topo_file(ON_A_STICK))
    lab.deploy()
    lab.destroy()
    assert leftovers() == []


def test_a_kernel_without_8021q_is_refused_before_anything_is_made(topo_file, monkeypatch):
    from nestlab.backends.kernel import probe

    real = probe.kernel()
    monkeypatch.setattr(probe, "kernel", lambda: {**real, "vlan": (False, "Operation not supported")})
    lab = Lab.from_file(topo_file(ON_A_STICK))
    with pytest.raises(LabError, match=r"vlan \(CONFIG_VLAN_8021Q\).*Nothing was created"):
        lab.deploy()
    assert leftovers() == []


TRUNK = """name: {name}
topology:
  nodes: {r1: {}, h1: {}}
  links:
    - endpoints: ["r1:trunk", "h1:trunk"]
    - LINK
"""


@pytest.mark.parametrize(
    "link, message",
    [
        ('{endpoints: ["r1:t.10"], mode: vlan, parent: "r1:trunk"}', "mode: vlan needs vlan_id: (1..4094)"),
        ('{endpoints: ["r1:t.10"], mode: vlan, parent: "r1:trunk", vlan_id: 5000}', "less than or equal to 4094"),
        ('{endpoints: ["r1:t.10"], mode: vlan, parent: "r1:trunk", vlan_id: 10, vlan_protocol: 802.1x}', "802.1Q"),
        (
            '{endpoints: ["r1:t.10"], mode: vlan, parent: "h1:trunk", vlan_id: 10}',
            "a vlan on a node's interface stays in that node",
        ),
        ('{endpoints: ["r1:t.10"], mode: vlan, parent: "r1:nope", vlan_id: 10}', "r1 has no interface nope"),
        ('{endpoints: ["r1:t.10", "h1:t.10"], mode: vlan, vlan_id: 10}', "mode: vlan attaches one endpoint"),
        ('{endpoints: ["r1:t.10"], vlan_id: 10}', "'vlan_id' applies to mode: vlan links only"),
    ],
)
def test_bad_vlan_links_name_file_line_and_fix(topo_file, link, message):
    path = topo_file(TRUNK.replace("LINK", link))
    with pytest.raises(TopologyError) as err:
        Lab.from_file(path)
    rendered = str(err.value)
    assert message in rendered and f"{path}:6:" in rendered, rendered
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2 and message in result.stderr and leftovers() == []


def test_doctor_and_modes_name_the_kernel_option():
    listing = run_cli("modes", check=True).stdout
    assert "vlan" in listing and "CONFIG_VLAN_8021Q" in listing
    assert "vlan" in run_cli("doctor", check=True).stdout

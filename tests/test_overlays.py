"""Point-to-point overlays between emulated hosts: vxlan, gretap, gre and geneve (nestlab/links).

This machine's kernel has VXLAN but lacks GRE and Geneve: those traffic tests are marked
``kernel(...)`` and run in ``make test-vm`` (Debian's stock kernel).
"""

from __future__ import annotations

import pytest
from conftest import leftovers
from netcheck import ping, reaches

from nestlab import Lab, TopologyError

TWO_HOSTS = """name: {name}
hosts: {server: {}, client: {}}
wires: [{endpoints: ["server:nic0", "client:nic0"], params: {mtu: WIRE}}]
topology:
  nodes:
    s1: {host: server}
    c1: {host: client}
    s2: {host: server}
    c2: {host: client}
  links:
    - {endpoints: ["s1:eth1", "c1:eth1"], mode: MODE}
    - {endpoints: ["s2:eth1", "c2:eth1"], mode: MODE}
"""
# Headers each overlay adds to a 1500-byte wire: its interfaces' MTU is what is left.
OVERLAYS = [
    pytest.param("vxlan", 1450, marks=pytest.mark.kernel("vxlan")),
    pytest.param("geneve", 1450, marks=pytest.mark.kernel("geneve")),
    pytest.param("gretap", 1458, marks=pytest.mark.kernel("gretap")),
    pytest.param("gre", 1472, marks=pytest.mark.kernel("gre")),
]


def text(mode: str, wire_mtu: int = 1500) -> str:
    return TWO_HOSTS.replace("MODE", mode).replace("WIRE", str(wire_mtu))


@pytest.mark.parametrize("mode, mtu", OVERLAYS)
def test_two_overlays_between_the_same_hosts(lab_from, mode, mtu):
    """Two tunnels between one pair of hosts (their own VNI or GRE key each) carry traffic, at the MTU the headers leave."""
    lab = lab_from(text(mode))
    for s, c in (("s1", "c1"), ("s2", "c2")):
        server, client = lab.nodes[s], lab.nodes[c]
        ip = server.intf("eth1").ip
        assert reaches(client, server, ip), f"{mode}: {c} -> {s}"
        assert f"mtu {mtu} " in server.cmd("ip link show eth1")
        assert ping(client, ip, size=mtu - 28), f"{mode}: a full-size DF packet must fit"
        assert not ping(client, ip, size=mtu - 27), f"{mode}: one byte more must not"
    assert not ping(lab.nodes["c1"], lab.nodes["s2"].intf("eth1").ip), "each tunnel is its own segment"
    assert mode in lab.nodes["s1"].cmd("ip -d link show eth1")


@pytest.mark.parametrize("mode, mtu", OVERLAYS)
def test_overlay_destroy_leaves_nothing(topo_file, mode, mtu):
    lab = Lab.from_file(topo_file(text(mode)))
    lab.deploy()
    lab.destroy()
    assert leftovers() == []


@pytest.mark.parametrize("mode", ["gretap", "gre", "geneve"])
def test_an_overlay_on_one_host_is_refused(topo_file, mode):
    path = topo_file(text(mode).replace("c1: {host: client}", "c1: {host: server}"))
    with pytest.raises(TopologyError, match=f"a {mode} overlay joins nodes on different hosts; s1 and c1 are both on server"):
        Lab.from_file(path)


@pytest.mark.parametrize("mode, overhead", [("gretap", 42), ("gre", 28), ("geneve", 50)])
def test_an_mtu_the_wire_cannot_carry_is_refused(topo_file, mode, overhead):
    lab = Lab.from_file(topo_file(text(mode).replace(f"mode: {mode}}}", f"mode: {mode}, mtu: 1500}}", 1)))
    with pytest.raises(TopologyError, match=f"minus {overhead} bytes of {mode} headers; use at most {1500 - overhead}"):
        lab.plan

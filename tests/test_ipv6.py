"""A lab is quiet when it comes up (model/ipv6.py): hosts of a lab that does not use IPv6 make no link-local
address, so nothing is multicast to a bridge that would flood it to every port; a lab that uses IPv6
keeps the kernel's defaults; ``ipv6:`` decides otherwise."""

from __future__ import annotations

import time

import pytest
from conftest import star

from nestlab.model.ipv6 import uses_ipv6


def _rx_packets(node, iface: str = "eth1") -> int:
    """What ``iface`` received so far (/proc/net/dev is the node's own; /sys is the machine's)."""
    line = next(line for line in node.cmd("cat /proc/net/dev").splitlines() if line.strip().startswith(iface + ":"))
    return int(line.split(":", 1)[1].split()[1])


def test_a_lab_without_ipv6_is_quiet_yet_takes_an_address_later(lab_from):
    lab = lab_from(star("{name}", 12))
    h0, h1 = lab.nodes["h0"], lab.nodes["h1"]
    assert "inet6" not in h0.cmd("ip -6 -o addr show dev eth1"), "no link-local address"
    assert "1" == h0.cmd("cat /proc/sys/net/ipv6/conf/eth1/addr_gen_mode").strip()
    time.sleep(2)  # long enough for DAD, MLD reports and router solicitations, had anyone sent them
    # With link-local addresses each of the other eleven hosts' DAD, MLD reports and router solicitations
    # would be here (and the bridge's own IGMP report, which its namespace does not send either).
    assert _rx_packets(h0) == 0, h0.cmd("cat /proc/net/dev")
    # IPv6 is still on: addresses a command adds work (nodad: no need to wait for duplicate detection).
    h0.cmd("ip -6 addr add fd00:77::1/64 dev eth1 nodad")
    h1.cmd("ip -6 addr add fd00:77::2/64 dev eth1 nodad")
    assert "1 received" in h1.cmd("ping -6 -c1 -W2 fd00:77::1")
    ipv4 = h1.cmd("ip -4 -o addr show eth1").split()[3].split("/")[0]
    assert "1 received" in h0.cmd(f"ping -c1 -W2 {ipv4}"), "IPv4 as ever"


def test_a_lab_that_uses_ipv6_keeps_link_local_addresses(lab_from):
    lab = lab_from(
        "name: {name}\ntopology:\n  nodes: {a: {}, b: {}}\n  links:\n"
        "    - endpoints: [a:eth1, b:eth1]\n      ipv6: ['fd00:78::1/64', 'fd00:78::2/64']\n"
    )
    assert "fe80::" in lab.nodes["a"].cmd("ip -6 -o addr show dev eth1")
    deadline, out = time.monotonic() + 10, ""
    while "1 received" not in out and time.monotonic() < deadline:  # the addresses are tentative until DAD is done
        out = lab.nodes["a"].cmd("ping -6 -c1 -W1 fd00:78::2")
    assert "1 received" in out


@pytest.mark.parametrize(
    ("setting", "link_local", "disabled"), [("true", True, "0"), ("quiet", False, "0"), ("false", False, "1")]
)
def test_the_ipv6_key_decides(lab_from, setting, link_local, disabled):
    lab = lab_from(
        f"name: {{name}}\nipv6: {setting}\ntopology:\n  nodes: {{a: {{}}, b: {{}}}}\n  links: [{{endpoints: [a:eth1, b:eth1]}}]\n"
    )
    a = lab.nodes["a"]
    assert ("fe80::" in a.cmd("ip -6 -o addr show dev eth1")) is link_local
    assert a.cmd("cat /proc/sys/net/ipv6/conf/eth1/disable_ipv6").strip() == disabled


@pytest.mark.parametrize(
    ("data", "uses"),
    [
        ({"topology": {"nodes": {"a": {}}}}, False),
        ({"topology": {"nodes": {"a": {"exec": ["ip -6 addr add fd00::1/64 dev eth1"]}}}}, True),
        ({"topology": {"nodes": {"a": {"exec": ["ip -4 addr add 10.0.0.1/24 dev eth1"]}}}}, False),
        ({"topology": {"nodes": {"a": {"cmd": "ping6 fd00::2"}}}}, True),
        ({"topology": {"nodes": {"r": {"kind": "frr"}}}}, True),
        ({"topology": {"nodes": {"r": {"image": "quay.io/frrouting/frr:10.1"}}}}, True),
        ({"topology": {"links": [{"endpoints": ["a:e1", "b:e1"], "ipv6": [None, None]}]}}, False),
        ({"topology": {"links": [{"endpoints": ["a:e1", "b:e1"], "ipv6": ["fd00::1/64", None]}]}}, True),
        ({"topology": {"nodes": {"a": {"sysctls": {"net.ipv6.conf.all.forwarding": 1}}}}}, True),
        ({"topology": {"nodes": {"a": {"mgmt-ipv6": "3fff::9"}}}}, False),
    ],
)
def test_what_counts_as_using_ipv6(data, uses):
    assert uses_ipv6(data) is uses

"""Every attachment mode on one emulated host and across two: connectivity, isolation, MTU.

Hosts are namespaces with veth NICs joined by a wire; nothing touches the real
machine's interfaces.  Tests needing a kernel feature this machine lacks
(ipvlan, the OVS kernel datapath) are marked ``kernel(...)`` and run in
``make test-vm``.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import root_links, run_cli
from netcheck import echo, ping, reaches

HEAD = """name: {name}
hosts: {server: {}, client: {}}
wires:
  - endpoints: ["server:nic0", "client:nic0"]
    params: {mtu: MTU}
"""


def lab_text(mode: str, cross: bool, mtu: int = 1500, extra: str = "", link_mtu: int | None = None) -> str:
    """Nodes s1 (on server) and c1 (on client, or on server when not ``cross``) joined by ``mode``."""
    chost = "client" if cross else "server"
    nodes = f"    s1: {{host: server}}\n    c1: {{host: {chost}}}\n"
    if mode == "none":
        nodes = f"    s1: {{host: server, mode: none}}\n    c1: {{host: {chost}, mode: none}}\n"
        links = "    []\n"
    elif mode in ("veth", "vxlan"):
        links = f'    - endpoints: ["s1:eth1", "c1:eth1"]\n      mode: {mode}\n'
    elif mode == "ovs" and cross:  # a switch per host, each with its host's NIC moved in as uplink port
        nodes += "    sw: {kind: ovs, host: server}\n    sw2: {kind: ovs, host: client}\n"
        links = (
            '    - endpoints: ["s1:eth1", "sw:p1"]\n    - endpoints: ["c1:eth1", "sw2:p1"]\n'
            '    - endpoints: ["sw:up"]\n      mode: phys\n      parent: server:nic0\n'
            '    - endpoints: ["sw2:up"]\n      mode: phys\n      parent: client:nic0\n'
        )
    elif mode == "ovs":
        nodes += "    sw: {kind: ovs, host: server}\n"
        links = '    - endpoints: ["s1:eth1", "sw:p1"]\n    - endpoints: ["c1:eth1", "sw:p2"]\n'
    else:
        option = {"ipvlan": "ipvlan_mode: l2", "macvlan": "macvlan_mode: bridge", "bridge": "bridge: br0", "phys": ""}[mode]
        links = "".join(
            f'    - endpoints: ["{n}:eth1"]\n      mode: {mode}\n      parent: {h}:nic0\n      {option}\n'
            for n, h in (("s1", "server"), ("c1", chost))
        )
    if link_mtu and mode in ("veth", "ovs"):
        links = links.replace('"]\n', f'"]\n      mtu: {link_mtu}\n')
    head = HEAD.replace("MTU", str(mtu))
    return head + "topology:\n  nodes:\n" + nodes + extra + "  links:\n" + links


def target(lab, mode: str) -> str:
    if mode == "none":
        return lab.hosts["server"].intf("nic0").ip
    return lab.nodes["s1"].intf("eth1").ip


SAME_HOST = ["veth", "bridge", "macvlan", "ovs", "none"]
CROSS_HOST = ["bridge", "macvlan", "ovs", "vxlan", "phys", "none"]


@pytest.mark.parametrize("mode", SAME_HOST)
def test_same_host_connectivity(lab_from, mode):
    before = root_links()
    lab = lab_from(
        lab_text(mode, cross=False).replace(
            "mode: none}\n    c1: {host: server, mode: none}", "mode: none}\n    c1: {host: server}"
        )
    )
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    if mode == "none":  # c1 has its own stack, s1 is the host: reach the host over the wire from the client side
        c1 = lab.hosts["client"]
    assert reaches(c1, s1, target(lab, mode)), f"{mode}: ping/TCP/UDP from c1 to s1 failed"
    assert root_links() == before


@pytest.mark.parametrize("mode", CROSS_HOST)
def test_cross_host_connectivity(lab_from, mode):
    lab = lab_from(lab_text(mode, cross=True))
    assert reaches(lab.nodes["c1"], lab.nodes["s1"], target(lab, mode)), f"{mode}: ping/TCP/UDP across hosts failed"


@pytest.mark.kernel("ipvlan")
@pytest.mark.parametrize("ipvlan_mode", ["l2", "l3", "l3s"])
@pytest.mark.parametrize("cross", [False, True], ids=["same-host", "cross-host"])
def test_ipvlan(lab_from, ipvlan_mode, cross):
    # Across hosts in l3/l3s, nestlab gives each host a route to the other host's containers.
    lab = lab_from(lab_text("ipvlan", cross).replace("ipvlan_mode: l2", f"ipvlan_mode: {ipvlan_mode}"))
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    assert reaches(c1, s1, target(lab, "ipvlan"))
    if ipvlan_mode != "l2":  # l3/l3s: no ARP, no broadcast
        assert "NOARP" in c1.cmd("ip link show eth1")
        c1.cmd(f"ping -c1 -W1 {target(lab, 'ipvlan')}")
        assert "lladdr" not in c1.cmd("ip neigh show dev eth1")


def test_none_shares_the_host_stack(lab_from):
    lab = lab_from(lab_text("none", cross=True))
    s1, server = lab.nodes["s1"], lab.hosts["server"]
    assert os.stat(f"/run/netns/{s1.netns}").st_ino == os.stat(f"/run/netns/{server.netns}").st_ino
    assert "nic0" in s1.cmd("ip -br link")
    assert s1.cmd("hostname").strip() == "s1"  # still its own UTS namespace


def test_macvlan_private_isolates_siblings(lab_from):
    extra = "    s2: {host: server}\n"
    text = lab_text("macvlan", cross=True, extra=extra).replace("macvlan_mode: bridge", "macvlan_mode: private")
    text += '    - endpoints: ["s2:eth1"]\n      mode: macvlan\n      parent: server:nic0\n      macvlan_mode: private\n'
    lab = lab_from(text)
    s1, s2, c1 = lab.nodes["s1"], lab.nodes["s2"], lab.nodes["c1"]
    assert ping(s1, c1.intf("eth1").ip), "private macvlan must still reach the wire"
    assert not ping(s1, s2.intf("eth1").ip, count=2), "private macvlan siblings must not talk"


def test_bridge_without_nat_has_no_path_beyond(lab_from):
    text = lab_text("bridge", cross=False).replace("      parent: server:nic0\n", "")
    lab = lab_from(text)
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    assert reaches(c1, s1, s1.intf("eth1").ip)
    assert not ping(s1, lab.hosts["client"].intf("nic0").ip), "an isolated bridge must not reach the other host"


def test_bridge_nat_masquerades_and_publishes(lab_from):
    text = lab_text("bridge", cross=True)
    text = text.replace(
        "      parent: server:nic0\n      bridge: br0\n", "      nat: true\n      publish: [7007/tcp, 7008/udp]\n"
    )
    lab = lab_from(text)
    s1, c1, server = lab.nodes["s1"], lab.nodes["c1"], lab.hosts["server"]
    server_ip = server.intf("nic0").ip
    assert s1.cmd("ip route show default").startswith("default via ")
    # Out: s1 -> c1 leaves with the server's NIC address.
    assert echo(c1, s1, c1.intf("eth1").ip) == f"HELLO seen-from {server_ip}"
    # In: c1 -> server's NIC address, port 7007/tcp and 7008/udp reach s1.
    assert echo(s1, c1, server_ip, "tcp", 7007).startswith("HELLO")
    assert echo(s1, c1, server_ip, "udp", 7008).startswith("HELLO")


@pytest.mark.parametrize("mode", ["veth", "bridge", "macvlan", "ovs", "vxlan"])
def test_jumbo_mtu(lab_from, mode):
    cross = mode == "vxlan"
    text = lab_text(mode, cross=cross, mtu=9000 if mode != "vxlan" else 9050, link_mtu=9000)
    lab = lab_from(text)
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    ip = s1.intf("eth1").ip
    assert ping(c1, ip, size=8972), f"{mode}: MTU 9000 must carry an 8972-byte DF ping"
    assert not ping(c1, ip, size=8973), f"{mode}: 8973 bytes must not fit"


def test_mtu_1500_refuses_jumbo(lab_from):
    lab = lab_from(lab_text("macvlan", cross=True))
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    assert ping(c1, s1.intf("eth1").ip, size=1472)
    assert not ping(c1, s1.intf("eth1").ip, size=8972)


def test_ovs_netdev_tcp_and_drop_rule(lab_from):
    text = lab_text("ovs", cross=False).replace(
        "sw: {kind: ovs, host: server}", 'sw: {kind: ovs, host: server, flows: ["priority=100,icmp,actions=drop"]}'
    )
    lab = lab_from(text)
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    ip = s1.intf("eth1").ip
    assert not ping(c1, ip, count=2), "the OpenFlow drop rule must drop ICMP"
    assert echo(s1, c1, ip, "tcp").startswith("HELLO"), "TCP is not matched by the drop rule"
    report = json.loads(run_cli("inspect", "--lab", lab.name, "--format", "json", check=True).stdout)
    sw = next(n for n in report["nodes"] if n["name"] == "sw")
    from nestlab.backends.services import ovs

    expected = "system" if ovs.kernel_datapath_available() else "netdev"
    assert sw["ovs"]["datapath"] == expected


@pytest.mark.kernel("ovs-kernel")
def test_ovs_kernel_datapath(lab_from):
    text = lab_text("ovs", cross=False).replace(
        "sw: {kind: ovs, host: server}",
        'sw: {kind: ovs, host: server, datapath: kernel, flows: ["priority=100,icmp,actions=drop"]}',
    )
    lab = lab_from(text)
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    assert echo(s1, c1, s1.intf("eth1").ip, "tcp").startswith("HELLO")
    assert not ping(c1, s1.intf("eth1").ip, count=2)
    report = json.loads(run_cli("inspect", "--lab", lab.name, "--format", "json", check=True).stdout)
    assert next(n for n in report["nodes"] if n["name"] == "sw")["ovs"]["datapath"] == "system"


def test_vxlan_puts_two_hosts_on_one_subnet(lab_from):
    lab = lab_from(lab_text("vxlan", cross=True, mtu=1500))
    s1, c1 = lab.nodes["s1"], lab.nodes["c1"]
    a, b = s1.intf("eth1"), c1.intf("eth1")
    assert a.ipv4[0].split("/")[1] == b.ipv4[0].split("/")[1] and a.ipv4 != b.ipv4
    assert "mtu 1450" in s1.cmd("ip link show eth1")
    assert reaches(c1, s1, a.ip)


def test_reconcile_changes_only_the_changed_attachment(topo_file):
    from nestlab import Lab

    path = topo_file(lab_text("macvlan", cross=True))
    lab = Lab.from_file(path)
    try:
        lab.deploy()
        s1_index = lab.nodes["s1"].cmd("ip -o link show eth1").split(":")[0]
        assert s1_index.isdigit()
        path.write_text(
            path.read_text().replace(
                "parent: client:nic0\n      macvlan_mode: bridge", "parent: client:nic0\n      macvlan_mode: private"
            )
        )
        changed = Lab.from_file(path).deploy().changes
        assert (len(changed.del_attachments), len(changed.add_attachments), changed.add_nodes, changed.add_links) == (
            1,
            1,
            [],
            [],
        )
        assert "macvlan mode private" in lab.nodes["c1"].cmd("ip -d link show eth1")
        assert lab.nodes["s1"].cmd("ip -o link show eth1").split(":")[0] == s1_index, "s1's attachment was not changed"
        assert reaches(lab.nodes["c1"], lab.nodes["s1"], lab.nodes["s1"].intf("eth1").ip)
    finally:
        lab.destroy()


@pytest.mark.kernel("bridge-nf")
def test_bridge_netfilter_takes_dockers_default_path(lab_from):
    """bridge_netfilter: bridged frames go through the host's netfilter hooks and Docker's FORWARD rules."""
    text = (
        lab_text("bridge", cross=False)
        .replace("      parent: server:nic0\n", "")
        .replace("bridge: br0\n", "bridge: br0\n      bridge_netfilter: true\n")
    )
    lab = lab_from(text)
    s1, c1, server = lab.nodes["s1"], lab.nodes["c1"], lab.hosts["server"]
    assert server.cmd("cat /proc/sys/net/bridge/bridge-nf-call-iptables").strip() == "1"
    assert lab.hosts["client"].cmd("cat /proc/sys/net/bridge/bridge-nf-call-iptables").strip() == "0", "other hosts keep it off"
    assert reaches(c1, s1, s1.intf("eth1").ip)
    rules = server.cmd("nft list table ip nestlab")
    assert "policy drop" in rules
    # Replies are accepted as established connections; new ones by the bridge-to-bridge rule: both counted packets.
    for rule in ("ct state established,related counter packets", 'iifname "br0" oifname "br0" counter packets'):
        line = next(x for x in rules.splitlines() if rule in x)
        assert int(line.split("packets")[1].split()[0]) > 0, line

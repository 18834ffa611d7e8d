"""A management network's bridge on this machine, and its nftables rules.

The bridge (``br-clab`` for containerlab's default network) holds the gateway addresses and every
node's management veth; labs that name one network share it, and the last lab to go removes it.  A
bridge's work for each port it gains or brings up walks all its ports (state, MTU, features), so
a bridge takes :data:`PORTS` nodes (by host number) and the others hang on child bridges
(``br-clab-1``, ...), each joined to the bridge by a veth pair (500 nodes: 0.06 s less of a 1.05 s
deploy than with one bridge).  All of them carry the marker ``nestlab-mgmt:NETWORK`` (no lab's: they
outlive each of them).

The rules (table ``ip``/``ip6`` ``nestlab_mgmt_NETWORK``): what the nodes send out of the machine is
masqueraded (IPv4; ``external-access``, containerlab's default: IPv4 forwarding is switched on, and put back
when the last network goes unless someone changed it meanwhile), and nothing from outside the bridge reaches
a node but replies (ports are published with ``ports:``, from this machine's loopback).  Between nodes
on the bridge nothing is filtered but MLD reports (table ``bridge``): a node's interface sends them as it
comes up, and a bridge that floods multicast would hand each to every other node (500 nodes: 250 000
frames during the deploy); no listener on the segment needs them.  The nodes' ports are found by their
interface group, :data:`GROUP`.  ``nft`` runs once per network, not per node.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator

from ... import names
from ...errors import LabError
from . import files, locks, netlink, rtdump, sysctl

MARKER = "nestlab-mgmt:"
PORTS = 256  # host numbers per bridge: a /24 on one (the kernel takes at most 1 024 ports)
GROUP = 0x6E6C6D67  # the interface group of the nodes' ports on a management bridge ("nlmg")
FORWARD = os.path.join(names.MGMT_ROOT, "ip_forward.before")  # net.ipv4.ip_forward before the first network


def bridge_for(bridge: str, host_number: int) -> str:
    """The bridge a node with this host number of the subnet hangs on: the network's, or a child."""
    child = host_number // PORTS
    return bridge if child == 0 else f"{bridge[: 15 - len(str(child)) - 1]}-{child}"


def child(network: str, bridge: str, name: str, mtu: int) -> int:
    """A child bridge ``name`` joined to ``bridge`` (made unless it is there); returns its index.  Called
    with the network's lock held."""
    nl = netlink.Netlink()
    try:
        if (there := _index(nl, name)) is not None:
            return there
        nl.run(netlink.new_bridge(name, MARKER + network, snooping=False), netlink.set_up(name, alias=MARKER + network))
        index, main = nl.run(netlink.get_link(name), netlink.get_link(bridge))
        nl.run(netlink.set_mtu(index, mtu))
        here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)  # both ends of the joining veth stay here
        try:
            nl.run(netlink.new_veth(f"{name}u", f"{name}d", here, alias=MARKER + network, mtu=mtu, master=main))
        finally:
            os.close(here)
        nl.run(
            netlink.set_master(f"{name}d", index),
            netlink.set_up(f"{name}d", alias=MARKER + network),
            netlink.set_up(f"{name}u", alias=MARKER + network),
        )
        return index
    finally:
        nl.close()


def table(network: str) -> str:
    return "nestlab_mgmt_" + network.replace("-", "_")


def ruleset(network: str, bridge: str, subnet: str, external: bool) -> str:
    """The same forward filter for IPv4 and IPv6; masquerade (``external``) of what the IPv4 ``subnet`` sends
    beyond it (a frame between nodes on two of the network's bridges reaches the NAT hook, through the
    machine's bridge netfilter, with the child bridge as its way out: not to be masqueraded)."""
    name = table(network)
    out = "accept" if external else "drop"
    text = ""
    for family in ("ip", "ip6"):
        text += (
            f"table {family} {name} {{\n"
            "  chain forward {\n    type filter hook forward priority filter; policy accept;\n"
            f'    iifname "{bridge}" oifname "{bridge}" accept\n'
            f'    oifname "{bridge}" ct state established,related accept\n'
            f'    oifname "{bridge}" drop\n'
            f'    iifname "{bridge}" {out}\n  }}\n'
            "  chain postrouting {\n    type nat hook postrouting priority srcnat;\n"
            + (
                f'    ip saddr {subnet} ip daddr != {subnet} oifname != "{bridge}" masquerade\n'
                if external and family == "ip"
                else ""
            )
            + "  }\n}\n"
        )
    return text


def quiet(network: str) -> str:
    """The bridge table that keeps the nodes' MLD reports off the network's bridges (module docstring)."""
    return (
        f"table bridge {table(network)} {{\n"
        "  chain prerouting {\n    type filter hook prerouting priority filter; policy accept;\n"
        f"    iifgroup {GROUP} icmpv6 type {{ mld-listener-report, mld-listener-done, mld2-listener-report }} drop\n"
        "  }\n}\n"
    )


def _index(nl: netlink.Netlink, name: str) -> int | None:
    """The interface's index, None if there is no such interface."""
    try:
        (index,) = nl.run(netlink.get_link(name))
    except netlink.NetlinkError as exc:
        if exc.errno != errno.ENODEV:
            raise
        return None
    return index


def ensure(network: str, bridge: str, gateways: tuple[str, str], mtu: int, subnet: str, external: bool) -> int:
    """The network's bridge, made (up, with ``gateways`` as its addresses, its rules installed) unless it is
    there; returns its index.  Called with the network's lock held."""
    nl = netlink.Netlink()
    try:
        if (there := _index(nl, bridge)) is not None:
            return there
        if not shutil.which("nft"):
            raise LabError("the management network needs nftables (`nft`): apt-get install nftables")
        nl.run(  # a hub for multicast: no O(ports²) timers; the alias set apart (the kernel keeps none given at birth)
            netlink.new_bridge(bridge, MARKER + network, snooping=False), netlink.set_up(bridge, alias=MARKER + network)
        )
        (index,) = nl.run(netlink.get_link(bridge))
        # the gateways unprobed (IPv6 DAD would hold the gateway back for a second or two after deploy)
        nl.run(netlink.set_mtu(index, mtu), *(netlink.new_addr(index, cidr, bridge, netlink.IFA_F_NODAD) for cidr in gateways))
    finally:
        nl.close()
    if external:  # as Docker does; IPv6 is not forwarded (it would stop the machine taking router adverts)
        forward_on(network)
    proc = subprocess.run(["nft", "-f", "-"], input=ruleset(network, bridge, subnet, external), capture_output=True, text=True)
    if proc.returncode:
        remove(network)
        raise LabError(f"the management network's rules were refused: {proc.stderr.strip()} (see `nestlab doctor`)")
    # a kernel without nftables' bridge family floods the reports: slower to fill, the same network
    subprocess.run(["nft", "-f", "-"], input=quiet(network), capture_output=True, text=True)
    return index


def remove(network: str) -> None:
    """The network's bridges, joining veths and rules, gone (found by their marker; what is already gone is fine)."""
    nl = netlink.Netlink()
    try:
        for name in [i.name for i in rtdump.interfaces(nl, counters=False) if i.alias == MARKER + network]:
            with contextlib.suppress(netlink.NetlinkError):
                nl.run(netlink.del_link(name))
    finally:
        nl.close()
    for family in ("ip", "ip6", "bridge"):
        subprocess.run(["nft", "delete", "table", family, table(network)], capture_output=True)
    forward_restored()


def forward_on(network: str) -> None:
    """Switch IPv4 forwarding on; what it was is kept (:data:`FORWARD`) unless it was on already, or another
    network switched it on first (a record left while no other network is there is stale: replaced)."""
    with _forward_locked():
        if not _networks(but=network):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(FORWARD)
        if (was := _forward()) != "1":
            if not os.path.exists(FORWARD):
                files.write(FORWARD, was, 0o644, sync=False)
            sysctl.write("net.ipv4.ip_forward", "1")


def forward_restored() -> None:
    """Once no management network is left, put IPv4 forwarding back as it was before the first one switched it
    on, unless someone changed it meanwhile (it is no longer on)."""
    with _forward_locked():
        if not os.path.exists(FORWARD) or _networks():
            return  # never switched on by us, or another network still forwards
        with open(FORWARD) as fh:
            was = fh.read().strip()
        if _forward() == "1" and was in ("0", "1"):
            sysctl.write("net.ipv4.ip_forward", was)
        os.unlink(FORWARD)


def _networks(but: str | None = None) -> set[str]:
    """The management networks whose bridges are on this machine (``but``: not that one)."""
    nl = netlink.Netlink()
    try:
        marked = {i.alias[len(MARKER) :] for i in rtdump.interfaces(nl, counters=False) if i.alias and i.alias.startswith(MARKER)}
    finally:
        nl.close()
    return marked - {but}


def _forward() -> str:
    with open("/proc/sys/net/ipv4/ip_forward") as fh:
        return fh.read().strip()


@contextlib.contextmanager
def _forward_locked() -> Iterator[None]:
    """The lock of :data:`FORWARD`, which every network's bridge shares."""
    files.make_dirs(names.MGMT_ROOT)
    with locks.file_held(FORWARD + ".lock"):  # 0600: no other user can hold it
        yield

"""A namespace's interfaces, addresses and IPv4 routes, read in one dump each and parsed by hand.

pyroute2 needs ~5 ms to open a socket in a namespace and parse its answers; a 500-node lab's
``inspect`` spent 2.4 s there.  These parsers read only what nestlab shows (name, state, MTU,
MAC, master, kind, byte and packet counters, addresses) and serve the event stream too, whose
multicast messages have the same layout.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass, field

from ... import names
from . import namespaces
from .netlink import RTM_GETADDR, RTM_GETLINK, Netlink, attr, attrs

RTM_GETROUTE = 26
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_MULTIPATH, RTA_TABLE = 1, 4, 5, 6, 9, 15
RTNH_F_DEAD, RTNH_F_LINKDOWN = 1, 16
RT_TABLE_MAIN = 254
ROUTE_TYPES = {
    1: "unicast",
    2: "local",
    3: "broadcast",
    4: "anycast",
    5: "multicast",
    6: "blackhole",
    7: "unreachable",
    8: "prohibit",
}
_RTMSG = struct.Struct("=BBBBBBBBI")
_RTNH = struct.Struct("=HBBi")

IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_MASTER, IFLA_OPERSTATE, IFLA_LINKINFO, IFLA_STATS64, IFLA_CARRIER = (
    1,
    3,
    4,
    10,
    16,
    18,
    23,
    33,
)
IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS, IFLA_IFALIAS = 29, 1 << 3, 20
IFLA_INFO_KIND = 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
IFF_UP = 0x1
_IFINFO = struct.Struct("=BxHiII")
_IFADDR = struct.Struct("=BBBBI")
_STATS = struct.Struct("=8Q")  # rx/tx packets, rx/tx bytes, rx/tx errors, rx/tx dropped: the head of rtnl_link_stats64


@dataclass
class LinkInfo:
    index: int
    name: str
    state: str  # the operational state (UP, DOWN, LOWERLAYERDOWN...)
    admin_up: bool
    carrier: bool
    mtu: int
    mac: str | None
    master: int | None
    kind: str | None
    rx_packets: int = 0
    tx_packets: int = 0
    rx_bytes: int = 0
    tx_bytes: int = 0
    tx_dropped: int = 0  # e.g. a tun device's: packets its reader (a daemon) was too slow for
    addresses: list[str] = field(default_factory=list)
    alias: str = ""  # the owner marker nestlab writes on what it creates outside its namespaces


def parse_link(body: bytes) -> LinkInfo:
    """An ``RTM_NEWLINK``/``RTM_DELLINK`` message body."""
    _family, _type, index, flags, _change = _IFINFO.unpack_from(body)
    a = attrs(body, _IFINFO.size)
    operstate = a[IFLA_OPERSTATE][0] if IFLA_OPERSTATE in a else 0
    kind = attrs(a[IFLA_LINKINFO], 0).get(IFLA_INFO_KIND) if IFLA_LINKINFO in a else None
    info = LinkInfo(
        index,
        a.get(IFLA_IFNAME, b"").rstrip(b"\0").decode(),
        OPERSTATES[operstate] if operstate < len(OPERSTATES) else "UNKNOWN",
        bool(flags & IFF_UP),
        bool(a[IFLA_CARRIER][0]) if IFLA_CARRIER in a else False,
        struct.unpack("=I", a[IFLA_MTU])[0] if IFLA_MTU in a else 0,
        ":".join(f"{b:02x}" for b in a[IFLA_ADDRESS]) if IFLA_ADDRESS in a else None,
        struct.unpack("=I", a[IFLA_MASTER])[0] if IFLA_MASTER in a else None,
        kind.rstrip(b"\0").decode() if kind else None,
    )
    if IFLA_IFALIAS in a:
        info.alias = a[IFLA_IFALIAS].rstrip(b"\0").decode(errors="replace")
    if IFLA_STATS64 in a:
        info.rx_packets, info.tx_packets, info.rx_bytes, info.tx_bytes, _, _, _, info.tx_dropped = _STATS.unpack_from(
            a[IFLA_STATS64]
        )
    return info


def parse_address(body: bytes) -> tuple[int, str]:
    """An ``RTM_NEWADDR``/``RTM_DELADDR`` message body: (interface index, address/prefix)."""
    family, prefix, _flags, _scope, index = _IFADDR.unpack_from(body)
    a = attrs(body, _IFADDR.size)
    raw = a.get(IFA_LOCAL) or a.get(IFA_ADDRESS, b"")
    return index, f"{socket.inet_ntop(family, raw)}/{prefix}"


def interfaces(nl: Netlink, counters: bool = True) -> list[LinkInfo]:
    """Every interface of the socket's namespace, with its addresses (link-local IPv6 left out);
    without ``counters`` the kernel skips the statistics (a cheaper dump)."""
    request = _IFINFO.pack(0, 0, 0, 0, 0) + (b"" if counters else attr(IFLA_EXT_MASK, struct.pack("=I", RTEXT_FILTER_SKIP_STATS)))
    found = {info.index: info for info in (parse_link(body) for _t, body in nl.dump(RTM_GETLINK, request))}
    for _t, body in nl.dump(RTM_GETADDR, _IFADDR.pack(0, 0, 0, 0, 0)):
        index, address = parse_address(body)
        if index in found and not address.startswith("fe80:"):
            found[index].addresses.append(address)
    return sorted(found.values(), key=lambda i: i.index)


@dataclass(frozen=True)
class NextHop:
    gateway: str | None  # None: the destination is on the interface's network
    index: int  # the interface's
    alive: bool  # False: its interface has no carrier (linkdown) or is dead


@dataclass(frozen=True)
class RouteInfo:
    dst: str  # with its prefix length: 0.0.0.0/0 for the default
    type: str  # unicast, blackhole, unreachable, prohibit, local...
    table: int
    metric: int
    nexthops: tuple[NextHop, ...]


def _hop(gateway: bytes | None, index: int, flags: int) -> NextHop:
    return NextHop(
        socket.inet_ntop(socket.AF_INET, gateway) if gateway else None, index, not flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN)
    )


def parse_route(body: bytes) -> RouteInfo:
    """An IPv4 ``RTM_NEWROUTE`` message body."""
    _family, dst_len, _src_len, _tos, table, _proto, _scope, kind, flags = _RTMSG.unpack_from(body)
    a = attrs(body, _RTMSG.size)
    dst = socket.inet_ntop(socket.AF_INET, a[RTA_DST]) if RTA_DST in a else "0.0.0.0"
    hops: list[NextHop] = []
    if RTA_MULTIPATH in a:
        data, off = a[RTA_MULTIPATH], 0
        while off + _RTNH.size <= len(data):
            length, hop_flags, _hops, index = _RTNH.unpack_from(data, off)
            hops.append(_hop(attrs(data[off : off + length], _RTNH.size).get(RTA_GATEWAY), index, hop_flags))
            off += (length + 3) & ~3
    elif RTA_OIF in a or RTA_GATEWAY in a:
        hops.append(_hop(a.get(RTA_GATEWAY), struct.unpack("=i", a[RTA_OIF])[0] if RTA_OIF in a else 0, flags))
    return RouteInfo(
        f"{dst}/{dst_len}",
        ROUTE_TYPES.get(kind, str(kind)),
        struct.unpack("=I", a[RTA_TABLE])[0] if RTA_TABLE in a else table,
        struct.unpack("=I", a[RTA_PRIORITY])[0] if RTA_PRIORITY in a else 0,
        tuple(hops),
    )


def routes(nl: Netlink) -> list[RouteInfo]:
    """Every IPv4 route of the socket's namespace, of every table."""
    return [parse_route(body) for _t, body in nl.dump(RTM_GETROUTE, _RTMSG.pack(socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0))]


def routed(path: str) -> tuple[list[LinkInfo], list[RouteInfo]]:
    """The interfaces (with addresses) and IPv4 routes of the network namespace pinned at ``path``."""
    fd, nl = namespaces.open_netlink(path)
    try:
        return interfaces(nl, counters=False), routes(nl)
    finally:
        nl.close()
        os.close(fd)


def of_namespace(path: str, counters: bool = True) -> list[LinkInfo]:
    """The interfaces of the network namespace pinned at ``path`` (none once it is gone)."""
    try:
        fd, nl = namespaces.open_netlink(path)
    except FileNotFoundError:
        return []
    try:
        return interfaces(nl, counters)
    finally:
        nl.close()
        os.close(fd)


def marked(lab: str | None = None) -> list[str]:
    """Interfaces of the calling thread's namespace that carry a lab's marker (``lab``'s, or any lab's)."""
    nl = Netlink()
    try:
        found = interfaces(nl, counters=False)
    finally:
        nl.close()
    if lab is None:
        return [i.name for i in found if i.alias.startswith(names.alias(""))]
    return [i.name for i in found if i.alias == names.alias(lab)]

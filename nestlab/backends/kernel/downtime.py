"""A stopped node's network: its interfaces taken down (so its peers see their carrier go), and what the
kernel forgets with them (static routes, IPv6 addresses) kept aside as the kernel's own messages, to be
sent back as they were when the node starts again."""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import namespaces, rtdump, sysctl
from .netlink import (
    NLM_F_CREATE,
    RTM_GETADDR,
    RTM_NEWADDR,
    RTM_NEWROUTE,
    Netlink,
    NetlinkError,
    Request,
    attrs,
    set_state,
)

RTM_GETROUTE, NLM_F_REPLACE = 26, 0x100
RT_TABLE_LOCAL, RTPROT_BOOT, RTPROT_STATIC = 255, 3, 4  # routes people and nestlab add: `ip route add` says boot
RT_SCOPE_UNIVERSE, RT_SCOPE_SITE, IFA_F_PERMANENT, IFA_FLAGS = 0, 200, 0x80, 8
_RTMSG = struct.Struct("=BBBBBBBBI")
_IFADDR = struct.Struct("=BBBBI")


@dataclass
class Held:
    """What a stopped node's namespace had: interfaces that were up, and the kernel's messages for its
    static routes and IPv6 addresses (hex)."""

    up: list[str] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)


def take_down(net_path: str) -> Held:
    """Keep aside what the namespace would lose, then take each interface but ``lo`` down."""
    fd, nl = namespaces.open_netlink(net_path)
    os.close(fd)
    try:
        links = [i for i in rtdump.interfaces(nl, counters=False) if i.admin_up and i.name != "lo"]
        routes = [_unflagged(body) for _t, body in nl.dump(RTM_GETROUTE, _RTMSG.pack(0, 0, 0, 0, 0, 0, 0, 0, 0)) if _static(body)]
        kept = [body for _t, body in nl.dump(RTM_GETADDR, _IFADDR.pack(socket.AF_INET6, 0, 0, 0, 0)) if _own_address(body)]
        nl.run(*(set_state(i.index, False) for i in links))
    finally:
        nl.close()
    return Held([i.name for i in links], [b.hex() for b in routes], [b.hex() for b in kept])


def bring_up(net_path: str, held: Held) -> None:
    """Interfaces up again, then the addresses and routes they lost (one that needs another first is
    sent again once the others are in)."""
    fd, nl = namespaces.open_netlink(net_path)
    os.close(fd)
    try:
        index = {i.name: i.index for i in rtdump.interfaces(nl, counters=False)}
        with _announced(net_path):
            nl.run(*(set_state(index[name], True) for name in held.up if name in index))
        nl.run(
            *(Request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, bytes.fromhex(b), "restore an address") for b in held.addresses)
        )
        waiting = [Request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, bytes.fromhex(b), "restore a route") for b in held.routes]
        for _round in range(3):
            waiting = [req for req in waiting if not _sent(nl, req)]
        if waiting:
            nl.run(*waiting)  # what no round could send: the kernel says why
    finally:
        nl.close()


@contextmanager
def _announced(net_path: str) -> Iterator[None]:
    """Interfaces brought up in the block tell their peers they are back (a gratuitous ARP, the kernel's
    ``arp_notify``): a peer that tried the node while it was stopped holds a pending or failed neighbour
    entry, which would otherwise fail its next packets for up to 3 s."""
    key = "net.ipv4.conf.all.arp_notify"
    with namespaces.entered(net_path):
        with open("/proc/sys/" + key.replace(".", "/")) as fh:
            before = fh.read().strip()
        sysctl.write(key, "1")
        try:
            yield
        finally:
            sysctl.write(key, before)


def _sent(nl: Netlink, req: Request) -> bool:
    try:
        nl.run(req)
    except NetlinkError as exc:
        if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENODEV, errno.EINVAL):
            return False
        raise
    return True


def _static(body: bytes) -> bool:
    """A route someone added (not the kernel's own, nor a routing daemon's, which comes back with it)."""
    _family, _dst, _src, _tos, table, proto, _scope, _type, _flags = _RTMSG.unpack_from(body)
    return table != RT_TABLE_LOCAL and proto in (RTPROT_BOOT, RTPROT_STATIC)


def _unflagged(body: bytes) -> bytes:
    """The route without the state the kernel reports in its flags (``linkdown`` once a peer has
    stopped): a request carrying them is refused."""
    return body[:8] + bytes(4) + body[12:]


def _own_address(body: bytes) -> bool:
    """An IPv6 address given to an interface: global or site scope (a link-local one the kernel makes
    again, ``::1`` stays with ``lo``)."""
    _family, _prefix, flags, scope, _index = _IFADDR.unpack_from(body)
    extra = attrs(body, _IFADDR.size).get(IFA_FLAGS)
    flags |= struct.unpack("=I", extra)[0] if extra else 0
    return bool(flags & IFA_F_PERMANENT) and scope in (RT_SCOPE_UNIVERSE, RT_SCOPE_SITE)

"""A thin, batched rtnetlink transport for the hot deploy path.

pyroute2 encodes an ``RTM_NEWLINK`` for a veth pair in ~390 µs (measured on this
project's CI machine); deploying 500 nodes needs ~1500 such messages, so the
messages on the deploy/destroy path are packed here with ``struct`` (~5 µs each)
and sent several per ``sendmsg``.  Everything else (inspect, later tc) goes
through pyroute2.  A socket is bound to the network namespace of the thread
that opens it, which is how one process talks to every namespace of a lab.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from dataclasses import dataclass

NLMSG_ERROR, NLMSG_DONE = 2, 3
SO_RCVBUFFORCE = 33
RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK, RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR, RTM_NEWROUTE = 16, 17, 18, 20, 21, 22, 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x300, 0x200, 0x400
IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_LINK, IFLA_MASTER = 1, 3, 4, 5, 10
IFLA_LINKINFO, IFLA_IFALIAS, IFLA_NET_NS_FD = 18, 20, 28
IFLA_NUM_TX_QUEUES, IFLA_NUM_RX_QUEUES = 31, 32
IFLA_PROP_LIST, IFLA_ALT_IFNAME, RTM_NEWLINKPROP, NLA_F_NESTED = 52, 53, 108, 0x8000
IFLA_AF_SPEC, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE = 26, 8, 1
IFLA_GROUP = 27
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1
IFLA_BR_MCAST_SNOOPING = 23
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_DST, RTA_GATEWAY = 1, 5
IFF_UP = 0x1

_HDR = struct.Struct("=IHHII")
_IFINFO = struct.Struct("=BxHiII")
_IFADDR = struct.Struct("=BBBBI")
_RTA = struct.Struct("=HH")
_ERR = struct.Struct("=i")
_RTMSG = struct.Struct("=BBBBBBBBI")


class NetlinkError(OSError):
    """A kernel refusal, carrying the request that caused it."""


def attr(kind: int, payload: bytes) -> bytes:
    """One rtattr, padded to 4 bytes."""
    raw = _RTA.pack(_RTA.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def name_attr(kind: int, value: str) -> bytes:
    return attr(kind, value.encode() + b"\0")


def u32_attr(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("=I", value))


def ifinfo(index: int = 0, up: bool = False) -> bytes:
    return _IFINFO.pack(socket.AF_UNSPEC, 0, index, IFF_UP if up else 0, IFF_UP if up else 0)


@dataclass(frozen=True)
class Request:
    """One rtnetlink message body with its type, flags and a human description."""

    type: int
    flags: int
    body: bytes
    what: str


def new_bridge(name: str, alias: str, exclusive: bool = True, snooping: bool = True) -> Request:
    """A bridge, up (``exclusive=False``: or the one of that name already there, set up the same way).

    ``snooping=False``: multicast snooping off until ``snooping(name)``.  While it is on, every port that
    comes up or goes down makes the bridge restart the multicast timers of all its ports
    (``br_port_state_selection``): O(ports²) for a bridge being filled.  Switched on once the ports are
    up, it costs one pass over them.
    """
    data = b"" if snooping else attr(IFLA_INFO_DATA, _snooping_attr(False))
    linkinfo = attr(IFLA_LINKINFO, name_attr(IFLA_INFO_KIND, "bridge") + data)
    body = ifinfo(up=True) + name_attr(IFLA_IFNAME, name) + name_attr(IFLA_IFALIAS, alias) + linkinfo
    return Request(RTM_NEWLINK, NLM_F_CREATE | (NLM_F_EXCL if exclusive else 0), body, f"create bridge {name}")


def snooping(name: str) -> Request:
    """Switch bridge ``name``'s multicast snooping on (the kernel's default)."""
    linkinfo = attr(IFLA_LINKINFO, name_attr(IFLA_INFO_KIND, "bridge") + attr(IFLA_INFO_DATA, _snooping_attr(True)))
    return Request(RTM_NEWLINK, 0, ifinfo() + name_attr(IFLA_IFNAME, name) + linkinfo, f"multicast snooping on {name}")


def _snooping_attr(on: bool) -> bytes:
    return attr(IFLA_BR_MCAST_SNOOPING, bytes([int(on)]))


def new_veth(
    name: str,
    peer: str,
    peer_ns_fd: int,
    *,
    alias: str,
    mtu: int | None = None,
    master: int | None = None,
    macs: tuple[str | None, str | None] = (None, None),
    up: bool = True,
    group: int = 0,
) -> Request:
    """A veth pair: ``name`` in the socket's namespace (up unless ``up`` is False), ``peer`` created directly in
    ``peer_ns_fd``; ``macs``: the two ends' MAC addresses, where given; ``group``: ``name``'s interface group."""
    common = name_attr(IFLA_IFALIAS, alias) + (u32_attr(IFLA_MTU, mtu) if mtu else b"")
    # One queue each way, as veth ends up with anyway: asked for at birth, the kernel skips shrinking
    # the per-CPU default after registration, which waits for an RCU grace period per end.
    common += u32_attr(IFLA_NUM_TX_QUEUES, 1) + u32_attr(IFLA_NUM_RX_QUEUES, 1)
    # The peer cannot be set up here: veth_open() runs before the pair is joined (ENOTCONN).
    peer_body = ifinfo() + name_attr(IFLA_IFNAME, peer) + u32_attr(IFLA_NET_NS_FD, peer_ns_fd) + common + _mac_attr(macs[1])
    data = attr(IFLA_INFO_DATA, attr(VETH_INFO_PEER, peer_body))
    linkinfo = attr(IFLA_LINKINFO, name_attr(IFLA_INFO_KIND, "veth") + data)
    body = ifinfo(up=up) + name_attr(IFLA_IFNAME, name) + common + _mac_attr(macs[0]) + linkinfo
    if master:
        body += u32_attr(IFLA_MASTER, master)
    if group:
        body += u32_attr(IFLA_GROUP, group)
    return Request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body, f"create veth {name}<->{peer}")


def _mac_attr(mac: str | None) -> bytes:
    return attr(IFLA_ADDRESS, bytes.fromhex(mac.replace(":", ""))) if mac else b""


def sublink(
    kind: str, name: str, data: bytes, *, alias: str, parent: int = 0, ns_fd: int | None = None, mtu: int | None = None
) -> Request:
    """A device of ``kind`` with its ``IFLA_INFO_DATA`` attributes ``data``, on ``parent`` (an ifindex in the
    socket's namespace, 0 for none), born in ``ns_fd`` (None: the socket's namespace)."""
    linkinfo = attr(IFLA_LINKINFO, name_attr(IFLA_INFO_KIND, kind) + attr(IFLA_INFO_DATA, data))
    body = ifinfo() + name_attr(IFLA_IFNAME, name) + name_attr(IFLA_IFALIAS, alias)
    if ns_fd is not None:
        body += u32_attr(IFLA_NET_NS_FD, ns_fd)
    if parent:
        body += u32_attr(IFLA_LINK, parent)
    if mtu:
        body += u32_attr(IFLA_MTU, mtu)
    return Request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body + linkinfo, f"create {kind} {name}")


IFLA_VXLAN_ID, IFLA_VXLAN_GROUP, IFLA_VXLAN_LINK, IFLA_VXLAN_LOCAL, IFLA_VXLAN_LEARNING = 1, 2, 3, 4, 7
IFLA_VXLAN_PORT_RANGE, IFLA_VXLAN_PORT = 10, 15


def vxlan_data(vni: int, remote: str, port: int, local: str | None = None, src_port: int = 0, dev_index: int = 0) -> bytes:
    """``IFLA_INFO_DATA`` of a point-to-point VXLAN device (no learning): to ``remote``:``port`` (from
    ``local``, out of ``dev_index``, from UDP ``src_port``, where given)."""
    data = (
        u32_attr(IFLA_VXLAN_ID, vni)
        + attr(IFLA_VXLAN_GROUP, socket.inet_aton(remote))
        + attr(IFLA_VXLAN_PORT, struct.pack("!H", port))
        + attr(IFLA_VXLAN_LEARNING, b"\0")
    )
    if local:
        data += attr(IFLA_VXLAN_LOCAL, socket.inet_aton(local))
    if src_port:
        data += attr(IFLA_VXLAN_PORT_RANGE, struct.pack("!HH", src_port, src_port))
    if dev_index:
        data += u32_attr(IFLA_VXLAN_LINK, dev_index)
    return data


def move(index: int, ns_fd: int, new_name: str) -> Request:
    """Move interface ``index`` into another namespace under ``new_name``."""
    body = ifinfo(index) + name_attr(IFLA_IFNAME, new_name) + u32_attr(IFLA_NET_NS_FD, ns_fd)
    return Request(RTM_NEWLINK, 0, body, f"move interface {index} as {new_name}")


def route(gateway: str, dst: str | None = None) -> Request:
    """An IPv4 route to ``dst`` (CIDR; default route when None) via ``gateway``."""
    addr, _, plen = (dst or "0.0.0.0/0").partition("/")
    rtmsg = _RTMSG.pack(socket.AF_INET, int(plen), 0, 0, 254, 3, 0, 1, 0)  # main table, proto boot, universe, unicast
    body = rtmsg + (attr(RTA_DST, socket.inet_aton(addr)) if dst else b"") + attr(RTA_GATEWAY, socket.inet_aton(gateway))
    return Request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body, f"add route to {dst or 'default'} via {gateway}")


RTM_NEWTCLASS, NLM_F_REPLACE = 40, 0x100
TCA_KIND, TCA_OPTIONS, TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 2, 1, 6, 7
_TCMSG = struct.Struct("=BxxxiIII")
_RATESPEC = struct.Struct("=BBHhHI")
TC_LINKLAYER_ETHERNET = 1


def _ticks_per_usec() -> float:
    """psched ticks per microsecond (/proc/net/psched), as tc computes HTB buffers."""
    try:
        with open("/proc/net/psched") as fh:
            t2us, us2t, clock_res, _ = (int(x, 16) for x in fh.read().split())
        return t2us / us2t * (clock_res / 1_000_000 if clock_res != 1_000_000_000 else 1)
    except (OSError, ValueError):
        return 1.0


_TICKS = _ticks_per_usec()


def htb_class(index: int, handle: int, parent: int, bits: int, burst: int) -> Request:
    """Create or replace an HTB class of ``bits``/s (64-bit) with ``burst`` bytes, ceil = rate."""
    rate = bits // 8
    spec = _RATESPEC.pack(0, TC_LINKLAYER_ETHERNET, 0, -1, 0, min(rate, 0xFFFFFFFF))
    buffer = int(1_000_000 * burst / rate * _TICKS)
    parms = spec + spec + struct.pack("=IIIII", buffer, buffer, 0, 0, 0)
    options = attr(TCA_HTB_PARMS, parms)
    if rate > 0xFFFFFFFF:
        options += attr(TCA_HTB_RATE64, struct.pack("=Q", rate)) + attr(TCA_HTB_CEIL64, struct.pack("=Q", rate))
    body = _TCMSG.pack(socket.AF_UNSPEC, index, handle, parent, 0) + name_attr(TCA_KIND, "htb") + attr(TCA_OPTIONS, options)
    return Request(
        RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_REPLACE, body, f"set HTB class {handle:x} on interface {index} to {bits} bit/s"
    )


RTM_NEWQDISC, RTM_GETQDISC = 36, 38
TCA_HTB_INIT, TC_H_ROOT = 2, 0xFFFFFFFF


def htb_root(index: int, default_minor: int = 1) -> Request:
    """Create or replace an HTB root qdisc 1: whose unclassified traffic goes to class 1:``default_minor``."""
    glob = struct.pack(
        "=IIIII", 3, 10, default_minor, 0, 0
    )  # struct tc_htb_glob: version, rate2quantum, defcls, debug, direct_pkts
    body = (
        _TCMSG.pack(socket.AF_UNSPEC, index, 0x10000, TC_H_ROOT, 0)
        + name_attr(TCA_KIND, "htb")
        + attr(TCA_OPTIONS, attr(TCA_HTB_INIT, glob))
    )
    return Request(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, body, f"set an HTB root on interface {index}")


def pfifo(index: int, handle: int, parent: int, limit: int) -> Request:
    """Create or replace a pfifo qdisc of ``limit`` packets."""
    body = (
        _TCMSG.pack(socket.AF_UNSPEC, index, handle, parent, 0)
        + name_attr(TCA_KIND, "pfifo")
        + attr(TCA_OPTIONS, struct.pack("=I", limit))
    )
    return Request(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, body, f"set pfifo on interface {index}")


TCA_NETEM_CORR, TCA_NETEM_DELAY_DIST, TCA_NETEM_REORDER, TCA_NETEM_CORRUPT, TCA_NETEM_LOSS = 1, 2, 3, 4, 5
NETEM_LOSS_GE = 2  # struct tc_netem_gemodel: p, r, h, k1


def _share(percent: float) -> int:
    return min(0xFFFFFFFF, int(percent / 100 * 0xFFFFFFFF))


def netem(
    index: int,
    handle: int,
    parent: int,
    *,
    limit: int,
    delay: int = 0,
    jitter: int = 0,
    loss: float = 0,
    loss_corr: float = 0,
    duplicate: float = 0,
    prob_reorder: float = 0,
    prob_corrupt: float = 0,
    table: list[int] | None = None,
    gemodel: tuple[float, float, float, float] | None = None,
) -> Request:
    """A netem qdisc (times in µs, shares in %), with an optional delay distribution ``table`` (tc's .dist values)
    and Gilbert-Elliott loss ``gemodel`` (p, r, 1-h, 1-k in %, as tc takes them).

    pyroute2 can send neither, so this message is packed here.
    """
    qopt = struct.pack(
        "=IIIIII", int(delay * _TICKS), limit, _share(loss), 1 if prob_reorder else 0, _share(duplicate), int(jitter * _TICKS)
    )
    extra = b""
    if loss_corr:
        extra += attr(TCA_NETEM_CORR, struct.pack("=III", 0, _share(loss_corr), 0))
    if table:
        extra += attr(TCA_NETEM_DELAY_DIST, struct.pack(f"={len(table)}h", *table))
    if prob_reorder:
        extra += attr(TCA_NETEM_REORDER, struct.pack("=II", _share(prob_reorder), 0))
    if prob_corrupt:
        extra += attr(TCA_NETEM_CORRUPT, struct.pack("=II", _share(prob_corrupt), 0))
    if gemodel:
        p, r, bad_loss, good_loss = gemodel
        ge = struct.pack("=4I", _share(p), _share(r), 0xFFFFFFFF - _share(bad_loss), _share(good_loss))
        extra += attr(TCA_NETEM_LOSS, attr(NETEM_LOSS_GE, ge))
    body = (
        _TCMSG.pack(socket.AF_UNSPEC, index, handle, parent, 0) + name_attr(TCA_KIND, "netem") + attr(TCA_OPTIONS, qopt + extra)
    )
    return Request(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, body, f"set netem on interface {index}")


def set_mtu(index: int, mtu: int) -> Request:
    return Request(
        RTM_NEWLINK,
        0,
        _IFINFO.pack(socket.AF_UNSPEC, 0, index, 0, 0) + u32_attr(IFLA_MTU, mtu),
        f"set interface {index} mtu {mtu}",
    )


def set_state(index: int, up: bool) -> Request:
    """Bring an interface (by index) up or down."""
    body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, IFF_UP if up else 0, IFF_UP)
    return Request(RTM_NEWLINK, 0, body, f"set interface {index} {'up' if up else 'down'}")


def set_up(name: str, alias: str | None = None, link_local: bool = True) -> Request:
    """Bring an interface up by name (``lo`` is always ifindex 1), marking it with ``alias`` if given
    (a new link's own IFLA_IFALIAS is not kept by the kernel: only a change sets it); without
    ``link_local``, it generates no IPv6 link-local address once it has a carrier (its peer not up yet)."""
    if name == "lo":
        return Request(RTM_NEWLINK, 0, ifinfo(1, up=True), "set lo up")
    marker = name_attr(IFLA_IFALIAS, alias) if alias else b""
    quiet = b"" if link_local else attr(IFLA_AF_SPEC, _NO_LINK_LOCAL)
    return Request(RTM_NEWLINK, 0, ifinfo(up=True) + name_attr(IFLA_IFNAME, name) + marker + quiet, f"set {name} up")


_NO_LINK_LOCAL = attr(socket.AF_INET6, attr(IFLA_INET6_ADDR_GEN_MODE, bytes([IN6_ADDR_GEN_MODE_NONE])))


def no_link_local(name: str) -> Request:
    """Make interface ``name`` generate no IPv6 link-local address when it comes up (before it does)."""
    return Request(
        RTM_NEWLINK,
        0,
        ifinfo() + name_attr(IFLA_IFNAME, name) + attr(IFLA_AF_SPEC, _NO_LINK_LOCAL),
        f"no link-local address on {name}",
    )


def set_master(name: str, master: int) -> Request:
    """Enslave an interface (by name) to a bridge and bring it up."""
    body = ifinfo(up=True) + name_attr(IFLA_IFNAME, name) + u32_attr(IFLA_MASTER, master)
    return Request(RTM_NEWLINK, 0, body, f"attach {name} to its bridge")


def add_alt_name(name: str, alt: str) -> Request:
    """Give interface ``name`` a second name (up to 127 characters; ``ip link show ALT`` finds it)."""
    props = attr(IFLA_PROP_LIST | NLA_F_NESTED, name_attr(IFLA_ALT_IFNAME, alt))
    return Request(
        RTM_NEWLINKPROP, NLM_F_CREATE | NLM_F_EXCL, ifinfo() + name_attr(IFLA_IFNAME, name) + props, f"name {name} also {alt}"
    )


def get_link(name: str) -> Request:
    return Request(RTM_GETLINK, 0, ifinfo() + name_attr(IFLA_IFNAME, name), f"look up {name}")


def del_link(name: str) -> Request:
    return Request(RTM_DELLINK, 0, ifinfo() + name_attr(IFLA_IFNAME, name), f"delete {name}")


IFA_F_NODAD = 0x02


def new_addr(index: int, cidr: str, what: str, flags: int = 0) -> Request:
    """Add ``cidr`` to interface ``index`` (``flags``: e.g. IFA_F_NODAD, an IPv6 address usable at once)."""
    addr, _, plen = cidr.partition("/")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    packed = socket.inet_pton(family, addr)
    body = _IFADDR.pack(family, int(plen), flags, 0, index) + attr(IFA_LOCAL, packed) + attr(IFA_ADDRESS, packed)
    return Request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body, f"add {cidr} to {what}")


# Per sendmsg: bytes well under a socket's default send buffer, and few enough messages that their
# answers (an interface lookup is answered with the whole interface, ~2-3 KiB) fit the receive buffer.
SEND_MAX, BATCH_MAX, RCVBUF = 1 << 16, 256, 4 << 20


def messages(data: bytes | memoryview) -> list[tuple[int, int, bytes]]:
    """Split what one ``recv`` returned into (type, sequence, body) per netlink message."""
    out, off, view = [], 0, memoryview(data)
    while off + _HDR.size <= len(view):
        length, mtype, _flags, seq, _pid = _HDR.unpack_from(view, off)
        out.append((mtype, seq, bytes(view[off + _HDR.size : off + length])))
        off += (length + 3) & ~3
    return out


def attrs(body: bytes, offset: int) -> dict[int, bytes]:
    """The rtattrs of a message body from ``offset`` on, by type (nested ones left packed)."""
    found, unpack, end = {}, _RTA.unpack_from, len(body) - 4  # locals: this loop runs for every attribute of a dump
    while offset <= end:
        length, kind = unpack(body, offset)
        if length < 4:
            break
        found[kind & 0x3FFF] = body[offset + 4 : offset + length]
        offset += (length + 3) & ~3
    return found


_local = threading.local()


def _buffer() -> bytearray:
    """This thread's receive buffer (one per socket would hold 64 KiB per node of a deploy)."""
    try:
        buf: bytearray = _local.buf
    except AttributeError:
        buf = _local.buf = bytearray(1 << 16)
    return buf


class Netlink:
    """A NETLINK_ROUTE socket in the namespace of the thread that created it (``groups``: multicast to join),
    or ``sock``, one a :class:`Netlink` made in another process (see :mod:`.spares`)."""

    def __init__(self, groups: int = 0, sock: socket.socket | None = None) -> None:
        self.sock = sock or socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        if sock is None:
            try:  # past net.core.rmem_max (root may): multicast bursts and dump answers must not overflow it
                self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
            except PermissionError:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            self.sock.bind((0, groups))
        self._seq = 0

    def close(self) -> None:
        self.sock.close()

    def dump(self, mtype: int, body: bytes) -> list[tuple[int, bytes]]:
        """Every (type, body) a dump request answers with (e.g. ``RTM_GETLINK``: one ``RTM_NEWLINK`` per interface)."""
        self._seq += 1
        self.sock.send(_HDR.pack(_HDR.size + len(body), mtype, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0) + body)
        found: list[tuple[int, bytes]] = []
        while True:
            buf = _buffer()
            n = self.sock.recv_into(buf)
            for kind, seq, payload in messages(memoryview(buf)[:n]):
                if seq != self._seq:
                    continue
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR and _ERR.unpack_from(payload)[0]:
                    code = -_ERR.unpack_from(payload)[0]
                    raise NetlinkError(code, f"dump {mtype}: {os.strerror(code)}")
                found.append((kind, payload))

    def run(self, *requests: Request) -> list[int]:
        """Send ``requests`` in as few batches as the socket takes, wait for each answer.

        Returns, per request, the interface index the kernel answered with
        (``RTM_GETLINK``) or 0.  Raises :class:`NetlinkError` naming the first
        request the kernel refused (every request is still tried, as in one batch).
        """
        first = self._seq + 1
        results = [0] * len(requests)
        errors: list[NetlinkError] = []
        batch, count = bytearray(), 0
        for req in requests:
            self._seq += 1
            flags = NLM_F_REQUEST | req.flags | (0 if req.type == RTM_GETLINK else NLM_F_ACK)
            message = _HDR.pack(_HDR.size + len(req.body), req.type, flags, self._seq, 0) + req.body
            if batch and (len(batch) + len(message) > SEND_MAX or count == BATCH_MAX):
                self._exchange(batch, count, first, requests, results, errors)
                batch, count = bytearray(), 0
            batch += message
            count += 1
        if batch:
            self._exchange(batch, count, first, requests, results, errors)
        if errors:
            raise errors[0]
        return results

    def _exchange(
        self,
        batch: bytearray,
        count: int,
        first: int,
        requests: tuple[Request, ...],
        results: list[int],
        errors: list[NetlinkError],
    ) -> None:
        """One ``sendmsg`` of ``count`` messages, and their answers into ``results``/``errors``."""
        self.sock.send(batch)
        pending, buf = count, _buffer()
        while pending:
            n = self.sock.recv_into(buf)
            view = memoryview(buf)[:n]
            off = 0
            while off < n:
                length, mtype, _flags, seq, _pid = _HDR.unpack_from(view, off)
                slot = seq - first
                if 0 <= slot < len(requests):
                    if mtype == NLMSG_ERROR:
                        (code,) = _ERR.unpack_from(view, off + _HDR.size)
                        if code:
                            errors.append(NetlinkError(-code, f"{requests[slot].what}: {os.strerror(-code)}"))
                        pending -= 1
                    elif mtype == RTM_NEWLINK:
                        results[slot] = _IFINFO.unpack_from(view, off + _HDR.size)[2]
                        pending -= 1
                off += (length + 3) & ~3

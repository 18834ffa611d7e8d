"""``nestlab capture``: packets from any interface of a lab, as pcapng, with nothing installed in the node.

A packet socket is opened inside the interface's namespace (a thread ``setns``-es there for the
``socket()`` call, so the socket belongs to the node).  It is first bound with protocol 0, which
receives nothing, so the BPF filter (compiled by libpcap, as tcpdump compiles it) is in place
before the first packet.  Each packet carries the kernel's receive timestamp (nanoseconds) and
its direction.  Several interfaces go into one pcapng file, one Interface Description Block each
(python-pcapng writes the blocks); ``-w -`` streams it to a pipe (``| wireshark -k -i -``),
flushing each packet.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from pcapng import FileWriter, blocks

from .. import names
from ..backends.kernel import namespaces
from ..errors import LabError

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER, SO_TIMESTAMPNS = 26, 35
PACKET_OUTGOING = 4
ARPHRD_ETHER, ARPHRD_LOOPBACK = 1, 772
LINKTYPE_ETHERNET, LINKTYPE_RAW = 1, 101
EPB_INBOUND, EPB_OUTBOUND = 1, 2
SNAPLEN = 262144
_TIMESPEC = struct.Struct("=qq")


@dataclass
class Tap:
    """One interface being captured: where it is and its packet socket."""

    node: str
    iface: str
    sock: socket.socket
    linktype: int
    program: ctypes.Array[ctypes.c_char] | None = None  # the filter's instructions, alive as long as the socket

    @property
    def ref(self) -> str:
        return f"{self.node}:{self.iface}"


class _BpfProgram(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.c_void_p)]


def compile_filter(expression: str, linktype: int) -> bytes:
    """The classic BPF instructions (8 bytes each) of a tcpdump filter expression, by libpcap's compiler."""
    path = ctypes.util.find_library("pcap")
    if path is None:
        raise LabError("a capture filter needs libpcap: apt-get install libpcap0.8 (tshark and tcpdump bring it)")
    pcap = ctypes.CDLL(path)
    pcap.pcap_open_dead.restype = ctypes.c_void_p
    pcap.pcap_geterr.restype = ctypes.c_char_p
    handle = ctypes.c_void_p(pcap.pcap_open_dead(linktype, SNAPLEN))
    program = _BpfProgram()
    try:
        if pcap.pcap_compile(handle, ctypes.byref(program), expression.encode(), 1, ctypes.c_uint(0xFFFFFFFF)) != 0:
            raise LabError(f"capture filter '{expression}': {pcap.pcap_geterr(handle).decode()}")
        code = ctypes.string_at(program.bf_insns, program.bf_len * 8)
        pcap.pcap_freecode(ctypes.byref(program))
        return code
    finally:
        pcap.pcap_close(handle)


def open_tap(lab: str, node: str, iface: str, expression: str | None) -> Tap:
    """A packet socket on ``node``'s ``iface`` (a node, switch or emulated host), filtered by ``expression``."""
    path = names.netns_path(lab, node)
    if not os.path.exists(path):
        raise LabError(f"lab {lab} has no running node, switch or host '{node}'")
    with namespaces.entered(path):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.bind((iface, 0))  # protocol 0: nothing arrives yet
    except OSError:
        sock.close()
        raise LabError(f"{node} has no interface '{iface}'") from None
    hatype = sock.getsockname()[3]
    tap = Tap(node, iface, sock, LINKTYPE_ETHERNET if hatype in (ARPHRD_ETHER, ARPHRD_LOOPBACK) else LINKTYPE_RAW)
    if expression:
        code = compile_filter(expression, tap.linktype)
        tap.program = ctypes.create_string_buffer(code, len(code))
        sock.setsockopt(
            socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("HxxxxxxQ", len(code) // 8, ctypes.addressof(tap.program))
        )
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((iface, ETH_P_ALL))
    return tap


def capture(
    taps: list[Tap],
    out: BinaryIO,
    *,
    count: int | None = None,
    duration: float | None = None,
    on_packet: Callable[[Tap, int], object] | None = None,
) -> int:
    """Write what ``taps`` see to ``out`` as pcapng until ``count`` packets or ``duration`` seconds; returns the count.

    Stops early, keeping what was written, on Ctrl-C or when the reader of ``out`` goes away.
    """
    shb = blocks.SectionHeader(options={"shb_userappl": "nestlab capture"})
    for tap in taps:
        shb.new_member(
            blocks.InterfaceDescription,
            link_type=tap.linktype,
            snaplen=SNAPLEN,
            options={"if_name": tap.ref, "if_tsresol": b"\x09"},
        )
    writer = FileWriter(out, shb)
    out.flush()
    by_fd = {tap.sock.fileno(): (i, tap) for i, tap in enumerate(taps)}
    deadline = time.monotonic() + duration if duration else None
    written = 0
    try:
        while count is None or written < count:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                break
            ready, _, _ = select.select(list(by_fd), [], [], wait)
            for fd in ready:
                interface, tap = by_fd[fd]
                data, ancillary, _flags, address = tap.sock.recvmsg(SNAPLEN, socket.CMSG_SPACE(_TIMESPEC.size))
                stamp = next((_TIMESPEC.unpack(c[2]) for c in ancillary if c[1] == SO_TIMESTAMPNS), None)
                ns = stamp[0] * 1_000_000_000 + stamp[1] if stamp else time.time_ns()
                packet = shb.new_member(
                    blocks.EnhancedPacket,
                    interface_id=interface,
                    timestamp_high=ns >> 32,
                    timestamp_low=ns & 0xFFFFFFFF,
                    packet_data=data,
                    packet_len=len(data),
                    options={"epb_flags": EPB_OUTBOUND if address[2] == PACKET_OUTGOING else EPB_INBOUND},
                )
                writer.write_block(packet)
                out.flush()
                written += 1
                if on_packet:
                    on_packet(tap, written)
                if count is not None and written >= count:
                    break
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    finally:
        for tap in taps:
            tap.sock.close()
    return written

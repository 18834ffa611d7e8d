"""Multipath TCP in a node, through the kernel path manager's generic netlink family (pyroute2)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import namespaces

# pyroute2 is imported where it is used: importing it costs every CLI call 0.2 s (a minute in the
# VM tier's software emulation), and most calls never touch MPTCP.

# MPTCP_PM_ADDR_FLAG_* (include/uapi/linux/mptcp.h)
FLAGS = {"signal": 1, "subflow": 2, "fullmesh": 2 | 8}
# INET_DIAG_ULP_INFO_MPTCP and its MPTCP_SUBFLOW_ATTR_* (include/uapi/linux/inet_diag.h, mptcp.h)
_ULP_MPTCP, _TOKEN_LOC, _ID_REM, _ID_LOC = 3, 2, 9, 10
_TCP_INFO_EXT = 1 << (2 - 1)  # INET_DIAG_INFO


def configure(net_path: str, subflows: int, add_addr_accepted: int, flag: str, endpoints: list[tuple[str, str]]) -> None:
    """Set the node's limits and make each (address, device) an endpoint of kind ``flag``."""
    with _path_manager(net_path) as pm:
        pm.limits("set", subflows=subflows, add_addr_accepted=add_addr_accepted)
        pm.endpoint("flush")
        for address, dev in endpoints:
            # pyroute2 declares the interface index attribute as bytes; it is a native-endian s32.
            pm.endpoint("add", addr=address, flags=FLAGS[flag], if_idx=struct.pack("=i", socket.if_nametoindex(dev)))


def endpoints(net_path: str) -> list[dict[str, Any]]:
    """The node's endpoints as the kernel has them: address, id, flags, device index."""
    with _path_manager(net_path) as pm:
        found: list[dict[str, Any]] = []
        for msg in pm.endpoint("show"):
            attrs = dict(msg.get_attr("MPTCP_PM_ATTR_ADDR")["attrs"])
            found.append(
                {
                    "address": attrs.get("MPTCP_PM_ADDR_ATTR_ADDR4"),
                    "id": attrs.get("MPTCP_PM_ADDR_ATTR_ID"),
                    "flags": attrs.get("MPTCP_PM_ADDR_ATTR_FLAGS"),
                }
            )
        return found


@contextmanager
def _path_manager(net_path: str) -> Iterator[Any]:
    """The kernel's MPTCP path manager (pyroute2's generic netlink socket) inside the node's namespace."""
    from pyroute2 import MPTCP

    with namespaces.entered(net_path):
        pm = MPTCP()
        try:
            yield pm
        finally:
            pm.close()


def _attrs(data: bytes) -> dict[int, bytes]:
    """Netlink attributes in ``data``, by type (nested ones left as bytes)."""
    out, at = {}, 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, at)
        if length < 4:
            break
        out[kind & 0x3FFF] = data[at + 4 : at + length]
        at += (length + 3) & ~3
    return out


def subflows(net_path: str) -> list[dict[str, Any]]:
    """The node's MPTCP connections, each with its TCP subflows (addresses, device, bytes, retransmits).

    Read through sock_diag (pyroute2's DiagSocket): a subflow is a TCP socket whose upper-layer
    protocol info carries the connection's local token, which groups subflows into connections.
    """
    from pyroute2 import DiagSocket, IPRoute
    from pyroute2.netlink.diag import SS_CONN

    with namespaces.entered(net_path), DiagSocket() as diag:
        diag.bind()
        sockets = diag.get_sock_stats(family=socket.AF_INET, states=SS_CONN, extensions=_TCP_INFO_EXT)
        devices = dict(socket.if_nameindex())
        with IPRoute() as ipr:  # an unbound subflow (the first) left by its address's device
            by_address = {m.get_attr("IFA_ADDRESS"): devices.get(m["index"]) for m in ipr.get_addr(family=socket.AF_INET)}
    connections: dict[int, dict[str, Any]] = {}
    for msg in sockets:
        ulp = msg.get_attr("INET_DIAG_ULP_INFO")
        if not ulp:
            continue
        raw = bytes.fromhex(ulp.replace(":", "")) if isinstance(ulp, str) else bytes(ulp)
        info = _attrs(_attrs(raw).get(_ULP_MPTCP, b""))
        if _TOKEN_LOC not in info:
            continue
        token = struct.unpack("=I", info[_TOKEN_LOC])[0]
        tcp = msg.get_attr("INET_DIAG_INFO") or {}
        conn = connections.setdefault(token, {"token": f"{token:08x}", "subflows": []})
        conn["subflows"].append(
            {
                "local": f"{msg['idiag_src']}:{msg['idiag_sport']}",
                "remote": f"{msg['idiag_dst']}:{msg['idiag_dport']}",
                "device": devices.get(msg["idiag_if"]) or by_address.get(msg["idiag_src"]),
                "id": info[_ID_LOC][0] if _ID_LOC in info else None,
                "remote_id": info[_ID_REM][0] if _ID_REM in info else None,
                "bytes_sent": tcp.get("tcpi_bytes_sent"),
                "bytes_received": tcp.get("tcpi_bytes_received"),
                "retransmits": tcp.get("tcpi_total_retrans"),
            }
        )
    return list(connections.values())

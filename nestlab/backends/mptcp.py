"""Multipath TCP in a node, through the kernel path manager's generic netlink family (pyroute2)."""

from __future__ import annotations

import socket
import struct

from pyroute2 import MPTCP

from . import namespaces

# MPTCP_PM_ADDR_FLAG_* (include/uapi/linux/mptcp.h)
FLAGS = {"signal": 1, "subflow": 2, "fullmesh": 2 | 8}


def configure(net_path: str, subflows: int, add_addr_accepted: int, flag: str, endpoints: list[tuple[str, str]]) -> None:
    """Set the node's limits and make each (address, device) an endpoint of kind ``flag``."""
    with namespaces.entered(net_path):
        pm = MPTCP()
        try:
            pm.limits("set", subflows=subflows, add_addr_accepted=add_addr_accepted)
            pm.endpoint("flush")
            for address, dev in endpoints:
                # pyroute2 declares the interface index attribute as bytes; it is a native-endian s32.
                pm.endpoint("add", addr=address, flags=FLAGS[flag], if_idx=struct.pack("=i", socket.if_nametoindex(dev)))
        finally:
            pm.close()


def endpoints(net_path: str) -> list[dict]:
    """The node's endpoints as the kernel has them: address, id, flags, device index."""
    with namespaces.entered(net_path):
        pm = MPTCP()
        try:
            found = []
            for msg in pm.endpoint("show"):
                attrs = dict(msg.get_attr("MPTCP_PM_ATTR_ADDR")["attrs"])
                found.append({"address": attrs.get("MPTCP_PM_ADDR_ATTR_ADDR4"), "id": attrs.get("MPTCP_PM_ADDR_ATTR_ID"),
                              "flags": attrs.get("MPTCP_PM_ADDR_ATTR_FLAGS")})
            return found
        finally:
            pm.close()

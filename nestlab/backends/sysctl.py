"""Sysctls: writing one inside the calling thread's namespaces, and those every node of a kind gets."""

from __future__ import annotations

import os

from ..errors import LabError

# Switch namespaces need no IPv6 on their ports and send no IGMP reports; no namespace of ours sends bridged traffic through iptables
# unless a host bridge asks for it (bridge_netfilter).
_NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1",
            "net.ipv4.igmp_link_local_mcast_reports": "0"}  # nor the bridge's own IGMP report, flooded to every port
_BRIDGE_NF = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.bridge.bridge-nf-call-arptables")


def write(key: str, value: str) -> None:
    """Write a sysctl as seen from the calling thread's namespaces."""
    try:
        with open("/proc/sys/" + key.replace(".", "/"), "w") as fh:
            fh.write(str(value))
    except FileNotFoundError:
        raise LabError(f"sysctl {key} does not exist in a network namespace of this kernel") from None
    except OSError as exc:
        raise LabError(f"sysctl {key}={value}: {exc.strerror}") from None


def of_node(kind: str, own: dict[str, str]) -> dict[str, str]:
    """A node's sysctls: its ``own`` over those its kind gets."""
    if kind in ("bridge", "ovs"):
        own = {**_NO_IPV6, **own}
    if kind in ("bridge", "ovs", "machine"):
        own = {**{k: "0" for k in _BRIDGE_NF if os.path.exists("/proc/sys/" + k.replace(".", "/"))}, **own}
    return own

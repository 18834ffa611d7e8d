"""Whether a lab uses IPv6, which decides if its hosts make link-local addresses (a quiet lab).

A host's interface that comes up with a link-local address sends duplicate address detection,
MLD reports and router solicitations to multicast groups, which a lab bridge floods to every port:
a 10 000-host lab kept both CPUs in softirq for minutes.  So hosts of a lab that does not use IPv6
make no link-local address (each interface nestlab brings up is told so by netlink, ``addrgenmode
none``; a sysctl would cost a /proc/sys lookup that grows with the number of namespaces): IPv6 stays on,
and an address a command adds later works, but nothing is sent unasked.  A lab uses IPv6 when its file
gives an IPv6 address (``ipv6:`` on a link or endpoint), has a router (``kind: frr``: OSPFv3, RIPng and
BGP's next hops need link-local addresses), runs babeld (Babel speaks over link-local IPv6), sets an IPv6 sysctl, or a command of it (``exec``,
``cmd``, stages, healthchecks, Kathará startup files) mentions IPv6.  The top-level ``ipv6:`` key
decides instead: ``true`` (the kernel's defaults everywhere), ``quiet``, or ``false`` (hosts have no IPv6).
"""

from __future__ import annotations

import re
from typing import Any

from ..registry import KINDS

_WORDS = re.compile(
    r"\bip\s+(-\S+\s+)*-6\b|\binet6\b|ipv6|\bip6|ping6|ospf6|ripng|traceroute6|ndisc6|radvd|dhcp6|babeld", re.IGNORECASE
)


def resolve(data: dict[str, Any]) -> bool | str:
    """A topology's ``ipv6:`` (``true``, ``"quiet"`` or ``false``), ``auto`` worked out from its plain data (as
    loaded from its file, containerlab's forms rewritten): ``"quiet"`` unless it uses IPv6."""
    chosen: bool | str = data.get("ipv6", "auto")
    if chosen != "auto":
        return chosen
    return True if uses_ipv6({k: v for k, v in data.items() if k != "ipv6"}) else "quiet"


def uses_ipv6(data: object) -> bool:
    """Whether plain topology data uses IPv6 (see the module's docstring)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "ipv6" and value not in (None, [], False) and not (isinstance(value, list) and not any(value)):
                return True
            if isinstance(value, str) and (
                (key == "kind" and value in KINDS and KINDS.get(value).router)
                or (key == "image" and any(k.router and k.name in value for k in KINDS.values()))
            ):
                return True  # a router (kind: frr, an frr image) speaks IPv6
            if key == "sysctls" and isinstance(value, dict) and any("ipv6" in str(k) for k in value):
                return True
            if key not in _SKIPPED and uses_ipv6(value):
                return True
        return False
    if isinstance(data, list):
        return any(uses_ipv6(item) for item in data)
    return isinstance(data, str) and bool(_WORDS.search(data))


_SKIPPED = ("mgmt", "mgmt-ipv6", "labels", "ipv6_pool")  # keys nestlab ignores or that hold no command

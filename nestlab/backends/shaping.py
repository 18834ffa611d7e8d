"""Rate limits on interfaces through pyroute2's tc support (HTB, 64-bit rates).

One HTB root (1:) whose default class 1:1 carries the rate; replacing the
class changes the rate in place.
"""

from __future__ import annotations

from . import namespaces


def set_rate(net_path: str, ifname: str, bits_per_second: int) -> None:
    """Limit what ``ifname`` (in the namespace at ``net_path``) sends to ``bits_per_second``."""
    from pyroute2 import IPRoute

    with namespaces.entered(net_path):
        ipr = IPRoute()
    try:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.tc("replace", "htb", index=index, handle="1:", default=1)
        ipr.tc("replace-class", "htb", index=index, handle="1:1", parent="1:", rate=f"{bits_per_second}bit")
    finally:
        ipr.close()

"""NAT for bridge mode: the host masquerades its bridge's subnet out of its NICs and forwards published ports.

Rules live in an nftables table ``nestlab`` inside the host's namespace (an
emulated host: traffic never leaves the lab).  ``nft`` is run once per host at
deploy; this is not on a hot path, so the Debian tool is used rather than
pyroute2's experimental nftables module.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess

from ..errors import LabError
from ..plan.desired import HostBridge
from . import namespaces


def ruleset(bridges: list[HostBridge]) -> str:
    post, pre = [], []
    for br in bridges:
        if not br.nat:
            continue
        for cidr in br.addresses:
            if ":" not in cidr:
                post.append(f'    ip saddr {ipaddress.IPv4Interface(cidr).network} oifname != "{br.name}" masquerade')
        for proto, port, target in br.publish:
            pre.append(f'    iifname != "{br.name}" {proto} dport {port} dnat to {target}')
    return (
        "table ip nestlab {\n"
        "  chain postrouting {\n    type nat hook postrouting priority srcnat;\n" + "\n".join(post) + "\n  }\n"
        "  chain prerouting {\n    type nat hook prerouting priority dstnat;\n" + "\n".join(pre) + "\n  }\n}\n"
    )


def apply(net_path: str, bridges: list[HostBridge]) -> None:
    """Install the NAT table for ``bridges`` in the namespace at ``net_path``."""
    if not shutil.which("nft"):
        raise LabError("bridge mode with nat: true needs nftables (`nft`): apt-get install nftables")
    with namespaces.entered(net_path):
        proc = subprocess.run(["nft", "-f", "-"], input=ruleset(bridges), capture_output=True, text=True)
    if proc.returncode:
        raise LabError(f"NAT rules were refused: {proc.stderr.strip()} (CONFIG_NFT_NAT and CONFIG_NFT_MASQ are needed; see `nestlab doctor`)")

"""Host-bridge rules in nftables: NAT for bridge mode, and Docker's default path for ``bridge_netfilter``.

* ``nat: true``: the host masquerades its bridge's subnet out of its NICs and forwards published ports.
* ``bridge_netfilter: true``: the rules ``dockerd`` installs for docker0 (FORWARD policy drop, the
  DOCKER-USER/ISOLATION chains, conntrack for replies, masquerade of the subnet and the DOCKER NAT
  chain), so bridged frames pay what they pay under Docker (bridge-nf-call-iptables is set on the host).

Rules live in an nftables table ``nestlab`` inside the host's namespace (an emulated host: traffic
never leaves the lab).  ``nft`` is run once per host at deploy; this is not on a hot path, so the
Debian tool is used rather than pyroute2's experimental nftables module.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess

from ...errors import LabError
from ...plan.objects import HostBridge
from . import namespaces


def _subnets(br: HostBridge) -> list[str]:
    return [str(ipaddress.IPv4Interface(cidr).network) for cidr in br.addresses if ":" not in cidr]


def ruleset(bridges: list[HostBridge]) -> str:
    post, pre, forward, isolation = [], [], [], []
    for br in bridges:
        if br.nat or br.netfilter:
            post += [f'    ip saddr {net} oifname != "{br.name}" masquerade' for net in _subnets(br)]
        pre += [f'    iifname != "{br.name}" {proto} dport {port} dnat to {target}' for proto, port, target in br.publish]
        if br.netfilter:
            isolation.append(f'    iifname "{br.name}" oifname != "{br.name}" jump isolation2')
            forward += [  # counted, as every iptables rule is
                f'    oifname "{br.name}" ct state related,established counter accept',
                f'    oifname "{br.name}" counter jump docker',
                f'    iifname "{br.name}" oifname != "{br.name}" counter accept',
                f'    iifname "{br.name}" oifname "{br.name}" counter accept',
            ]
    text = "table ip nestlab {\n"
    if forward:
        text += (
            "  chain docker_user {\n    return\n  }\n"
            "  chain docker {\n  }\n"
            "  chain isolation2 {\n"
            + "".join(f'    oifname "{br.name}" drop\n' for br in bridges if br.netfilter)
            + "    return\n  }\n"
            "  chain isolation1 {\n" + "\n".join(isolation) + "\n    return\n  }\n"
            "  chain forward {\n    type filter hook forward priority filter; policy drop;\n"
            "    jump docker_user\n    jump isolation1\n" + "\n".join(forward) + "\n  }\n"
            "  chain docker_nat {\n" + "".join(f'    iifname "{br.name}" return\n' for br in bridges if br.netfilter) + "  }\n"
        )
        pre.insert(0, "    fib daddr type local jump docker_nat")
    return text + (
        "  chain postrouting {\n    type nat hook postrouting priority srcnat;\n" + "\n".join(post) + "\n  }\n"
        "  chain prerouting {\n    type nat hook prerouting priority dstnat;\n" + "\n".join(pre) + "\n  }\n}\n"
    )


def apply(net_path: str, bridges: list[HostBridge]) -> None:
    """Install the rules for ``bridges`` in the namespace at ``net_path``."""
    if not shutil.which("nft"):
        raise LabError("bridge mode with nat: or bridge_netfilter: needs nftables (`nft`): apt-get install nftables")
    with namespaces.entered(net_path):
        proc = subprocess.run(["nft", "-f", "-"], input=ruleset(bridges), capture_output=True, text=True)
    if proc.returncode:
        raise LabError(
            f"host bridge rules were refused: {proc.stderr.strip()} (CONFIG_NFT_NAT, CONFIG_NFT_MASQ and CONFIG_NF_CONNTRACK are needed; see `nestlab doctor`)"
        )

"""FRR routers: a node's ``frr.conf``, ``daemons`` and ``vtysh.conf`` in its own folder (bound over
/etc/frr in its filesystem view), started with FRR's own init script, saved with vtysh.

Debian's ``frr`` package provides the daemons; nothing is installed in the node.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

from .. import names
from ..errors import LabError

INIT = "/usr/lib/frr/frrinit.sh"
CONFIG_DIR = "/etc/frr"
RUN_DIR = "/run/frr"
SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"}
# A protocol named in the configuration -> the daemon that speaks it.
_DAEMONS = (
    (r"^router bgp", "bgpd"), (r"^router ospf6", "ospf6d"), (r"^router ospf(?!6)", "ospfd"), (r"^router rip(?!ng)", "ripd"),
    (r"^router ripng", "ripngd"), (r"^router isis", "isisd"), (r"^router eigrp", "eigrpd"), (r"^router babel", "babeld"),
    (r"^router openfabric", "fabricd"), (r"^mpls ldp", "ldpd"), (r"^bfd", "bfdd"), (r"^(router pim|ip pim)", "pimd"),
    (r"^ip igmp|^ip pim", "pimd"), (r"^pbr-map", "pbrd"), (r"^vrrp|^ *vrrp ", "vrrpd"),
)
_ALL = ("bgpd", "ospfd", "ospf6d", "ripd", "ripngd", "isisd", "pimd", "ldpd", "nhrpd", "eigrpd", "babeld", "sharpd", "pbrd", "bfdd", "fabricd", "vrrpd", "pathd")

Popen = Callable[..., subprocess.Popen]


def available() -> str | None:
    """Why FRR cannot run here, or None."""
    if not os.path.exists(INIT) or not shutil.which("vtysh"):
        return "kind: frr needs Debian's frr package (apt install frr, or `make deps`)"
    try:
        pwd.getpwnam("frr")
    except KeyError:
        return "kind: frr needs the frr user the frr package creates"
    return None


def daemons_for(config: str) -> list[str]:
    """zebra and staticd, plus the daemons of the protocols ``config`` configures."""
    found = {daemon for pattern, daemon in _DAEMONS if re.search(pattern, config, re.MULTILINE)}
    return sorted(found)


def daemons_file(enabled: Sequence[str]) -> str:
    lines = [f"{d}={'yes' if d in enabled else 'no'}" for d in _ALL]
    opts = [f'{d}_options="-A 127.0.0.1"' for d in ("zebra", "staticd", *_ALL)]
    return "\n".join(["# written by nestlab", *lines, "vtysh_enable=yes", *opts, ""]) + "\n"


def write(lab: str, node: str, config: str, hostname: str) -> str:
    """Write the node's FRR folder; returns it (bound over /etc/frr in the node's view)."""
    folder = os.path.join(names.node_dir(lab, node), "etc", "frr")
    os.makedirs(folder, exist_ok=True)
    if not re.search(r"^hostname ", config, re.MULTILINE):
        config = f"hostname {hostname}\n{config}"
    files = {"frr.conf": config if config.endswith("\n") else config + "\n",
             "daemons": daemons_file(daemons_for(config)),
             "vtysh.conf": "service integrated-vtysh-config\n"}
    user = pwd.getpwnam("frr")
    for name, text in files.items():
        path = os.path.join(folder, name)
        with open(path, "w") as fh:
            fh.write(text)
        os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(path, 0o640)
    os.chown(folder, user.pw_uid, user.pw_gid)
    return folder


def run_dir_owner() -> tuple[int, int]:
    user = pwd.getpwnam("frr")
    return user.pw_uid, user.pw_gid


def start(routers: dict[str, Popen]) -> None:
    """Start every router's FRR (watchfrr and its daemons) inside it, all at once (each init
    script spends most of its time waiting for its daemons)."""
    procs = {node: popen([INIT, "start"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for node, popen in routers.items()}
    failed = []
    for node, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failed.append(f"{node}: {out.strip()[-300:]}")
    if failed:
        raise LabError("FRR did not start in " + "; ".join(failed))


def running_config(node: str, popen: Popen) -> str:
    proc = popen(["vtysh", "-c", "show running-config"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=30)
    if proc.returncode != 0:
        raise LabError(f"vtysh in {node} failed: {err.strip()[-300:]}")
    return out

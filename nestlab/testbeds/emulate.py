"""``nestlab servers emulate``: servers to try a split lab on, inside this machine.

The emulation is itself a lab (named ``servers`` unless told): a bridge ``underlay`` and one node
per server, each running a real OpenSSH ``sshd`` as its ``cmd`` inside a mount namespace of its own,
where ``/etc/ssh``, ``/run/nestlab``, ``/run/netns`` and nestlab's cgroups are the server's own.  This
machine reaches them over a marked veth on the underlay (never a real NIC).  An inventory for
``--servers`` is written with a fresh key and the servers' host keys.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import subprocess
import sys
from typing import Any

import yaml

from .. import names, sites
from ..backends.kernel import cgroups, files, netlink, procs
from ..backends.remote.ssh import CONTROL_DIR
from ..backends.services import sshd
from ..backends.services.sshd import SSHD
from ..engine import cleanup, etc_hosts, state
from ..errors import LabError
from ..lab.lab import Lab
from ..sites.ssh import remotes

SUBNET = "198.18.0.0/24"  # RFC 2544's benchmarking range: not routed anywhere
_SSHD_CONFIG = sshd.config(
    "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/authorized_keys", "Port 22", "MaxSessions 100", "MaxStartups 100:30:200"
)


def inventory_path(name: str) -> str:
    return os.path.join(names.lab_dir(name), "inventory.yml")


def emulate(count: int, name: str = "servers", subnet: str = SUBNET, copy_to: str | None = None) -> str:
    """Start ``count`` emulated servers; returns the inventory's path."""

    if not shutil.which(SSHD) and not os.path.exists(SSHD):
        raise LabError("emulated servers run OpenSSH's sshd: install Debian's openssh-server (make deps does)")
    net = ipaddress.IPv4Network(subnet)
    hosts = list(net.hosts())
    if not 1 <= count < len(hosts):
        raise LabError(f"{subnet} holds at most {len(hosts) - 1} servers")
    if state.read(name) or cleanup.marked_namespaces(name):
        raise LabError(f"lab '{name}' already exists: `nestlab servers emulate --destroy --name {name}` first")
    servers = [f"s{i}" for i in range(1, count + 1)]
    client = os.path.join(names.lab_dir(name), "client")
    try:
        os.makedirs(client, exist_ok=True)
        _keygen(os.path.join(client, "id_ed25519"))
        known = []
        for i, server in enumerate(servers):
            known.append(f"{hosts[i]} {_server_files(name, server)}")
        files.write(os.path.join(client, "known_hosts"), "".join(known), 0o644, sync=False)
        lab = Lab.from_text(_topology(name, servers, hosts, net.prefixlen), f"<servers emulate {name}>")
        lab.deploy()
        ctl = _controller_if(name)
        nl = netlink.Netlink()
        try:
            (index,) = nl.run(netlink.get_link(ctl))
            nl.run(netlink.new_addr(index, f"{hosts[-1]}/{net.prefixlen}", ctl))
        finally:
            nl.close()
    except BaseException:
        sites.remove(name)
        raise
    spec = {
        "servers": {
            server: {
                "address": str(hosts[i]),
                "key": os.path.join(client, "id_ed25519"),
                "nestlab": _nestlab_here(),
                "ssh_options": [f"UserKnownHostsFile={os.path.join(client, 'known_hosts')}", "StrictHostKeyChecking=yes"],
            }
            for i, server in enumerate(servers)
        },
    }
    text = f"# {count} emulated servers on this machine (nestlab servers emulate); remove with: nestlab servers emulate --destroy --name {name}\n"
    text += yaml.safe_dump(spec, sort_keys=False)
    for path in filter(None, (inventory_path(name), copy_to)):
        with files.created(path) as fh:  # the inventory, and its copy where the user asked
            fh.write(text.encode())
    return copy_to or inventory_path(name)


def destroy(name: str = "servers") -> int:
    """Clean every lab inside each emulated server (entered directly, not over SSH), then remove them."""

    current = state.read(name)
    for server in current.plan.nodes if current else {}:
        pid = _sshd_pid(name, server)
        if pid:
            subprocess.run(
                ["nsenter", "-t", str(pid), "-m", "-n", *shlex.split(_nestlab_here()), "cleanup", "--all"],
                capture_output=True,
                timeout=300,
            )
    if os.path.exists(inventory_path(name)):  # this machine's master connections to them
        with open(inventory_path(name)) as fh:
            for remote in remotes(yaml.safe_load(fh)["servers"], "/").values():
                remote.close()
    removed = sites.remove(name)
    try:
        os.rmdir(CONTROL_DIR)
    except OSError:
        pass
    return removed


def _keygen(path: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "nestlab", "-f", path], check=True, capture_output=True)
    with open(path + ".pub") as fh:
        return fh.read()


def _server_files(lab: str, server: str) -> str:
    """A server's /etc/ssh and /run/nestlab folders and its start script; returns its host key line."""
    home = names.node_dir(lab, server)
    etc = os.path.join(home, "sshd")
    os.makedirs(etc, exist_ok=True)
    os.makedirs(os.path.join(home, "run"), exist_ok=True)
    host_key = _keygen(os.path.join(etc, "ssh_host_ed25519_key"))
    shutil.copy(os.path.join(names.lab_dir(lab), "client", "id_ed25519.pub"), os.path.join(etc, "authorized_keys"))
    files.write(os.path.join(etc, "sshd_config"), _SSHD_CONFIG, 0o644, sync=False)
    binds = "".join(
        f'mkdir -p "{d}/{names.cgroup_name(lab)}/srv-{server}" && mount --bind "{d}/{names.cgroup_name(lab)}/srv-{server}" "{d}"\n'
        for d in cgroups.hierarchies()
    )
    files.write(
        os.path.join(home, "start.sh"),
        (
            "set -e\n"
            f"mount --bind {etc} /etc/ssh\n"
            # a server's own names, management leases and lab keys (the real machine's hold its own labs'),
            # before /run/nestlab, which holds their sources here, is the server's own
            f"cp /etc/hosts {home}/hosts && mount --bind {home}/hosts {etc_hosts.HOSTS}\n"
            + "".join(
                f"mkdir -p {home}/{os.path.basename(d)} {d} && mount --bind {home}/{os.path.basename(d)} {d}\n"
                for d in (names.MGMT_ROOT, names.KEYS_ROOT)
            )
            + f"mount --bind {os.path.join(home, 'run')} {names.STATE_ROOT}\n"
            f"mount -t tmpfs -o mode=0755 nestlab-netns {names.NETNS_DIR}\n"
            f"{binds}mkdir -p /run/sshd\n"
            f"exec {SSHD} -D -e\n"
        ),
        0o644,
        sync=False,
    )
    return " ".join(host_key.split()[:2]) + "\n"


def _topology(name: str, servers: list[str], hosts: list[ipaddress.IPv4Address], prefix: int) -> str:
    nodes: dict[str, dict[str, Any]] = {"underlay": {"kind": "bridge"}}
    links = []
    for i, server in enumerate(servers):
        script = os.path.join(names.node_dir(name, server), "start.sh")
        nodes[server] = {
            "cmd": f"exec unshare -m --propagation private sh {script}",
            "healthcheck": {"test": ["CMD-SHELL", "ss -ltn | grep -q ':22 '"], "interval": 0.1, "retries": 300},
        }
        links.append({"endpoints": [f"{server}:eth0", f"underlay:{server}"], "ipv4": [f"{hosts[i]}/{prefix}", None]})
    links.append({"endpoints": ["underlay:ctl"], "mode": "machine-veth", "host_interface": _controller_if(name)})
    text: str = yaml.safe_dump({"name": name, "topology": {"nodes": nodes, "links": links}}, sort_keys=False)
    return text


def _controller_if(name: str) -> str:
    return f"nls-{name}"[: names.IFNAMSIZ]


def _nestlab_here() -> str:
    """This very nestlab, as a command line a server on this machine can run."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"env PYTHONPATH={shlex.quote(os.path.dirname(root))} {shlex.quote(sys.executable)} -P -m nestlab.cli.app"


def _sshd_pid(lab: str, server: str) -> int | None:
    """The emulated server's sshd: the process in its network namespace running sshd."""
    target = os.stat(names.netns_path(lab, server)).st_ino if os.path.exists(names.netns_path(lab, server)) else None
    if target is None:
        return None
    return next((pid for pid in procs.in_namespaces({target}, ("net",)) if procs.comm(pid) == "sshd"), None)

"""What this kernel and machine can do, found by trying (``nestlab doctor`` and pre-deploy checks).

Kernel features are probed by creating the object in a scratch network
namespace that lives only as long as the probe (modules load on demand as
they would for a real deploy).  Nothing is left behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any, TypeVar

from ...errors import LabError
from ...plan.machine import Machine
from ...plugins import KernelFeature
from ...registry import LINK_MODES
from . import libc, mounts, netlink, userns

_T = TypeVar("_T")


@dataclass(frozen=True)
class Feature:
    name: str
    group: str
    ok: bool
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# What every lab uses, and what nestlab's daemons need; each link mode adds its own (nestlab/links).
BASE = {
    "veth": KernelFeature("CONFIG_VETH", {"kind": "veth", "peer": "nlprobe1"}),
    "bridge": KernelFeature("CONFIG_BRIDGE", {"kind": "bridge"}),
    "tun": KernelFeature("CONFIG_TUN", {"kind": "tuntap", "mode": "tun"}),
    "dummy": KernelFeature("CONFIG_DUMMY", {"kind": "dummy"}),
}


def link_features() -> dict[str, KernelFeature]:
    """Every kernel feature a link mode declares, and the base ones."""
    return {**BASE, **{name: f for mode in LINK_MODES.values() for name, f in mode.features.items()}}


QDISCS: dict[str, tuple[str, dict[str, Any]]] = {
    "htb": ("CONFIG_NET_SCH_HTB", {"default": 1}),
    "tbf": ("CONFIG_NET_SCH_TBF", {"rate": "10mbit", "burst": 10000, "latency": "50ms"}),
    "netem": ("CONFIG_NET_SCH_NETEM", {"delay": 1000}),
    "fq_codel": ("CONFIG_NET_SCH_FQ_CODEL", {}),
}
TOOLS = {
    "iperf3": "iperf3",
    "sockperf": "sockperf",
    "ping": "iputils-ping",
    "nft": "nftables",
    "ovs-vswitchd": "openvswitch-switch",
    "runc": "runc",
    "docker": "docker.io",
    "mptcpize": "mptcpd",
}


def _in_scratch_netns(work: Callable[[], _T]) -> _T:
    """Run ``work()`` in a thread inside a fresh network namespace; return its result."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            libc.unshare(libc.CLONE_NEWNET)
            box["value"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]
    return value


@cache
def kernel() -> dict[str, tuple[bool, str]]:
    """``{feature: (works, kernel message)}`` for every link kind and qdisc nestlab may use."""

    def work() -> dict[str, tuple[bool, str]]:
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

        results: dict[str, tuple[bool, str]] = {}
        with IPRoute() as ipr:
            ipr.link("add", ifname="parent", kind="veth", peer="parentp")
            parent = ipr.link_lookup(ifname="parent")[0]
            for name, feature in link_features().items():
                if feature.sysctl:
                    if feature.module and shutil.which("modprobe"):  # as dockerd does; built in, it is there already
                        subprocess.run(["modprobe", "-q", feature.module], capture_output=True)
                    there = os.path.exists("/proc/sys/" + feature.sysctl.replace(".", "/"))
                    results[name] = (there, "" if there else f"no sysctl {feature.sysctl}")
                    continue
                spec = feature.link
                assert spec is not None, name  # a feature is a sysctl or a link
                if spec.get("link") == "parent":  # a parent of its own: macvlan and ipvlan cannot share one
                    ipr.link("add", ifname=f"nlp-{name}", kind="veth", peer=f"nlq-{name}")
                    spec = {**spec, "link": ipr.link_lookup(ifname=f"nlp-{name}")[0]}
                try:
                    ipr.link("add", ifname=f"nlprobe-{name}", **spec)
                    results[name] = (True, "")
                except NetlinkError as exc:
                    results[name] = (False, os.strerror(exc.code))
            for name, (_option, params) in QDISCS.items():
                try:
                    ipr.tc("add", name, index=parent, handle="1:", **params)
                    ipr.tc("del", index=parent, handle="1:", root=True)
                    results[name] = (True, "")
                except NetlinkError as exc:
                    results[name] = (False, os.strerror(exc.code))
        return results

    return _in_scratch_netns(work)


def nat_works() -> tuple[bool, str]:
    if not shutil.which("nft"):
        return False, "nft is not installed"

    def work() -> tuple[bool, str]:
        rules = "table ip p {\n chain c {\n  type nat hook postrouting priority srcnat;\n  masquerade\n }\n}\n"
        proc = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True)
        return proc.returncode == 0, proc.stderr.strip()

    return _in_scratch_netns(work)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def cgroups() -> tuple[list[str], list[str]]:
    """(cgroup v1 controllers mounted, cgroup v2 controllers available)."""
    found = mounts.cgroups()
    v1 = [o for m in found if m.fstype == "cgroup" for o in m.options if o not in ("rw", "ro") and "=" not in o]
    v2_root = next((m.point for m in found if m.fstype == "cgroup2"), None)
    v2 = _read(os.path.join(v2_root, "cgroup.controllers")).split() if v2_root else []
    return sorted(set(v1)), v2


def features(machine: Machine) -> list[Feature]:
    """The machine's rows of ``nestlab doctor``, each with the reason and the fix (each node kind adds its own);
    ``machine``: what the command runs on (rootless mode's are its own)."""
    out: list[Feature] = []
    probed = kernel()
    for name, feature in link_features().items():
        ok, why = probed[name]
        out.append(
            Feature(
                name,
                "link",
                ok,
                "works" if ok else f"the kernel refused it: {why}",
                "" if ok else f"a kernel with {feature.config}",
            )
        )
    for name, (option, _params) in QDISCS.items():
        ok, why = probed[name]
        out.append(
            Feature(
                name, "qdisc", ok, "works" if ok else f"the kernel refused it: {why}", "" if ok else f"a kernel with {option}"
            )
        )
    ok, why = nat_works()
    out.append(
        Feature(
            "nat",
            "kernel",
            ok,
            "nftables masquerade works" if ok else why,
            "" if ok else "apt-get install nftables; a kernel with CONFIG_NFT_NAT, CONFIG_NFT_MASQ",
        )
    )
    mptcp = _read("/proc/sys/net/mptcp/enabled").strip()
    out.append(
        Feature(
            "mptcp",
            "kernel",
            mptcp == "1",
            f"net.mptcp.enabled = {mptcp or 'absent'}",
            "" if mptcp == "1" else "a kernel with CONFIG_MPTCP",
        )
    )
    out += _cgroup_rows(machine)
    for tool, package in TOOLS.items():
        path = shutil.which(tool)
        out.append(Feature(tool, "tool", bool(path), path or "not installed", "" if path else f"apt-get install {package}"))
    out.append(rootless(machine))
    return out


def _cgroup_rows(machine: Machine) -> list[Feature]:
    """The cgroup hierarchies nestlab's limits may use (none in rootless mode: the machine's are its root's)."""
    if not machine.cgroups:
        return [Feature(name, "cgroups", False, "not applied in rootless mode", "sudo") for name in ("cgroup-v1", "cgroup-v2")]
    v1, v2 = cgroups()
    fix = "" if v2 or v1 else "mount cgroup2 at /sys/fs/cgroup"
    return [
        Feature("cgroup-v1", "cgroups", bool(v1), ", ".join(v1) or "no v1 hierarchy mounted", ""),
        Feature("cgroup-v2", "cgroups", bool(v2), ", ".join(v2) or "no v2 controllers enabled", fix),
    ]


NOBODY = 65534  # the ordinary user the rootless probe becomes when root runs it
_USERNS_OFF = (  # (sysctl, the value that forbids ordinary users' user namespaces, the fix)
    ("user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
    ("kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"),
    ("kernel/apparmor_restrict_unprivileged_userns", "1", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
)


def rootless(machine: Machine) -> Feature:
    """Whether an ordinary user's labs work here (docs/rootless.md): user namespaces allowed, and tried (``machine``:
    the one this command runs on, a guest's already in them)."""
    helper = (
        f"newuidmap {'present' if shutil.which('newuidmap') else 'absent (apt-get install uidmap)'}: with a user's "
        "subordinate ids (/etc/subuid, /etc/subgid) it maps them too, for FRR and SSH to nodes; slirp4netns "
        + (
            "present: nodes reach beyond your namespace"
            if shutil.which("slirp4netns")
            else "absent (apt-get install slirp4netns)"
        )
    )
    if machine.guest:  # whatever the sysctls say (an AppArmor profile may allow it where they would not)
        ids = (
            "your subordinate ids are mapped too"
            if machine.maps_others
            else "you alone are mapped: FRR runs as root; nestlab ssh enters nodes, but ssh and Ansible need subordinate ids (/etc/subuid, /etc/subgid) and uidmap"
        )
        return Feature("rootless", "kernel", True, f"in use: this command runs in your own namespaces; {ids}")
    found = [f"{name.replace('/', '.')} = {value}" for name, *_ in _USERNS_OFF if (value := _read(f"/proc/sys/{name}").strip())]
    for name, off, fix in _USERNS_OFF:
        if _read(f"/proc/sys/{name}").strip() == off:
            return Feature("rootless", "kernel", False, f"{name.replace('/', '.')} = {off}: user namespaces are off", fix)
    said = _as_user()
    detail = "; ".join([*found, helper])
    if said:
        return Feature(
            "rootless", "kernel", False, f"{said} ({detail})", "allow ordinary users' user namespaces (seccomp, AppArmor)"
        )
    return Feature("rootless", "kernel", True, f"an ordinary user may make its own namespaces ({detail})")


def _as_user() -> str:
    """What failed when a child, as an ordinary user, made a user, mount and network namespace, mounted a tmpfs and
    made a bridge in them (as rootless mode's holder does); empty when all of it worked."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says what failed, if anything, and leaves
        os.close(read)
        step = "become an ordinary user"
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
                libc.dumpable()
            step = "make a user namespace"
            libc.unshare(libc.CLONE_NEWUSER | libc.CLONE_NEWNS | libc.CLONE_NEWNET)
            step = "map the user to root"
            userns.map_self(os.geteuid(), os.getegid())
            step = "mount a tmpfs"
            libc.mount("", "/", libc.MS_REC | libc.MS_SLAVE, "none")
            libc.mount("nestlab", "/tmp", 0, "tmpfs", "mode=0755")
            step = "make a bridge"
            netlink.Netlink().run(netlink.new_bridge("nlprobe0", alias="nestlab:probe"))
        except Exception as exc:  # said to the parent, whatever it is
            os.write(write, f"could not {step}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        said = fh.read().decode()
    os.waitpid(pid, 0)
    return said


def missing_for(needs: set[str]) -> list[str]:
    """Kernel options missing for the link kinds / qdiscs in ``needs`` (empty when all work)."""
    probed = kernel()
    options = {**{k: v.config for k, v in link_features().items()}, **{k: v[0] for k, v in QDISCS.items()}}
    return [f"{name} ({options[name]})" for name in sorted(needs) if name in probed and not probed[name][0]]


def check_needs(needs: set[str], nat: bool, others: list[str]) -> None:
    """Raise :class:`LabError` naming what this machine lacks for a change (kernel features, NAT, and
    ``others`` its node kinds found), before anything is created."""
    problems = missing_for(needs) if needs else []
    if nat and not (why := nat_works())[0]:
        problems.append(f"NAT for bridge mode ({why[1]}; needs nftables and CONFIG_NFT_NAT/CONFIG_NFT_MASQ)")
    problems += others
    if problems:
        raise LabError(
            "this lab needs "
            + "; ".join(problems)
            + ", which this machine lacks. Nothing was created; `nestlab doctor` lists what works here"
        )

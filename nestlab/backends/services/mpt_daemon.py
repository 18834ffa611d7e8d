"""MPT tunnels: a ``nestlab-mpt`` daemon in each end's node, its tun device configured by netlink.

The daemon (``mpt/``, Go) creates the tun device itself, so the device goes with the process:
stopping the daemon, or removing the node, leaves nothing behind.  Its pid, log and counters
live in the lab's state folder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ... import names
from ...errors import LabError
from ...plan.objects import EndObj, LinkObj
from ..kernel import detached, files, namespaces

_BUILT = Path(__file__).resolve().parents[3] / "mpt" / "nestlab-mpt"
# Packets the tun device holds for its daemon (the kernel's default is 500): about 40 ms at the
# 100 000 packets/s of 12 x 100 Mbit/s, so the daemon's turns off a busy CPU drop nothing.
TXQUEUELEN = 4000


def binary() -> str:
    """The daemon: $NESTLAB_MPT, the one `make` builds in mpt/, or nestlab-mpt on PATH."""
    for candidate in (os.environ.get("NESTLAB_MPT"), str(_BUILT), shutil.which("nestlab-mpt")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise LabError(
        "nestlab-mpt is not built: run `make mpt/nestlab-mpt` in the nestlab checkout (needs Go: apt-get install golang-go)"
    )


@functools.cache
def datapath() -> tuple[bool, str]:
    """Whether this kernel takes the daemon's tc programs (``-datapath bpf``), and what the probe said."""
    try:
        said = subprocess.run([binary(), "-probe"], capture_output=True, text=True, timeout=30).stdout.strip()
    except LabError as exc:
        return False, str(exc)
    return said == "bpf", "kernel datapath: tc programs (tcx) carry the tunnel" if said == "bpf" else said


def _file(lab: str, end: EndObj, suffix: str) -> str:
    folder = os.path.join(names.lab_dir(lab), "mpt")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{end.node.replace('/', '.')}.{end.iface}.{suffix}")


def command(lab: str, link: LinkObj, side: int) -> list[str]:
    """The daemon's command line for end ``side`` (0: a, 1: b) of the tunnel."""
    end = (link.a, link.b)[side]
    cmd = [binary(), "-tun", end.iface, "-scheduler", link.text("scheduler", "wrr"), "-stats", _file(lab, end, "json")]
    chosen = link.text("datapath", "auto").split(",")
    mine, peer = (chosen[side], chosen[1 - side]) if len(chosen) == 2 else (chosen[0], chosen[0])
    if mine != "auto":  # the daemon's default (and a daemon older than the flag takes no flag)
        cmd += ["-datapath", mine]
    if peer == "user" and mine != "user":
        cmd += ["-peer-datapath", "user"]
    for iface, a_ip, b_ip, weight in link.paths:
        local, remote = (a_ip, b_ip) if side == 0 else (b_ip, a_ip)
        cmd += ["-path", f"{local},{remote},{iface},{weight}"]
    return cmd


def start(lab: str, link: LinkObj, popen: Callable[..., subprocess.Popen[Any]]) -> None:
    """Start both ends' daemons (``popen(node, args, **kwargs)`` runs a process in a node) and give
    their tun devices address, MTU and up."""
    from pyroute2.netlink.exceptions import NetlinkError  # imported here: see backends/mptcp.py

    for side, end in enumerate((link.a, link.b)):
        log = files.output(_file(lab, end, "log"))
        proc = popen(end.node, command(lab, link, side), text=True, **detached.options(subprocess.PIPE, stderr=log))
        log.close()
        out = proc.stdout
        assert out is not None  # piped: detached.options(subprocess.PIPE)
        ready, _, _ = select.select([out], [], [], 10)
        line = out.readline() if ready else ""
        out.close()
        if not line.startswith("ready"):
            proc.kill()
            proc.wait()
            raise LabError(f"nestlab-mpt in {end.node} did not start: {Path(_file(lab, end, 'log')).read_text().strip()[-500:]}")
        files.write(_file(lab, end, "pid"), str(proc.pid), sync=False)
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped when stopped, while this process lives
        with namespaces.iproute(names.netns_path(lab, end.node)) as ipr:
            index = ipr.link_lookup(ifname=end.iface)[0]
            for cidr in end.ipv4:
                address, prefix = cidr.split("/")
                ipr.addr("add", index=index, address=address, prefixlen=int(prefix))
            ipr.link("set", index=index, mtu=link.mtu or 1468, txqlen=TXQUEUELEN, state="up")
            with contextlib.suppress(NetlinkError):  # the kernel datapath's burst size (tcx kernels take it; older may not)
                ipr.link("set", index=index, gso_max_size=link.number("burst"))


def stop(lab: str, link: LinkObj) -> None:
    """Stop both ends' daemons (their tun devices go with them)."""
    for end in (link.a, link.b):
        pid_file = Path(_file(lab, end, "pid"))
        try:
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.01)
        except (OSError, ValueError):
            pass
        pid_file.unlink(missing_ok=True)


def counters(lab: str, node: str, iface: str = "mpt0") -> dict[str, Any]:
    """The daemon's counters for ``node``'s tunnel end: per path tx/rx packets and bytes, alive, RTT; drops."""
    path = Path(_file(lab, EndObj(node, iface), "json"))
    if not path.exists():
        raise LabError(f"no tunnel {iface} in node {node} of lab {lab}")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def pids(lab: str) -> list[int]:
    """Process ids of the lab's running tunnel daemons."""
    found = []
    for pid_file in Path(names.lab_dir(lab), "mpt").glob("*.pid"):
        try:
            found.append(int(pid_file.read_text()))
        except (OSError, ValueError):
            continue
    return found

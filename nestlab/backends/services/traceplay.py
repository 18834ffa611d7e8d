"""Replay a Mahimahi delivery trace on one interface: its HTB class's rate follows the trace, slice by slice
(:data:`nestlab.model.trace.BIN_MS`), on a drift-free clock, looping.  Started inside the node's network
namespace (``python -m nestlab.backends.services.traceplay IFACE TRACE``), it ends with the node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from ...model.trace import BIN_MS, rates, read
from ..kernel import containers, namespaces, procs
from ..kernel.netlink import Netlink, get_link, htb_class
from ..kernel.shaping import burst_for


def start(net_path: str, uts_path: str, iface: str, trace: str) -> None:
    """The player of ``trace`` on ``iface`` of the node whose namespaces these are."""
    containers.popen_in(
        net_path,
        uts_path,
        [],
        [sys.executable, "-m", __name__, iface, trace],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop(net_path: str, iface: str) -> None:
    """End the player of ``iface`` in that namespace, if one runs (before another starts or the trace is dropped)."""
    inode = namespaces.inode(net_path)
    if inode is None:
        return
    mine = [__name__.encode(), iface.encode()]
    for pid in procs.in_namespaces({inode}, ("net",)):
        argv = procs.cmdline(pid).split(b"\0")
        if argv[1:4] == [b"-m", *mine]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def play(iface: str, trace: str) -> None:
    steps = rates(read(trace))
    nl = Netlink()
    index = nl.run(get_link(iface))[0]
    start = time.monotonic()
    step = 0
    while True:
        bits = steps[step % len(steps)]
        nl.run(htb_class(index, 0x10001, 0x10000, bits, burst_for(bits)))
        step += 1
        time.sleep(max(0.0, start + step * BIN_MS / 1000 - time.monotonic()))


if __name__ == "__main__":
    try:
        os.nice(-5)  # on time, before the traffic it shapes
    except OSError:
        pass
    play(sys.argv[1], sys.argv[2])

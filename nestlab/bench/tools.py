"""Traffic tools run as real processes inside nodes, their output parsed into numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

from ..errors import LabError
from ..lab.node import Node

_PACKAGES = {"iperf3": "iperf3", "ping": "iputils-ping"}


def require(tool: str) -> str:
    """Path of ``tool``, or a clear error naming the Debian package that provides it."""
    path = shutil.which(tool)
    if not path:
        raise LabError(f"{tool} is not installed: apt-get install {_PACKAGES.get(tool, tool)}")
    return path


_RTT = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")


def parse_ping(text: str) -> dict:
    """iputils ping summary -> sent, received, loss_pct and rtt_{min,avg,max,mdev}_ms."""
    sent = _SENT.search(text)
    if not sent:
        raise ValueError(f"not ping output: {text[-200:]!r}")
    tx, rx = int(sent.group(1)), int(sent.group(2))
    out = {"sent": tx, "received": rx, "loss_pct": 100.0 * (tx - rx) / tx if tx else 100.0}
    rtt = _RTT.search(text)
    for i, key in enumerate(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"), 1):
        out[key] = float(rtt.group(i)) if rtt else None
    return out


def ping(node: Node, target: str, count: int = 5, interval: float = 0.2) -> dict:
    require("ping")
    return parse_ping(node.cmd(["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "1", target]))


def parse_iperf3(text: str) -> dict:
    """iperf3 -J (TCP or UDP) -> mbps received, retransmits (TCP), lost_pct (UDP) and seconds."""
    data = json.loads(text)
    if "error" in data:
        raise LabError(f"iperf3: {data['error']}")
    end = data["end"]
    received = end.get("sum_received") or end["sum"]
    udp = "lost_percent" in end.get("sum", {})
    mbps = received["bits_per_second"] / 1e6
    if udp and "sum_received" not in end:  # old iperf3: the client's sum carries the receiver's loss
        mbps *= 1 - end["sum"]["lost_percent"] / 100
    return {
        "mbps": mbps,
        "retransmits": end.get("sum_sent", {}).get("retransmits"),
        "lost_pct": end["sum"]["lost_percent"] if udp else None,
        "seconds": received["seconds"],
    }


def iperf3(
    client: Node, server: Node, address: str, seconds: float = 3, port: int = 5201, *, udp: bool = False,
    bitrate: str | None = None, length: int | None = None, omit: int = 0,
) -> dict:
    """An iperf3 run from ``client`` to ``server`` (listening on ``address``); the server is always reaped.

    ``udp`` with ``bitrate`` (iperf3 -b; "0" = as fast as possible) and ``length`` (-l, payload bytes);
    ``omit``: seconds of warm-up left out of the result (-O).
    """
    require("iperf3")
    srv = server.popen(["iperf3", "-s", "-1", "-B", address, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    extra = (["-u", "-b", bitrate or "1G"] if udp else []) + (["-l", str(length)] if length else []) + (["-O", str(omit)] if omit else [])
    try:
        out = ""
        for _ in range(50):  # the server needs a moment to listen
            out = client.cmd(["iperf3", "-J", "-c", address, "-p", str(port), "-t", str(seconds), *extra], timeout=seconds + omit + 30)
            if "unable to connect" not in out and "Connection refused" not in out:
                break
            time.sleep(0.05)
        return parse_iperf3(out)
    finally:
        srv.kill()
        srv.wait()

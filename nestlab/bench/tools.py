"""Traffic tools run as real processes inside nodes, their output parsed into numbers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from ..backends.kernel.procs import cpu_seconds as cpu_seconds  # a process's CPU time, read where /proc is
from ..errors import LabError
from ..lab.node import Node

_PACKAGES = {"iperf3": "iperf3", "ping": "iputils-ping", "sockperf": "sockperf", "mptcpize": "mptcpd"}


def require(tool: str) -> str:
    """Path of ``tool``, or a clear error naming the Debian package that provides it."""
    path = shutil.which(tool)
    if not path:
        raise LabError(f"{tool} is not installed: apt-get install {_PACKAGES.get(tool, tool)}")
    return path


_BITRATE = re.compile(r"\d+(\.\d+)?[KMGT]?", re.IGNORECASE)


def check_run(
    tool: str, duration: float, parallel: int, size: int | None, bitrate: str | None, cpu: int | None, fmt: str
) -> None:
    """Refuse ``nestlab bench run`` options no tool would take, before anything runs."""
    problems = []
    if tool not in ("iperf3", "sockperf", "ping"):
        problems.append(f"--tool {tool!r}: iperf3, sockperf or ping")
    if not 0 < duration <= 86400:
        problems.append(f"--duration {duration:g}: above 0 and at most 86400 seconds")
    if not 1 <= parallel <= 128:
        problems.append(f"--parallel {parallel}: 1 to 128 streams (iperf3's limit)")
    if size is not None and not 1 <= size <= 65507:
        problems.append(f"--size {size}: 1 to 65507 bytes (the largest UDP payload)")
    if bitrate is not None and not _BITRATE.fullmatch(bitrate):
        problems.append(f"--bitrate {bitrate!r}: a number with an optional K, M, G or T, e.g. 500M")
    if cpu is not None and not 0 <= cpu < (os.cpu_count() or 1):
        problems.append(f"--cpu {cpu}: this machine's CPUs are 0 to {(os.cpu_count() or 1) - 1}")
    if fmt not in ("table", "json"):
        problems.append(f"--format {fmt!r}: table or json")
    if problems:
        raise LabError("; ".join(problems))


_RTT = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")


def machine_cpu_seconds() -> dict[str, float]:
    """The machine's CPU time so far, all cores, by kind: user, system (with hard interrupts), softirq, idle (with I/O wait), steal."""
    with open("/proc/stat") as fh:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fh.readline().split()[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return {
        "user": (user + nice) / tick,
        "system": (system + irq) / tick,
        "softirq": softirq / tick,
        "idle": (idle + iowait) / tick,
        "steal": steal / tick,
    }


def parse_ping(text: str) -> dict[str, Any]:
    """iputils ping summary -> sent, received, loss_pct and rtt_{min,avg,max,mdev}_ms."""
    sent = _SENT.search(text)
    if not sent:
        raise ValueError(f"not ping output: {text[-200:]!r}")
    tx, rx = int(sent.group(1)), int(sent.group(2))
    out: dict[str, Any] = {"sent": tx, "received": rx, "loss_pct": 100.0 * (tx - rx) / tx if tx else 100.0}
    rtt = _RTT.search(text)
    for i, key in enumerate(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"), 1):
        out[key] = float(rtt.group(i)) if rtt else None
    return out


def ping(node: Node, target: str, count: int = 5, interval: float = 0.2) -> dict[str, Any]:
    require("ping")
    return parse_ping(node.cmd(["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "1", target]))


def parse_iperf3(text: str) -> dict[str, Any]:
    """iperf3 -J (TCP or UDP) -> mbps received, retransmits (TCP), lost_pct (UDP) and seconds.

    Warnings iperf3 prints before its JSON (e.g. a UDP block larger than the TCP MSS) are skipped.
    """
    try:
        data = json.loads(text[text.find("{") :] if "{" in text else text)
    except ValueError:
        raise LabError(f"iperf3 printed no result: {text[-300:]!r}") from None
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


def iperf3_intervals(text: str) -> list[tuple[float, float, float]]:
    """iperf3 -J with ``-i`` -> (start s, end s, Mbit/s) of every reporting interval, all streams summed."""
    data = json.loads(text)
    if "error" in data and not data.get("intervals"):
        raise LabError(f"iperf3: {data['error']}")
    return [(i["sum"]["start"], i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6) for i in data.get("intervals", [])]


def iperf3(
    client: Node,
    server: Node,
    address: str,
    seconds: float = 3,
    port: int = 5201,
    *,
    udp: bool = False,
    bitrate: str | None = None,
    length: int | None = None,
    omit: int = 0,
    mptcp: bool = False,
    window: str | None = None,
    cpu: int | None = None,
    record: Callable[[list[str], str], None] | None = None,
) -> dict[str, Any]:
    """An iperf3 run from ``client`` to ``server`` (listening on ``address``); the server is always reaped.

    ``udp`` with ``bitrate`` (iperf3 -b; "0" = as fast as possible) and ``length`` (-l, payload bytes);
    ``omit``: seconds of warm-up left out of the result (-O); ``mptcp``: both ends under ``mptcpize run``;
    ``window``: socket buffers (-w); ``cpu``: both ends pinned to it (-A); ``record``: called with the
    client's command and raw output.
    """
    require("iperf3")
    if mptcp:
        require("mptcpize")
    srv = server.popen(iperf3_server_command(address, port, mptcp=mptcp), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    command = iperf3_command(
        address, port, seconds, udp=udp, bitrate=bitrate, length=length, omit=omit, mptcp=mptcp, window=window, cpu=cpu
    )
    try:
        out, deadline = "", time.monotonic() + 15
        while time.monotonic() < deadline and srv.poll() is None:  # the server needs a moment to listen
            out = client.cmd(command, timeout=seconds + omit + 30)
            if "unable to connect" not in out and "Connection refused" not in out:
                break
            time.sleep(0.05)
        if record:
            record(command, out)
        return parse_iperf3(out)
    finally:
        srv.kill()
        srv.wait()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PERCENTILE = re.compile(r"percentile (\d+\.\d+) = +([\d.]+)")


def parse_sockperf(text: str) -> dict[str, Any]:
    """sockperf's text summary -> numbers.

    ping-pong / under-load: ``latency_{avg,std,min,max,p25..p99999}_us``, ``sent``, ``received``,
    ``seconds`` (the valid window, warm-up excluded), ``pps`` (received per second), ``dropped``.
    throughput: ``pps`` (messages sent per second), ``mbps`` (as sent), ``sent``, ``seconds``.
    """
    text = _ANSI.sub("", text)
    if m := re.search(r"Message Rate is (\d+) \[msg/sec\]", text):
        total = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", text)
        bw = re.search(r"BandWidth is [\d.]+ MBps \(([\d.]+) Mbps\)", text)
        return {
            "mode": "throughput",
            "pps": float(m.group(1)),
            "mbps": float(bw.group(1)) if bw else None,
            "sent": int(total.group(1)) if total else None,
            "seconds": float(total.group(2)) if total else None,
        }
    valid = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    avg = re.search(r"avg-latency=([\d.]+) \(std-dev=([\d.]+)\)", text)
    if not (valid and avg):
        raise ValueError(f"not a sockperf summary: {text[-300:]!r}")
    seconds, sent, received = float(valid.group(1)), int(valid.group(2)), int(valid.group(3))
    out = {
        "mode": "latency",
        "seconds": seconds,
        "sent": sent,
        "received": received,
        "pps": received / seconds if seconds else 0.0,
        "latency_avg_us": float(avg.group(1)),
        "latency_std_us": float(avg.group(2)),
    }
    for pct, value in _PERCENTILE.findall(text):
        out[f"latency_p{pct.rstrip('0').rstrip('.').replace('.', '')}_us"] = float(value)
    if m := re.search(r"<MIN> observation = +([\d.]+)", text):
        out["latency_min_us"] = float(m.group(1))
    if m := re.search(r"<MAX> observation = +([\d.]+)", text):
        out["latency_max_us"] = float(m.group(1))
    if m := re.search(r"# dropped messages = (\d+)", text):
        out["dropped"] = int(m.group(1))
    return out


def sockperf_command(mode: str, address: str, port: int, seconds: float, size: int, mps: int | None = None) -> list[str]:
    """A sockperf client command: ``ping-pong``, ``throughput`` or ``under-load`` (``mps`` messages/s)."""
    if mode not in ("ping-pong", "throughput", "under-load"):
        raise LabError(f"sockperf mode must be ping-pong, throughput or under-load, not {mode}")
    return [
        "sockperf",
        mode,
        "-i",
        address,
        "-p",
        str(port),
        "-t",
        str(int(seconds) if float(seconds).is_integer() else seconds),
        "-m",
        str(size),
        *(["--mps", str(mps)] if mps else []),
    ]


def iperf3_server_command(address: str, port: int = 5201, *, mptcp: bool = False) -> list[str]:
    """An iperf3 server for one test, bound to ``address:port`` (``mptcp``: under ``mptcpize run``)."""
    return (["mptcpize", "run"] if mptcp else []) + ["iperf3", "-s", "-1", "-B", address, "-p", str(port)]


def iperf3_command(
    address: str,
    port: int,
    seconds: float,
    *,
    udp: bool = False,
    bitrate: str | None = None,
    length: int | None = None,
    mss: int | None = None,
    parallel: int = 1,
    omit: int = 0,
    mptcp: bool = False,
    interval: float | None = None,
    window: str | None = None,
    cpu: int | None = None,
) -> list[str]:
    """An iperf3 client command with JSON output (``interval``: seconds per reported interval;
    ``window``: socket buffer size of both ends, iperf3 -w, e.g. so a UDP receiver rides out a stall;
    ``cpu``: both ends pinned to that CPU, iperf3 -A, so the whole path runs where one can watch it)."""
    cmd = ["iperf3", "-J", "-c", address, "-p", str(port), "-t", str(seconds)] + (["-i", str(interval)] if interval else [])
    cmd += (
        (["-u", "-b", bitrate or "1G"] if udp else [])
        + (["-l", str(length)] if length else [])
        + (["-M", str(mss)] if mss else [])
    )
    cmd += (
        (["-P", str(parallel)] if parallel > 1 else []) + (["-O", str(omit)] if omit else []) + (["-w", window] if window else [])
    )
    cmd += ["-A", f"{cpu},{cpu}"] if cpu is not None else []
    return (["mptcpize", "run"] if mptcp else []) + cmd

"""``rate:`` and ``latency:``: a measurement between two nodes (iperf3's received rate, ping's average round
trip) within its tolerance of the expected value."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..lab.node import Node
from ..model.checks import Latency, Rate
from .probing import Probe, run_in, said, target_of
from .targets import Ambiguous, Target

if TYPE_CHECKING:
    from ..lab.lab import Lab

_S = TypeVar("_S", Rate, Latency)


def rate(running: Lab, s: Rate) -> Probe:
    return _measured(running, s, _rate)


def latency(running: Lab, s: Latency) -> Probe:
    return _measured(running, s, _latency)


def _measured(running: Lab, s: _S, measure: Callable[[Lab, _S, Target], tuple[bool, str]]) -> Probe:
    """A probe taking ``measure``; a failed or missed measurement has the target looked up again."""
    target = target_of(running, s)

    def measured() -> tuple[bool, str]:
        try:
            held, saw = measure(running, s, target)
        except Ambiguous:
            raise
        except Exception:
            target.failed()
            raise
        if not held:
            target.failed()
        return held, saw

    return measured


def _rate(running: Lab, s: Rate, target: Target) -> tuple[bool, str]:
    """iperf3 (TCP, 2 s) from the source to the target; the received rate against the expected one."""
    node = s.target.node
    if node is None:
        raise ValueError(f"rate: to: must name a node, which runs iperf3's server (got {s.to})")
    address, why = target()
    server = Node(running, node).popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        rc, out = run_in(running, s.source, ["iperf3", "-c", address, "-t", "2", "-J"], timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    try:
        report = json.loads(out)
    except ValueError:
        return False, f"iperf3 to {address}{why} failed (exit {rc}): {said(out, 'error -', 'error')}"
    if "error" in report or "end" not in report:
        return False, f"iperf3 to {address}{why} failed (exit {rc}): iperf3: error - {report.get('error', 'no result')}"
    mbit = report["end"]["sum_received"]["bits_per_second"] / 1e6
    return abs(mbit - s.mbit) <= s.allowed(), f"{mbit:.1f} Mbit/s to {address}{why}"


def _latency(running: Lab, s: Latency, target: Target) -> tuple[bool, str]:
    """20 pings 50 ms apart; their average round trip against the expected one."""
    address, why = target()
    rc, out = run_in(running, s.source, ["ping", "-n", "-q", "-c20", "-i0.05", "-W2", address], timeout=30)
    found = re.search(r"= [\d.]+/([\d.]+)/", out)
    if not found:
        return False, f"no answer from {address}{why}: {said(out, 'packets transmitted', 'ping:')}"
    rtt = float(found.group(1))
    return abs(rtt - s.ms) <= s.allowed(), f"{rtt:.2f} ms round trip to {address}{why}"

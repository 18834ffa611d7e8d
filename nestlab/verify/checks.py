"""Run a lab's ``checks:`` and time them: each check is tried until it holds (or the wait is over), and
reports what it saw and when it first held, in seconds after a reference time (the deploy, or a change).

Probes that are cheap (reach, route, ospf, bgp, command) start a fresh attempt every :data:`STEP` seconds,
each in a thread of its own, so a slow attempt (a ping waiting for its answer) never lengthens the
cadence: ``first_held`` is the start of the first attempt that held, within one step of the truth.
A measurement (rate, latency) needs its pair to reach each other first and is then taken whole, again
until it is within its tolerance.  ``expect: false`` holds once an attempt gets no answer.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..lab.node import Node
from ..model.checks import Check

STEP = 0.05  # seconds between attempts of a cheap probe: the resolution of first_held
IN_FLIGHT = 8  # most attempts of one check running at once
MEASURING = threading.Lock()  # one measurement at a time: a latency taken beside a rate test would see its queue


@dataclass
class Result:
    index: int
    title: str
    kind: str
    held: bool = False
    saw: str = "not tried"
    first_held: float | None = None  # seconds after the reference time
    attempts: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.index,
            "title": self.title,
            "kind": self.kind,
            "held": self.held,
            "saw": self.saw,
            "first_held": None if self.first_held is None else round(self.first_held, 3),
            "attempts": self.attempts,
        }


Probe = Callable[[], tuple[bool, str]]


@dataclass
class _Watch:
    check: Check
    result: Result
    probe: Probe
    cheap: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0


def run(lab, checks: list[Check], since: float, wait: float) -> list[Result]:
    """Try every check until all hold or ``wait`` seconds (from now) pass; ``since``: the reference time
    (``time.time()``) that ``first_held`` counts from."""
    watches = [
        _Watch(c, Result(i, c.title(), c.kind), _probe(lab, c), c.kind not in ("rate", "latency")) for i, c in enumerate(checks)
    ]
    deadline = time.monotonic() + wait
    threads = [threading.Thread(target=_follow, args=(w, since, deadline), daemon=True) for w in watches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [w.result for w in watches]


def _follow(watch: _Watch, since: float, deadline: float) -> None:
    """Attempt the check until it holds or the deadline passes."""
    if not watch.cheap:
        while time.monotonic() < deadline and not watch.result.held:
            with MEASURING:
                _attempt(watch, since)
        return
    done = threading.Event()
    while time.monotonic() < deadline and not watch.result.held:
        with watch.lock:
            busy = watch.running >= IN_FLIGHT
            if not busy:
                watch.running += 1
        if not busy:
            threading.Thread(target=_attempt, args=(watch, since, done), daemon=True).start()
        done.wait(STEP)
    while watch.running and time.monotonic() < deadline + 2:  # attempts under way end (each is short)
        time.sleep(0.01)


def _attempt(watch: _Watch, since: float, done: threading.Event | None = None) -> None:
    started = time.time()
    try:
        held, saw = watch.probe()
    except Exception as exc:  # noqa: BLE001 - a probe that cannot run says why, as what it saw
        held, saw = False, f"{type(exc).__name__}: {exc}"
    with watch.lock:
        watch.result.attempts += 1
        if done is not None:
            watch.running -= 1
        if held and (watch.result.first_held is None or started - since < watch.result.first_held):
            watch.result.first_held = started - since
            watch.result.held, watch.result.saw = True, saw
            if done is not None:
                done.set()
        elif not watch.result.held:
            watch.result.saw = saw


def _run(lab, node: str, args: list[str], timeout: float = 10) -> tuple[int, str]:
    proc = Node(lab, node).popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0] + f"(no end after {timeout:g} s)"
    return proc.returncode, out


def target_address(lab, to: str) -> str:
    """``to`` as an address: itself, or the first address of the node so named."""
    try:
        return str(ipaddress.ip_address(to))
    except ValueError:
        pass
    nodes = lab.plan.nodes
    if to not in nodes:
        raise ValueError(f"'{to}' is neither an address nor a node of lab {lab.name}")
    address = next((i.ip for i in Node(lab, to).intfs() if i.ip), None)
    if address is None:
        raise ValueError(f"node {to} has no IPv4 address of the lab's to reach")
    return address


def _probe(lab, check: Check) -> Probe:
    s = check.spec
    kind = check.kind
    if kind == "reach":
        address = target_address(lab, s.to)
        if s.port:
            code = f"import socket; socket.create_connection(({address!r}, {s.port}), timeout=1).close()"
            args = ["python3", "-c", code]
        else:
            args = ["ping", "-n", "-c1", "-W1", address]

        def reach() -> tuple[bool, str]:
            rc, out = _run(lab, s.source, args, timeout=3)
            answered = rc == 0
            seen = f"{'answered' if answered else 'no answer'} from {address}" + (f":{s.port}" if s.port else "")
            return answered == s.expect, seen

        return reach
    if kind == "route":
        args = ["ip", "-j", "route", "show", s.prefix] + (["vrf", s.vrf] if s.vrf else [])

        def route() -> tuple[bool, str]:
            rc, out = _run(lab, s.node, args)
            routes = [r for r in json.loads(out or "[]") if rc == 0 and _same(r.get("dst"), s.prefix)]
            hops = {r.get("gateway") for r in routes} | {n.get("gateway") for r in routes for n in r.get("nexthops", [])}
            hops.discard(None)
            if not routes:
                return False, f"no route to {s.prefix}"
            seen = f"{s.prefix} via {', '.join(sorted(hops)) or 'a connected interface'}"
            return s.via is None or s.via in hops, seen

        return route
    if kind in ("ospf", "bgp"):
        command = "show ip ospf neighbor json" if kind == "ospf" else "show bgp neighbors json"

        def daemon() -> tuple[bool, str]:
            rc, out = _run(lab, s.node, ["vtysh", "-c", command])
            data = json.loads(out) if rc == 0 and out.strip().startswith("{") else {}
            if kind == "ospf":
                states = [n.get("nbrState", "") for n in (data.get("neighbors") or {}).get(s.neighbor, [])]
                state = states[0].split("/")[0] if states else "absent"
            else:
                state = (data.get(s.peer) or {}).get("bgpState", "absent")
            return (
                state.lower() == s.state.lower(),
                f"{'neighbor' if kind == 'ospf' else 'peer'} {getattr(s, 'neighbor', None) or s.peer} {state}",
            )

        return daemon
    if kind == "command":
        pattern = re.compile(s.output, re.MULTILINE) if s.output is not None else None

        def command_probe() -> tuple[bool, str]:
            rc, out = _run(lab, s.node, ["sh", "-c", s.run])
            ok = (s.exit is None or rc == s.exit) and (pattern is None or bool(pattern.search(out)))
            return ok, f"exit {rc}: {out.strip()[-200:] or '(no output)'}"

        return command_probe
    if kind == "rate":
        return lambda: _rate(lab, s)
    return lambda: _latency(lab, s)


def _same(dst: str | None, prefix: str) -> bool:
    if dst == "default":
        dst = "0.0.0.0/0"
    try:
        return dst is not None and ipaddress.ip_network(dst, strict=False) == ipaddress.ip_network(prefix)
    except ValueError:
        return False


def _rate(lab, s) -> tuple[bool, str]:
    """iperf3 (TCP, 2 s) from the source to the target; the received rate against the expected one."""
    address = target_address(lab, s.to)
    if s.to not in lab.plan.nodes:
        raise ValueError(f"rate: to: must name a node, which runs iperf3's server (got {s.to})")
    server = Node(lab, s.to).popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        rc, out = _run(lab, s.source, ["iperf3", "-c", address, "-t", "2", "-J"], timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    try:
        mbit = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    except (ValueError, KeyError):
        return False, f"iperf3 failed (exit {rc}): {out.strip()[-200:]}"
    return abs(mbit - s.mbit) <= s.allowed(), f"{mbit:.1f} Mbit/s"


def _latency(lab, s) -> tuple[bool, str]:
    """20 pings 50 ms apart; their average round trip against the expected one."""
    address = target_address(lab, s.to)
    rc, out = _run(lab, s.source, ["ping", "-n", "-q", "-c20", "-i0.05", "-W2", address], timeout=30)
    found = re.search(r"= [\d.]+/([\d.]+)/", out)
    if not found:
        return False, f"no answer from {address}"
    rtt = float(found.group(1))
    return abs(rtt - s.ms) <= s.allowed(), f"{rtt:.2f} ms round trip"


class Reconvergence:
    """After each change of a schedule, the time until every check holds again: changes come in from the
    schedule's clock (:meth:`changed`), each is watched by a thread of its own, made by one started here,
    before the clock takes real-time priority (threads inherit it)."""

    def __init__(self, lab, checks: list[Check], say: Callable[[str], None], wait: float = 30.0):
        import queue

        self.lab, self.checks, self.say, self.wait = lab, checks, say, wait
        self.changes: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.watches: list[threading.Thread] = []
        self.times: list[float | None] = []  # per change: seconds until every check held again (None: not in time)
        self.thread = threading.Thread(target=self._start, daemon=True, name="nestlab-reconvergence")
        self.thread.start()

    def changed(self, applied: float, what: str) -> None:
        self.changes.put((applied, what))

    def _start(self) -> None:
        while (item := self.changes.get()) is not None:
            thread = threading.Thread(target=self._watch, args=item, daemon=True)
            self.watches.append(thread)
            thread.start()

    def _watch(self, applied: float, what: str) -> None:
        results = run(self.lab, self.checks, applied, self.wait)
        failing = [r.title for r in results if not r.held]
        if failing:
            self.times.append(None)
            self.say(
                f"after {what}: {len(failing)} of {len(results)} checks do not hold {self.wait:g} s later: {'; '.join(failing)}"
            )
            return
        slowest = max(results, key=lambda r: r.first_held or 0.0)
        self.times.append(slowest.first_held)
        self.say(f"after {what}: every check holds again {slowest.first_held:.2f} s later (last: {slowest.title})")

    def finish(self) -> list[float | None]:
        """Wait for every change's watch to end; returns the reconvergence times, in the order they ended."""
        self.changes.put(None)
        self.thread.join()
        for thread in self.watches:
            thread.join()
        return self.times


def junit(lab: str, results: list[Result]) -> str:
    """JUnit XML: a test suite for the lab, a test case per check in file order."""
    import xml.etree.ElementTree as ET

    failed = sum(not r.held for r in results)
    suite = ET.Element("testsuite", name=f"nestlab checks of {lab}", tests=str(len(results)), failures=str(failed))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"{lab}.{r.kind}", name=r.title)
        case.set("time", f"{r.first_held or 0:.3f}")
        if r.held:
            ET.SubElement(case, "system-out").text = f"held {r.first_held:.3f} s after the reference: {r.saw}"
        else:
            ET.SubElement(case, "failure", message=r.saw).text = f"did not hold after {r.attempts} attempts; last saw: {r.saw}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"

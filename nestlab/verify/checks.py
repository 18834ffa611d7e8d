"""Run a lab's ``checks:`` and time them: each check is tried until it holds (or the wait is over), and
reports what it saw and when it first held, in seconds after a reference time (the deploy, or a change).

Probes that are cheap (reach, route, ospf, bgp, command) start a fresh attempt every :data:`STEP` seconds,
each in a thread of its own, so a slow attempt (a ping waiting for its answer) never lengthens the
cadence: ``first_held`` is the start of the first attempt that held, within one step of the truth.
A measurement (rate, latency) needs its pair to reach each other first and is then taken whole, again
until it is within its tolerance.  ``expect: false`` holds once an attempt gets no answer.  Each kind's
probe is in a module of its own: reach.py, routing.py (route, ospf, bgp), command.py, measures.py (rate, latency).
"""

from __future__ import annotations

import queue
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.checks import Check
from . import command, measures, reach, routing
from .probing import Probe, ProbeMaker

if TYPE_CHECKING:
    from ..lab.lab import Lab

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
    first_held: float | None = None  # seconds after the reference time; None: unknown (see held_at_start)
    attempts: int = 0
    held_at_start: bool = False  # it held when first tried, long after the reference: since when is unknown
    failed_at: float | None = None  # reconvergence: seconds after the change it was first seen failing

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.index,
            "title": self.title,
            "kind": self.kind,
            "held": self.held,
            "saw": self.saw,
            "first_held": None if self.first_held is None else round(self.first_held, 3),
            "held_at_start": self.held_at_start,
            "attempts": self.attempts,
        }


@dataclass
class _Watch:
    check: Check
    result: Result
    probe: Probe
    cheap: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: dict[int, float] = field(default_factory=dict)  # attempts under way: their start
    tried: list[tuple[float, bool, str]] = field(default_factory=list)  # ended attempts: start, held, saw

    def held_since(self, after: float = -1.0, final: bool = False) -> float | None:
        """The start of the first attempt after ``after`` that held, once no earlier attempt is under way
        (``final``: as the ended attempts say, the watch over)."""
        first = min((t for t, held, _ in self.tried if held and t > after), default=None)
        return first if first is not None and (final or all(t > first for t in self.running.values())) else None

    def last_failed(self, before: float = float("inf")) -> float | None:
        return max((t for t, held, _ in self.tried if not held and t < before), default=None)


def _watches(running: Lab, checks: list[Check]) -> list[_Watch]:
    from .. import sites

    sites.of(running.name)  # the sites' registry loaded here, not by the first attempts at once
    return [
        _Watch(c, Result(i, c.title(), c.kind), PROBES[c.kind](running, c.spec), c.kind not in ("rate", "latency"))
        for i, c in enumerate(checks)
    ]


def _all(watches: list[_Watch], wait: float, settled: Callable[[_Watch], bool]) -> None:
    deadline = time.monotonic() + wait
    threads = [threading.Thread(target=_follow, args=(w, deadline, settled), daemon=True) for w in watches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run(running: Lab, checks: list[Check], since: float, wait: float) -> list[Result]:
    """Try every check until all hold or ``wait`` seconds (from now) pass; ``since``: the reference time
    (``time.time()``) that ``first_held`` counts from.  On a lab checked more than :data:`STEP` after
    ``since``, a check that held on its first attempt has no ``first_held`` (``held_at_start``): it held already."""
    began = time.time()
    watches = _watches(running, checks)
    _all(watches, wait, lambda w: w.held_since() is not None)
    for w in watches:
        r = w.result
        held = w.held_since(final=True)
        last = (w.tried or [(0.0, False, "not tried")])[-1]
        r.attempts, r.held = len(w.tried), held is not None
        r.saw = next(saw for t, ok, saw in w.tried if t == held) if held is not None else last[2]
        if held is not None:
            if held == min(t for t, _, _ in w.tried) and began - since > STEP:
                r.held_at_start = True
            else:
                r.first_held = held - since
    return [w.result for w in watches]


def _follow(watch: _Watch, deadline: float, settled: Callable[[_Watch], bool]) -> None:
    """Attempt the check until ``settled`` says it is done or the deadline passes."""
    if not watch.cheap:
        while time.monotonic() < deadline and not settled(watch):
            with MEASURING:
                _attempt(watch)
        return
    done = threading.Event()
    while time.monotonic() < deadline:
        with watch.lock:
            if settled(watch):
                break
            busy = len(watch.running) >= IN_FLIGHT
        if not busy:
            threading.Thread(target=_attempt, args=(watch, done), daemon=True).start()
        done.wait(STEP)
        done.clear()
    while watch.running and time.monotonic() < deadline + 2:  # attempts under way end (each is short)
        time.sleep(0.01)


def _attempt(watch: _Watch, done: threading.Event | None = None) -> None:
    started = time.time()
    key = threading.get_ident()
    with watch.lock:
        watch.running[key] = started
    try:
        held, saw = watch.probe()
    except Exception as exc:  # noqa: BLE001 - a probe that cannot run says why, as what it saw
        held, saw = False, f"{type(exc).__name__}: {exc}"
    with watch.lock:
        del watch.running[key]
        watch.tried.append((started, held, saw))
    if done is not None and held:
        done.set()


# Each kind of check and what makes its probe (one module per kind).
PROBES: dict[str, ProbeMaker] = {
    "reach": reach.probe,
    "route": routing.route,
    "ospf": routing.ospf,
    "bgp": routing.bgp,
    "command": command.probe,
    "rate": measures.rate,
    "latency": measures.latency,
}


HOLD = 10.0  # seconds after a change a check must be seen failing in to count as affected by it


def recover(running: Lab, checks: list[Check], applied: float, wait: float, hold: float = HOLD) -> list[Result]:
    """Each check after a change applied at ``applied``: watched until it is seen failing and then holding
    again (``failed_at``, ``first_held``: seconds after the change), or, held and never failing in the first
    ``hold`` seconds, left alone (unaffected: ``failed_at`` None).  ``wait``: seconds, from the change, for it all.
    How each ended is :func:`after_change`'s reading of its attempts."""
    calm = applied + hold

    def settled(w: _Watch) -> bool:
        failed = w.last_failed()
        if failed is not None:
            return w.held_since(failed) is not None
        return bool(w.tried) and time.time() >= calm and all(t >= calm for t in w.running.values())

    watches = _watches(running, checks)
    _all(watches, max(0.0, applied + wait - time.time()), settled)
    for w in watches:
        after_change(w.result, w.tried, applied, hold)
    return [w.result for w in watches]


def after_change(r: Result, tried: list[tuple[float, bool, str]], applied: float, hold: float = HOLD) -> Result:
    """Fill ``r`` from a check's ended attempts (start, held, saw) after a change applied at ``applied``.

    Unaffected (``held``, ``failed_at`` None) only if it held, and no attempt failed before it first held or
    within ``hold`` seconds of the change: a check first tried late (queued behind measurements) and failing
    counts as failing.  Else ``failed_at`` is its first failure (None if it was never tried), ``held`` whether
    it held after its last failure, ``first_held`` since when."""
    calm = applied + hold
    r.attempts = len(tried)
    failures = [t for t, ok, _ in tried if not ok]
    holds = [t for t, ok, _ in tried if ok]
    first = min(failures, default=None)
    if holds and (first is None or (first >= calm and min(holds) < first)):
        r.held, r.failed_at, r.first_held = True, None, None
        r.saw = next(saw for t, ok, saw in reversed(tried) if ok)
        return r
    r.failed_at = None if first is None else first - applied
    last = max(failures, default=float("-inf"))
    held = min((t for t in holds if t > last), default=None)
    r.held = held is not None
    r.first_held = None if held is None else held - applied
    r.saw = next(saw for t, ok, saw in tried if t == held) if held is not None else (tried[-1][2] if tried else "not tried")
    return r


class Reconvergence:
    """After each change of a schedule, the time until every check it affected (seen failing within
    :data:`HOLD` seconds) holds again: changes come in from the schedule's clock (:meth:`changed`), each is
    watched by a thread of its own, made by one started here, before the clock takes real-time priority
    (threads inherit it)."""

    def __init__(self, running: Lab, checks: list[Check], say: Callable[[str], None], wait: float = 30.0):

        self.running, self.checks, self.say, self.wait = running, checks, say, wait
        self.changes: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.watches: list[threading.Thread] = []
        self.times: list[float | None] = []  # per change with an effect: seconds until it all held again (None: not in time)
        self.no_effect = 0  # changes after which no check was seen failing
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
        results = recover(self.running, self.checks, applied, self.wait, HOLD)
        hit = [r for r in results if r.failed_at is not None or not r.held]  # a check never tried nor held: failing
        if not hit:
            self.no_effect += 1
            self.say(f"after {what}: no effect seen: every check held throughout the {HOLD:g} s after it")
            return
        failing = [r.title for r in hit if not r.held]
        if failing:
            self.times.append(None)
            self.say(
                f"after {what}: {len(failing)} of {len(results)} checks do not hold again {self.wait:g} s later: {'; '.join(failing)}"
            )
            return
        slowest = max(hit, key=lambda r: r.first_held or 0.0)
        self.times.append(slowest.first_held)
        self.say(
            f"after {what}: every check holds again {slowest.first_held:.2f} s later (last: {slowest.title}, failing from "
            f"{slowest.failed_at:.2f} s; {len(hit)} of {len(results)} affected)"
        )

    def finish(self) -> list[float | None]:
        """Wait for every change's watch to end; returns the reconvergence times of the changes that had an
        effect, in the order they ended (:attr:`no_effect` counts the others)."""
        self.changes.put(None)
        self.thread.join()
        for thread in self.watches:
            thread.join()
        return self.times


def junit(lab: str, results: list[Result]) -> str:
    """JUnit XML: a test suite for the lab, a test case per check in file order."""

    failed = sum(not r.held for r in results)
    suite = ET.Element("testsuite", name=f"nestlab checks of {lab}", tests=str(len(results)), failures=str(failed))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"{lab}.{r.kind}", name=r.title)
        case.set("time", f"{r.first_held or 0:.3f}")
        if r.held:
            when = "held already when first tried" if r.first_held is None else f"held {r.first_held:.3f} s after the reference"
            ET.SubElement(case, "system-out").text = f"{when}: {r.saw}"
        else:
            ET.SubElement(case, "failure", message=r.saw).text = f"did not hold after {r.attempts} attempts; last saw: {r.saw}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"

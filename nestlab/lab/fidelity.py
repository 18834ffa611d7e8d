"""Whether the emulation kept up while something was measured: ``ok``, ``doubtful`` or ``failed``,
with the reasons and the figures behind them (docs/fidelity.md).

While a measurement runs (``with Watch(lab) as watch: ...``), a thread samples every ``PERIOD``
the lab's shaped interfaces on this machine (rate in force, bytes sent, backlog, drops; netem's
delay, queue and drops) and its tun devices' drops; /proc/stat is read per CPU at both ends.  A lab
on servers or pods is sampled by each share's own nestlab, on its machine (fidelity_shares.py).

A link interval counts as *saturated* when the link's shaper throttled (its overlimits grew) or
its queue held more than the configured delay explains at both ends of the interval: the link was
asked for more than its rate.  The rules:

* a link saturated for >= 0.5 s delivered < 90 % of the rate in force meanwhile: **failed**
  (the CPU could not serve the shaper);
* a tun device dropped what its reader (a tunnel daemon) was too slow for: **doubtful**, > 1 %
  of its packets **failed**;
* netem held packets (Little's law: mean queue / packets per second, unsaturated intervals,
  >= 200 packets/s) longer than delay + jitter + max(1 ms, 10 %), or shorter than
  delay - max(1 ms, 10 %): **doubtful**;
* an unsaturated link dropped more than its configured loss explains (+ 3 sigma + 0.5 %; not judged for
  correlated or Gilbert-Elliott loss, whose drops come in runs): **doubtful**;
* a CPU >= 95 % busy, the hypervisor stealing >= 10 % of the CPU time, or the sampler itself
  waking > 10 ms late (p95: timers, and with them netem, slip): **doubtful**.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import names
from ..engine import counters
from .fidelity_shares import Shares

if TYPE_CHECKING:
    from .lab import Lab

PERIOD = 0.05
MIN_TICKS = 10  # /proc/stat ticks (1/100 s) a CPU's share of the time is judged on, at the least
LEVELS = ("ok", "not judged", "doubtful", "failed")  # "not judged": nothing, or not all, was sampled
MIN_SATURATED_S = 0.5
RATE_SHORTFALL = 0.9
BUSY_PCT, STEAL_PCT, LATE_MS = 95.0, 10.0, 10.0


@dataclass
class Verdict:
    level: str = "ok"
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def add(self, level: str, reason: str) -> None:
        self.reasons.append(reason)
        if LEVELS.index(level) > LEVELS.index(self.level):
            self.level = level

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.level, "reasons": self.reasons, "figures": self.figures}

    @staticmethod
    def worst(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
        """One verdict for several measurements (a benchmark cell's repetitions): the worst level, every reason once."""
        level = max((v["verdict"] for v in verdicts), key=LEVELS.index, default="ok")
        reasons = list(dict.fromkeys(r for v in verdicts for r in v["reasons"]))
        return {"verdict": level, "reasons": reasons}


@dataclass
class _Link:
    """What the samples say about one shaped interface."""

    rate_bps: int | None = None
    saturated_s: float = 0.0
    capacity_bits: float = 0.0  # the rate in force, integrated over the saturated intervals
    delivered_bits: float = 0.0  # what the shaper sent in those intervals
    calm_s: float = 0.0
    calm_packets: int = 0
    calm_queue: float = 0.0  # netem's queue length integrated over unsaturated intervals (packet-seconds)
    calm_drops: int = 0
    calm_offered: int = 0
    sent_bytes: int = 0
    backlog_max: int = 0
    netem: counters.Netem | None = None


def _cpu_times() -> dict[str, list[int]]:
    """Per CPU: user, nice, system, idle, iowait, irq, softirq, steal (ticks)."""
    with open("/proc/stat") as fh:
        return {
            line.split()[0]: [int(v) for v in line.split()[1:9]] for line in fh if line.startswith("cpu") and line[3].isdigit()
        }


class Watch:
    """Samples a lab for as long as the ``with`` block runs (on servers or pods, each share samples itself); then ``verdict``."""

    def __init__(self, running: Lab, period: float = PERIOD):
        self.lab, self.period = running, period
        self.verdict = Verdict()
        self._stop = threading.Event()
        self._sockets: dict[str, tuple[int, counters.Netlink]] = {}
        self._links: dict[tuple[str, int], _Link] = {}
        self._labels: dict[tuple[str, int], str] = {}
        self._tun_first: dict[tuple[str, int], counters.LinkInfo] = {}
        self._late: list[float] = []
        self._cpu = 0.0
        self._error: Exception | None = None  # what stopped the sampler
        self._shares: Shares | None = None  # a lab on servers or pods: each share's own sampler

    def __enter__(self) -> Watch:
        site = self.lab.site()
        if site.shares():  # on servers or pods: each share samples itself, where its links and CPUs are
            self._shares = Shares(site, self.lab.name, self.period)
            self._started = time.monotonic()
            return self
        seen: set[int] = set()
        for node in self.lab.plan.nodes:
            path = names.netns_path(self.lab.name, node)
            ino = counters.inode(path)
            if ino is None or ino in seen:
                continue
            seen.add(ino)
            fd, nl = counters.opened(path)
            shaped, found = counters.shaped(nl), counters.interfaces(nl)
            tuns = [i for i in found if i.kind == "tun"]
            if not shaped and not tuns:
                nl.close()
                os.close(fd)
                continue
            self._sockets[node] = (fd, nl)
            by_index = {i.index: i.name for i in found}
            for index in shaped:
                self._labels[(node, index)] = f"{node}:{by_index.get(index, index)}"
            for tun in tuns:
                self._tun_first[(node, tun.index)] = tun
                self._labels[(node, tun.index)] = f"{node}:{tun.name}"
        from ..engine.inspect import trace_players

        self._lagged = {
            (n, i): h.get("lagged_s", 0) for n, ifaces in trace_players(self.lab.blueprint).items() for i, h in ifaces.items()
        }
        self._cpu_first, self._started = _cpu_times(), time.monotonic()
        self._thread = threading.Thread(target=self._sample, name="fidelity", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._shares is not None:
            _merge(self.verdict, self._shares.stop())
            self.verdict.figures.update(seconds=round(time.monotonic() - self._started, 3), period_ms=self.period * 1000)
            return
        self._stop.set()
        self._thread.join()
        elapsed = time.monotonic() - self._started
        self._judge_cpu(_cpu_times(), elapsed)
        self._judge_links()
        self._judge_tuns()
        self._judge_sampled()
        self._judge_traces()
        for fd, nl in self._sockets.values():
            nl.close()
            os.close(fd)

    def _read(self) -> dict[tuple[str, int], counters.Shaped]:
        return {(node, i): s for node, (_fd, nl) in self._sockets.items() for i, s in counters.shaped(nl).items()}

    def _sample(self) -> None:
        cpu = time.thread_time()
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - a sampler that stopped leaves the run not judged, and says why
            self._error = exc
        finally:
            self._cpu = time.thread_time() - cpu  # what the sampling itself cost, in the figures

    def _loop(self) -> None:
        last, at = self._read(), time.monotonic()
        due = at + self.period
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            self._late.append(max(0.0, time.monotonic() - due))
            now, t = self._read(), time.monotonic()
            for key, shaped in now.items():
                if key in last:
                    self._account(self._links.setdefault(key, _Link()), last[key], shaped, t - at)
            last, at = now, t
            due = max(due + self.period, t)  # after a stall: on from now, not a burst of catching up

    @staticmethod
    def _account(link: _Link, before: counters.Shaped, after: counters.Shaped, dt: float) -> None:
        link.rate_bps, link.netem = before.rate_bps, after.netem
        sent = after.root.bytes - before.root.bytes
        link.sent_bytes += sent
        link.backlog_max = max(link.backlog_max, after.root.backlog)
        held = 0.0  # bytes the configured delay keeps in flight at this rate
        if before.netem and before.rate_bps:
            held = before.rate_bps / 8 * (before.netem.delay_ns + before.netem.jitter_ns) / 1e9
        queued = min(before.root.backlog, after.root.backlog) > held + 3000
        if after.root.overlimits > before.root.overlimits or queued:
            if before.rate_bps:
                link.saturated_s += dt
                link.capacity_bits += before.rate_bps * dt
                link.delivered_bits += sent * 8
            return
        link.calm_s += dt
        if before.netem and after.netem:
            packets = after.netem.counters.packets - before.netem.counters.packets
            drops = after.netem.counters.drops - before.netem.counters.drops
            link.calm_packets += packets
            link.calm_queue += (before.netem.counters.qlen + after.netem.counters.qlen) / 2 * dt
            link.calm_drops += drops
            link.calm_offered += packets + drops
        else:
            link.calm_drops += after.root.drops - before.root.drops
            link.calm_offered += after.root.packets - before.root.packets + after.root.drops - before.root.drops

    def _judge_cpu(self, cpu_last: dict[str, list[int]], elapsed: float) -> None:
        cpus, steal_all, total_all = {}, 0, 0
        for name, last in cpu_last.items():
            d = [b - a for a, b in zip(self._cpu_first.get(name, last), last)]
            if sum(d) < MIN_TICKS:
                continue  # too few ticks passed (one busy tick reads 100 %): nothing to say of this CPU
            total = sum(d)
            idle = d[3] + d[4]
            cpus[name] = {
                "busy_pct": round(100 * (total - idle) / total, 1),
                "softirq_pct": round(100 * d[6] / total, 1),
                "steal_pct": round(100 * d[7] / total, 1),
            }
            steal_all, total_all = steal_all + d[7], total_all + total
            if cpus[name]["busy_pct"] >= BUSY_PCT:
                self.verdict.add(
                    "doubtful",
                    f"{name} was {cpus[name]['busy_pct']:.0f} % busy (softirq {cpus[name]['softirq_pct']:.0f} %): "
                    "the emulation may have waited for it",
                )
        steal = 100 * steal_all / (total_all or 1)
        if steal >= STEAL_PCT:
            self.verdict.add("doubtful", f"the hypervisor took {steal:.0f} % of the CPU time")
        late = sorted(self._late)
        p95 = 1000 * late[int(0.95 * (len(late) - 1))] if late else 0.0
        if p95 > LATE_MS:
            self.verdict.add("doubtful", f"timers fired up to {p95:.0f} ms late (p95 of the sampler's wake-ups): delays slip")
        self.verdict.figures.update(
            seconds=round(elapsed, 3),
            samples=len(late),
            period_ms=self.period * 1000,
            sampler_late_p95_ms=round(p95, 2),
            sampler_cpu_s=round(self._cpu, 3),
            steal_pct=round(steal, 1),
            cpus=cpus,
        )

    def _judge_links(self) -> None:
        shown = {}
        for key, link in self._links.items():
            if not link.sent_bytes:
                continue  # idle during the measurement: nothing to judge
            label = self._labels.get(key, str(key))
            fig: dict[str, Any] = {
                "rate_mbit": link.rate_bps / 1e6 if link.rate_bps else None,
                "sent_mbit": round(link.sent_bytes * 8 / 1e6, 3),
                "saturated_s": round(link.saturated_s, 2),
                "backlog_max_bytes": link.backlog_max,
            }
            if link.saturated_s >= MIN_SATURATED_S and link.capacity_bits:
                share = link.delivered_bits / link.capacity_bits
                fig["delivered_share_when_saturated"] = round(share, 3)
                if share < RATE_SHORTFALL:
                    self.verdict.add(
                        "failed",
                        f"{label} delivered {100 * share:.0f} % of its rate ({link.delivered_bits / link.saturated_s / 1e6:.1f} of "
                        f"{link.capacity_bits / link.saturated_s / 1e6:.1f} Mbit/s) while its queue was full for {link.saturated_s:.1f} s",
                    )
            if link.netem:
                self._judge_netem(label, link, fig)
            elif link.calm_drops and link.calm_offered:
                share = link.calm_drops / link.calm_offered
                fig["dropped_pct_unsaturated"] = round(100 * share, 3)
                if share > 0.005:
                    self.verdict.add("doubtful", f"{label} dropped {100 * share:.1f} % of its packets without being full")
            shown[label] = fig
        self.verdict.figures["links"] = shown

    def _judge_netem(self, label: str, link: _Link, fig: dict[str, Any]) -> None:
        netem = link.netem
        assert netem is not None
        delay, jitter = netem.delay_ns / 1e6, netem.jitter_ns / 1e6
        fig["netem"] = {"delay_ms": delay, "jitter_ms": jitter, "loss_pct": round(100 * netem.loss, 3)}
        if link.calm_s >= 1.0 and link.calm_packets / link.calm_s >= 200 and delay:
            held = 1000 * link.calm_queue / link.calm_packets  # Little's law: W = L / lambda
            fig["netem"]["held_ms"] = round(held, 2)
            slack = max(1.0, 0.1 * delay)
            if held > delay + jitter + slack or held < delay - slack:
                self.verdict.add(
                    "doubtful",
                    f"{label}: netem held packets {held:.1f} ms on average where {delay:g} ms (jitter {jitter:g}) is set",
                )
        if link.calm_offered and not netem.bursty:  # runs of drops are not binomial: left to the figures
            share, expected = link.calm_drops / link.calm_offered, netem.loss
            fig["netem"]["dropped_pct_unsaturated"] = round(100 * share, 3)
            sigma = math.sqrt(expected * (1 - expected) / link.calm_offered)
            if share > expected + 3 * sigma + 0.005:
                self.verdict.add(
                    "doubtful",
                    f"{label} dropped {100 * share:.1f} % of its packets without being full; its loss of {100 * expected:g} % explains less",
                )

    def _judge_tuns(self) -> None:
        shown = {}
        for node, (_fd, nl) in self._sockets.items():
            for info in counters.interfaces(nl):
                first = self._tun_first.get((node, info.index))
                if first is None:
                    continue
                dropped, passed = info.tx_dropped - first.tx_dropped, info.tx_packets - first.tx_packets
                label = self._labels[(node, info.index)]
                if not dropped and not passed:
                    continue
                share = dropped / (dropped + passed)
                shown[label] = {"packets": passed, "dropped": dropped}
                if dropped:
                    self.verdict.add(
                        "failed" if share > 0.01 else "doubtful",
                        f"{label} dropped {dropped} packets ({100 * share:.2f} %) its daemon was too slow to read",
                    )
        self.verdict.figures["tuns"] = shown

    def _judge_traces(self) -> None:
        """A trace player that died carried nothing since (failed); one that lagged played the trace late (doubtful)."""
        from ..engine.inspect import trace_players

        for node, ifaces in trace_players(self.lab.blueprint).items():
            for iface, health in ifaces.items():
                if health["player"] != "playing" or health.get("lagged_s", 0) > self._lagged.get((node, iface), 0):
                    level = "failed" if health["player"] == "dead" else "doubtful"
                    why = health.get("why", "it lagged")
                    self.verdict.add(level, f"the trace player of {node}:{iface} is {health['player']}: {why}")

    def _judge_sampled(self) -> None:
        """Not judged where nothing was sampled: a sampler that stopped, no sample taken."""
        if self._error is not None:
            self.verdict.add("not judged", f"the sampler stopped: {type(self._error).__name__}: {self._error}")
        if not self._late:
            self.verdict.add("not judged", f"no sample was taken (the measurement lasted less than {self.period * 1000:g} ms)")


def _merge(verdict: Verdict, answers: dict[str, dict[str, Any] | str]) -> None:
    """The shares' verdicts as one: the worst level, each reason prefixed with its share, links and tuns
    with their share, CPUs as SHARE:cpuN; a share without a verdict leaves the run not judged."""
    links: dict[str, dict[str, Any]] = {}
    tuns: dict[str, dict[str, Any]] = {}
    cpus: dict[str, dict[str, Any]] = {}
    shares: dict[str, dict[str, Any]] = {}
    for share, answer in sorted(answers.items()):
        if isinstance(answer, str):
            verdict.add("not judged", f"{share}: nothing was sampled there: {answer}")
            continue
        for reason in answer["reasons"]:  # a share not ok says why
            verdict.add(answer["verdict"], f"{share}: {reason}")
        figures = answer["figures"]
        links.update({label: {"share": share, **fig} for label, fig in figures.get("links", {}).items()})
        tuns.update({label: {"share": share, **fig} for label, fig in figures.get("tuns", {}).items()})
        cpus.update({f"{share}:{cpu}": fig for cpu, fig in figures.get("cpus", {}).items()})
        shares[share] = {"verdict": answer["verdict"], **{k: v for k, v in figures.items() if k not in ("links", "tuns", "cpus")}}
    sampled = list(shares.values())
    verdict.figures.update(
        samples=min((s.get("samples", 0) for s in sampled), default=0),
        sampler_late_p95_ms=max((s.get("sampler_late_p95_ms", 0.0) for s in sampled), default=0.0),
        sampler_cpu_s=round(sum(s.get("sampler_cpu_s", 0.0) for s in sampled), 3),
        steal_pct=max((s.get("steal_pct", 0.0) for s in sampled), default=0.0),
        cpus=cpus,
        links=links,
        tuns=tuns,
        shares=shares,
    )


def summary_line(verdicts: list[dict[str, Any]]) -> str | None:
    """One line when any verdict is not ok (None when all are)."""
    bad = [v for v in verdicts if v["verdict"] != "ok"]
    if not bad:
        return None
    count = {level: sum(v["verdict"] == level for v in bad) for level in LEVELS[1:]}
    first = next((v["reasons"][0] for v in bad if v["reasons"]), "")
    kinds = ", ".join(f"{n} {level}" for level, n in reversed(count.items()) if n)
    return f"fidelity: {len(bad)} of {len(verdicts)} not ok ({kinds}); e.g. {first}"

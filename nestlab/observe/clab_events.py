"""containerlab's ``events`` (``nestlab clab events``): every lab of this machine, as containerlab reports
its containers and their interfaces, one JSON object (or line) per event.

Each event has containerlab's fields: ``timestamp``, ``type`` (container, interface), ``action``,
``actor_id`` (the node's short id), ``actor_name`` (``clab-LAB-NODE``), ``actor_full_id`` and
``attributes``.  Containers: ``running``/``exited`` snapshots (``--initial-state``), then ``start``,
``stop``, ``pause``, ``unpause``, ``die`` and ``destroy``.  Interfaces: ``snapshot``, then ``create``,
``update``, ``delete`` and, with an interval, ``stats`` (counters and rates).  Each lab's own stream
(engine/stream.py) is followed in a thread of its own; labs deployed later are picked up.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from .. import names
from ..backends.kernel import rtdump
from ..engine import state
from ..engine.stream import Stream
from . import clab_view

LAB_POLL = 1.0  # seconds between looks for labs deployed since


def stamp(at: float | None = None) -> str:
    """An RFC 3339 time with nanoseconds, as containerlab (Go) writes it."""
    at = time.time() if at is None else at
    whole = datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{int(round(at % 1 * 1e9)) % 1_000_000_000:09d}Z"


class _Lab:
    """One lab's containers, as events name them."""

    def __init__(self, lab: str):
        self.lab = lab
        self.containers = {c["node"]: c for c in clab_view.containers(lab)}

    def actor(self, node: str) -> tuple[str, str, str]:
        short, full = clab_view.identity(self.lab, node)
        return short, self.containers[node]["name"] if node in self.containers else names.long_name(None, self.lab, node), full

    def container(self, node: str, action: str, state_: str, origin: str | None = None) -> dict[str, Any]:
        c = self.containers.get(node, {})
        attributes = {
            **c.get("labels", {}),
            "image": c.get("image", ""),
            "name": c.get("name", ""),
            "state": state_,
            "lab": self.lab,
        }
        for key, field in (("mgmt_ipv4", "ipv4_address"), ("mgmt_ipv6", "ipv6_address")):
            if c.get(field, "N/A") != "N/A":
                attributes[key] = c[field]
        if origin:
            attributes["origin"] = origin
        return self._event("container", action, node, attributes)

    def interface(self, node: str, action: str, link: rtdump.LinkInfo, extra: dict[str, str] | None = None) -> dict[str, Any]:
        attributes = {
            "ifname": link.name,
            "index": str(link.index),
            "mtu": str(link.mtu),
            "state": link.state.lower(),
            "type": link.kind or "device",
            "origin": "netlink",
            "lab": self.lab,
            "name": self.actor(node)[1],
            **({"mac": link.mac} if link.mac else {}),
            **({"alias": link.alias} if link.alias else {}),
            **(extra or {}),
        }
        return self._event("interface", action, node, attributes)

    def _event(self, kind: str, action: str, node: str, attributes: dict[str, str]) -> dict[str, Any]:
        short, name, full = self.actor(node)
        return {
            "timestamp": stamp(),
            "type": kind,
            "action": action,
            "actor_id": short,
            "actor_name": name,
            "actor_full_id": full,
            "attributes": {k: str(v) for k, v in attributes.items()},
        }

    def links(self, node: str) -> list[rtdump.LinkInfo]:
        return [i for i in rtdump.of_namespace(names.netns_path(self.lab, node)) if i.name != "lo"]

    def snapshot(self) -> list[dict[str, Any]]:
        """Every container and interface as it is now."""
        found = []
        for node, c in self.containers.items():
            found.append(self.container(node, c["state"], c["state"], "snapshot"))
            found.extend(self.interface(node, "snapshot", link) for link in self.links(node))
        return found

    def translate(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A nestlab event of this lab as containerlab's events (none for what containerlab does not report)."""
        node, kind = event.get("node"), event["event"]
        if kind == "change":
            what = event.get("what") or {}
            action = {"stop": "stop", "start": "start", "pause": "pause", "resume": "unpause"}.get(what.get("action", ""))
            nodes = what.get("nodes") or ([what["node"]] if what.get("node") else [])
            state_ = "exited" if action == "stop" else "paused" if action == "pause" else "running"
            return [self.container(n, action, state_) for n in nodes] if action else []
        if node is None:  # each event below is a node's
            return []
        if kind == "node-started":
            self.containers = {c["node"]: c for c in clab_view.containers(self.lab)}
            return [self.container(node, "start", "running")]
        if kind == "node-stopped":
            return [self.container(node, "die", "exited"), self.container(node, "destroy", "exited")]
        if kind == "interface-removed":
            gone = rtdump.LinkInfo(0, event["interface"], "DOWN", False, False, 0, None, None, None)
            return [self.interface(node, "delete", gone)]
        if kind in ("interface-added", "up", "down", "carrier-on", "carrier-lost"):
            link = next((i for i in self.links(node) if i.name == event["interface"]), None)
            return [self.interface(node, "create" if kind == "interface-added" else "update", link)] if link else []
        return []


class Feed:
    """containerlab's events of every lab, as they come (``initial``: a snapshot first; ``stats_every``:
    interface counters every that many seconds)."""

    def __init__(self, initial: bool, stats_every: float | None, until: float | None = None):
        self.initial = initial
        self.stats_every = stats_every
        self.until = until
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.labs: dict[str, _Lab] = {}
        self.streams: list[Stream] = []
        self.counters: dict[tuple[str, str, str], tuple[float, rtdump.LinkInfo]] = {}

    def _follow(self, followed: _Lab, stream: Stream) -> None:
        try:
            for event in stream:
                for translated in followed.translate(event):
                    self.queue.put(translated)
                if event["event"] == "lab-destroyed":
                    return
        except OSError:  # the lab went while its namespaces were read
            return

    def _look(self, first: bool) -> list[dict[str, Any]]:
        """Labs not followed yet: their snapshot (at the start, with ``initial``) or their containers' start."""
        found = []
        for name in state.labs():
            current = state.read(name)
            if name in self.labs or current is None or current.status != "running":
                continue
            lab = self.labs[name] = _Lab(name)
            if first and self.initial:
                found += lab.snapshot()
            elif not first:
                for node in lab.containers:
                    found.append(lab.container(node, "start", "running"))
                    found.extend(lab.interface(node, "create", link) for link in lab.links(node))
            stream = Stream(name)
            self.streams.append(stream)
            threading.Thread(target=self._follow, args=(lab, stream), daemon=True, name=f"events-{name}").start()
        for name in [n for n in self.labs if not state.read(n)]:
            del self.labs[name]
        return found

    def _stats(self) -> list[dict[str, Any]]:
        found = []
        now = time.monotonic()
        for lab in list(self.labs.values()):
            for node in lab.containers:
                for link in lab.links(node):
                    key = (lab.lab, node, link.name)
                    before = self.counters.get(key)
                    self.counters[key] = (now, link)
                    if before is None:
                        continue
                    spent = max(now - before[0], 1e-6)
                    rates = {
                        "rx_bytes": link.rx_bytes,
                        "tx_bytes": link.tx_bytes,
                        "rx_packets": link.rx_packets,
                        "tx_packets": link.tx_packets,
                        "rx_bps": round((link.rx_bytes - before[1].rx_bytes) * 8 / spent, 3),
                        "tx_bps": round((link.tx_bytes - before[1].tx_bytes) * 8 / spent, 3),
                        "rx_pps": round((link.rx_packets - before[1].rx_packets) / spent, 3),
                        "tx_pps": round((link.tx_packets - before[1].tx_packets) / spent, 3),
                        "interval_seconds": round(spent, 3),
                    }
                    found.append(lab.interface(node, "stats", link, {k: str(v) for k, v in rates.items()}))
        return found

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self._look(first=True)
        next_look = time.monotonic() + LAB_POLL
        next_stats = time.monotonic() + (self.stats_every or 0)
        if self.stats_every:
            self._stats()  # the first reading: rates start with the next
        while self.until is None or time.monotonic() < self.until:
            wake = min(next_look, next_stats if self.stats_every else next_look)
            try:
                yield self.queue.get(timeout=max(0.0, wake - time.monotonic()))
                continue
            except queue.Empty:
                pass
            if time.monotonic() >= next_look:
                yield from self._look(first=False)
                next_look = time.monotonic() + LAB_POLL
            if self.stats_every and time.monotonic() >= next_stats:
                yield from self._stats()
                next_stats = time.monotonic() + self.stats_every

    def close(self) -> None:
        for stream in self.streams:
            stream.close()

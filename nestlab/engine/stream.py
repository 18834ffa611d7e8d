"""``nestlab events``: one stream of what happens in a lab.

Sources, merged in arrival order:

* rtnetlink multicast in every namespace of the lab: interfaces added/removed, set up/down
  (``up``/``down``, the administrative state ``link set --down`` changes), carrier lost/back,
  addresses added/removed;
* the kernel's process connector: a process inside the lab exits (with its exit status);
* the lab's namespaces appearing and disappearing: nodes and components started/stopped;
* the lab's event log (engine/events.py): what nestlab changed (``link set``, schedules, node
  stop/start, bench cells), which ``--since`` replays.

Each event is a dict (:class:`Event`): ``time`` (seconds since the epoch), ``lab``, ``node``, ``interface``,
``event`` and what else it says.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any, TypedDict

from .. import names
from ..backends.kernel import namespaces, rtdump
from ..backends.kernel.netlink import RTM_DELADDR, RTM_DELLINK, RTM_NEWADDR, RTM_NEWLINK, Netlink, messages
from . import cleanup, events

RTMGRP_LINK, RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR = 0x1, 0x10, 0x100
NETLINK_CONNECTOR, CN_IDX_PROC, PROC_CN_MCAST_LISTEN = 11, 1, 1
PROC_EVENT_EXEC, PROC_EVENT_EXIT = 0x2, 0x80000000
_CN_MSG = struct.Struct("=IIIIHH")
_PROC_EVENT = struct.Struct("=IIQ")  # what, cpu, timestamp_ns
NAMESPACE_POLL = 0.25


class Event(TypedDict, total=False):
    """One event: ``time``, ``lab``, ``node``, ``interface`` and ``event`` in every one the stream gives, the rest as
    the event says."""

    time: float
    lab: str
    node: str | None
    interface: str | None
    event: str
    state: str  # the interface's operational state
    address: str
    pid: int
    command: str
    exit_code: int
    signal: int
    source: str  # "nestlab": a change the lab's event log recorded
    what: dict[str, Any]
    scheduled: float | None
    latency_ms: float


class _Namespace:
    """One node's multicast socket and what it last said of each interface."""

    def __init__(self, lab: str, node: str):
        self.node = node
        with namespaces.entered(names.netns_path(lab, node)):
            self.nl = Netlink(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR)
            self.inode = os.stat("/proc/thread-self/ns/net").st_ino
            seen = rtdump.interfaces(self.nl)
        self.names = {i.index: i.name for i in seen}
        self.last = {i.index: (i.admin_up, i.carrier) for i in seen}

    def read(self) -> list[Event]:
        out: list[Event] = []
        for kind, _seq, body in messages(self.nl.sock.recv(1 << 16)):
            if kind in (RTM_NEWLINK, RTM_DELLINK):
                info = rtdump.parse_link(body)
                self.names[info.index] = info.name
                if kind == RTM_DELLINK:
                    self.last.pop(info.index, None)
                    out.append({"node": self.node, "interface": info.name, "event": "interface-removed"})
                    continue
                before = self.last.get(info.index)
                self.last[info.index] = (info.admin_up, info.carrier)
                if before is None:
                    out.append({"node": self.node, "interface": info.name, "event": "interface-added", "state": info.state})
                    continue
                if before[0] != info.admin_up:
                    out.append(
                        {
                            "node": self.node,
                            "interface": info.name,
                            "event": "up" if info.admin_up else "down",
                            "state": info.state,
                        }
                    )
                if before[1] != info.carrier and info.admin_up:
                    out.append(
                        {"node": self.node, "interface": info.name, "event": "carrier-on" if info.carrier else "carrier-lost"}
                    )
            elif kind in (RTM_NEWADDR, RTM_DELADDR):
                index, address = rtdump.parse_address(body)
                if not address.startswith("fe80:"):
                    out.append(
                        {
                            "node": self.node,
                            "interface": self.names.get(index),
                            "address": address,
                            "event": "address-added" if kind == RTM_NEWADDR else "address-removed",
                        }
                    )
        return out

    def close(self) -> None:
        self.nl.close()


def _proc_connector() -> socket.socket | None:
    """A socket on the kernel's process events (None where the kernel has no CONFIG_PROC_EVENTS)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        sock.bind((0, CN_IDX_PROC))
        op = struct.pack("=I", PROC_CN_MCAST_LISTEN)
        body = _CN_MSG.pack(CN_IDX_PROC, 1, 0, 0, len(op), 0) + op
        sock.send(struct.pack("=IHHII", 16 + len(body), 3, 0, 0, 0) + body)
        return sock
    except OSError:
        return None


def _log_entry(lab: str, entry: events.Entry) -> Event:
    what = entry.get("what", {})
    return {
        "time": entry.get("applied"),
        "lab": lab,
        "node": what.get("node"),
        "interface": None,
        "event": "change",
        "source": "nestlab",
        "what": what,
        "scheduled": entry.get("scheduled"),
        "latency_ms": entry.get("latency_ms"),
    }


class Stream:
    """The events of one lab, live; ``since`` (epoch seconds) first replays the lab's event log from then;
    ``until`` (``time.monotonic()``) ends the stream then, whether or not anything happened."""

    def __init__(self, lab: str, since: float | None = None, until: float | None = None):
        self.lab = lab
        self.since = since
        self.until = until
        self.spaces: dict[str, _Namespace] = {}
        self.procs: dict[int, tuple[str, str]] = {}  # pid -> (node, command)
        self.proc_sock = _proc_connector()
        self.log_pos = 0
        self._watch_namespaces(announce=False)

    def _node_of(self, path: str) -> str:
        return os.path.basename(path)[len(names.netns_name(self.lab, "")) :]

    def _watch_namespaces(self, announce: bool) -> list[Event]:
        out: list[Event] = []
        present = {self._node_of(p) for p in cleanup.marked_namespaces(self.lab)}
        for node in present - set(self.spaces):
            try:
                self.spaces[node] = _Namespace(self.lab, node)
            except (FileNotFoundError, OSError):
                continue
            if announce:
                out.append({"node": node, "interface": None, "event": "node-started"})
        for node in set(self.spaces) - present:
            self.spaces.pop(node).close()
            out.append({"node": node, "interface": None, "event": "node-stopped"})
        if not announce:  # the processes already running in the lab, so their exits are told
            by_inode = {s.inode: n for n, s in self.spaces.items()}
            for pid in namespaces.pids_in(set(by_inode)):
                self._track(pid, by_inode)
        return out

    def _track(self, pid: int, by_inode: dict[int, str]) -> None:
        try:
            node = by_inode.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
            if node:
                with open(f"/proc/{pid}/comm") as fh:
                    self.procs[pid] = (node, fh.read().strip())
        except OSError:
            pass

    def _proc_events(self, sock: socket.socket) -> list[Event]:
        out: list[Event] = []
        data = sock.recv(4096)
        off = 16 + _CN_MSG.size  # nlmsghdr, cn_msg
        what, _cpu, _stamp = _PROC_EVENT.unpack_from(data, off)
        pid, tgid = struct.unpack_from("=ii", data, off + _PROC_EVENT.size)
        if what == PROC_EVENT_EXEC and pid == tgid:
            self._track(pid, {s.inode: n for n, s in self.spaces.items()})
        elif what == PROC_EVENT_EXIT and pid == tgid and pid in self.procs:
            status, signal = struct.unpack_from("=II", data, off + _PROC_EVENT.size + 8)
            node, command = self.procs.pop(pid)
            code: Event = {"exit_code": status >> 8} if not status & 0x7F else {"signal": status & 0x7F}
            out.append({"node": node, "interface": None, "event": "process-exited", "pid": pid, "command": command, **code})
        return out

    def _log(self) -> list[Event]:
        try:
            with open(events.path(self.lab)) as fh:
                fh.seek(self.log_pos)
                lines = fh.readlines()
                if lines and not lines[-1].endswith("\n"):  # a line still being written: next time
                    lines.pop()
                self.log_pos += sum(len(line.encode()) for line in lines)
        except FileNotFoundError:
            return []
        return [_log_entry(self.lab, json.loads(line)) for line in lines if line.strip()]

    def replay(self) -> list[Event]:
        """The log's entries since ``since`` (all the log when ``since`` is None, none when live only)."""
        entries = self._log()
        if self.since is None:
            return []
        return [e for e in entries if e["time"] is not None and e["time"] >= self.since]

    def __iter__(self) -> Iterator[Event]:
        for event in self.replay():
            yield event
        next_scan = time.monotonic() + NAMESPACE_POLL
        while True:
            by_fd = {s.nl.sock.fileno(): s for s in self.spaces.values()}
            extra = [self.proc_sock.fileno()] if self.proc_sock else []
            wake = next_scan if self.until is None else min(next_scan, self.until)
            ready, _, _ = select.select(list(by_fd) + extra, [], [], max(0.0, wake - time.monotonic()))
            now = time.time()
            found: list[Event] = []
            for fd in ready:
                if fd in by_fd:
                    found += by_fd[fd].read()
                elif self.proc_sock:
                    found += self._proc_events(self.proc_sock)
            if time.monotonic() >= next_scan:
                found += self._watch_namespaces(announce=True) + self._log()
                next_scan = time.monotonic() + NAMESPACE_POLL
            for event in found:
                yield {"time": now, "lab": self.lab, **event} if "time" not in event else event
            if not self.spaces and not os.path.isdir(names.lab_dir(self.lab)):
                yield {"time": time.time(), "lab": self.lab, "node": None, "interface": None, "event": "lab-destroyed"}
                return
            if self.until is not None and time.monotonic() >= self.until:
                return

    def close(self) -> None:
        for space in self.spaces.values():
            space.close()
        if self.proc_sock:
            self.proc_sock.close()


def line_of(event: Event) -> str:
    """An event as one line of text: its time, where (NODE:INTERFACE, or the lab), what, and the rest as JSON."""
    stamp = time.strftime("%H:%M:%S", time.localtime(event["time"])) + f".{int(event['time'] % 1 * 1000):03d}"
    where = ":".join(x for x in (event.get("node"), event.get("interface")) if x)
    rest = {k: v for k, v in event.items() if k not in ("time", "lab", "node", "interface", "event") and v is not None}
    return f"{stamp}  {where or event['lab']:<24} {event['event']:<16} {json.dumps(rest) if rest else ''}".rstrip()

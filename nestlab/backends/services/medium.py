"""The wireless medium's process: one per ``kind: wireless`` node, in that node's namespace, where each
station's link ends as an ordinary veth port (docs/wireless.md).

It reads every frame a station sends from one packet socket on all the namespace's ports, and hands it
to the channel (channel.py: airtime, collisions, loss); at each frame's end it writes it to the ports of
the stations that receive it.  A unix socket in the lab's folder (owner only) takes new positions and
answers what the medium holds (``nestlab node move``, mobility, ``inspect``): a thread of its own reads each
request, bounded in size and time, so a slow or silent client never holds a frame.  Started with
``python -m nestlab.backends.services.medium CONFIG``; it ends with its node's namespace.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import math
import os
import queue
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ... import names
from ...errors import LabError
from ..kernel import detached, files, namespaces

ETH_P_ALL = 0x0003
SOL_PACKET, PACKET_IGNORE_OUTGOING = 263, 23
SIOCETHTOOL, SIOCGIFADDR, SIOCGIFHWADDR = 0x8946, 0x8915, 0x8927
ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO = 0x17, 0x1F, 0x24
_READY_S = 10.0
_BATCH = 512  # frames read before the channel runs again
REQUEST_BYTES = 4 << 20  # a control request's most (a move of 1000 stations is about 60 KB)
REQUEST_SECONDS = 2.0  # a control client's whole time to send its request, and again to read the answer
SILENT = -300.0  # dBm and dBi of a station removed live: no one hears it, it hears no one
MACS_PER_STATION = 8  # source addresses one station's port may own at once (the oldest is forgotten)


def folder(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "wireless")


def socket_path(lab: str, node: str) -> str:
    return os.path.join(folder(lab), f"{node}.sock")


def start(lab: str, node: str, config: dict[str, Any], popen: Callable[..., subprocess.Popen[Any]]) -> None:
    """Start the medium of ``node`` (``popen``: how to start a process inside it); returns once it listens."""
    files.make_dirs(folder(lab), 0o700)
    path = os.path.join(folder(lab), f"{node}.json")
    control = socket_path(lab, node)
    files.unlink(control)
    files.write(path, json.dumps({**config, "control": control}), sync=False)
    log = os.path.join(folder(lab), f"{node}.log")
    with files.created(log, 0o600) as err:
        proc = popen([*names.python_module(__name__), path], **detached.options(None, err))
    detached.ready(proc, control, log, f"the wireless medium {node}", _READY_S)


def ask(lab: str, node: str, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """Send one request to a running medium and return its answer."""
    path = socket_path(lab, node)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            raise LabError(f"the wireless medium {node} of lab {lab} does not answer ({exc}); redeploy the lab") from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        data = b"".join(iter(lambda: sock.recv(65536), b""))
    answer: dict[str, Any] = json.loads(data)
    if "error" in answer:
        raise LabError(f"wireless medium {node}: {answer['error']}")
    return answer


def trouble(lab: str, node: str) -> str | None:
    """Why the medium of ``node`` does not answer (None: it does): its process ended (with its log's last
    line, which names the error) or it is stuck."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(3)
            sock.connect(socket_path(lab, node))
    except (ConnectionRefusedError, FileNotFoundError):
        return _ended(lab, node)
    except OSError as exc:
        return f"not answering ({exc})"
    try:
        ask(lab, node, {"op": "state"}, timeout=3)
    except (LabError, OSError, ValueError) as exc:
        return f"not answering within 3 s ({exc})"
    return None


def _ended(lab: str, node: str) -> str:
    log = os.path.join(folder(lab), f"{node}.log")
    try:
        with open(log, "rb") as fh:  # the medium's own log, in the lab's folder: the last 4 KB are enough
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            last = [line for line in fh.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        last = []
    return "its process has ended" + (f": {last[-1].strip()}" if last else "") + "; redeploy the lab to start it again"


def plain_frames(lab: str, node: str, iface: str) -> None:
    """No checksum or segmentation offload on a station's interface: what it sends is whole, checked frames
    (a packet socket hands on neither a partial checksum nor a 64 KB segment).  Then the station announces its
    address (a gratuitous ARP): a station made anew has a new MAC address, which its peers' ARP caches learn at
    once instead of sending to the old one until the entry goes stale."""
    with namespaces.entered(names.netns_path(lab, node)):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    with sock, raw:
        for cmd in (ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO):
            value = array.array("I", [cmd, 0])
            request = struct.pack("16sP", iface.encode(), value.buffer_info()[0])
            with contextlib.suppress(OSError):  # an interface without the feature
                fcntl.ioctl(sock, SIOCETHTOOL, request)
        with contextlib.suppress(OSError):  # no IPv4 address, or the interface is down: nothing to announce
            name = struct.pack("256s", iface.encode())
            mac = fcntl.ioctl(sock, SIOCGIFHWADDR, name)[18:24]
            ip = fcntl.ioctl(sock, SIOCGIFADDR, name)[20:24]
            arp = b"\x00\x01\x08\x00\x06\x04\x00\x01" + mac + ip + bytes(6) + ip  # a request for its own address
            raw.sendto(b"\xff" * 6 + mac + b"\x08\x06" + arp + bytes(18), (iface, 0))


# -- the process ---------------------------------------------------------------------------------------------
class Medium:
    """The running medium: ports, stations, channel and control socket."""

    def __init__(self, config: dict[str, Any]) -> None:
        import numpy as np

        from ...model import radio
        from ...model.wireless import Fading, Propagation, frequency
        from .channel import Channel

        self.names = [s["name"] for s in config["stations"]]
        self.ports = [s["port"] for s in config["stations"]]
        self.index = {port: i for i, port in enumerate(self.ports)}
        self.by_name = {name: i for i, name in enumerate(self.names)}
        self.standard = config["standard"]
        self.shown = {
            "rate_control": config.get("rate_control", "ideal"),
            "fading": (config.get("fading") or {}).get("model", "none"),
        }
        pos = np.array([s["position"] for s in config["stations"]], dtype=float).reshape(-1, 3)
        self.channel = Channel(
            radio.phy(config["standard"], config.get("width"), config.get("streams", 1), config.get("short_gi", False)),
            Propagation(**config["propagation"]),
            frequency(config["standard"], config.get("channel")),
            config["noise_floor"],
            pos,
            np.array([s["tx_power"] for s in config["stations"]], dtype=float),
            np.array([s["antenna_gain"] for s in config["stations"]], dtype=float),
            queue=config.get("queue", 100),
            keys=radio.station_keys(self.names),
            rate_control=config.get("rate_control", "ideal"),
            fading=Fading(**config["fading"]) if config.get("fading") else None,
        )
        self.macs: dict[bytes, int] = {}  # source MAC -> station: at most MACS_PER_STATION per station
        self.owned: list[deque[bytes]] = [deque() for _ in self.names]
        self.reaches: dict[tuple[float, float], float] = {}  # (tx power, gain) -> metres heard at all
        self.moves = 0

    def move(self, positions: dict[str, list[float]]) -> None:
        pos = self.channel.pos.copy()
        for name, where in positions.items():
            if name not in self.by_name:
                raise ValueError(f"no station {name} on this medium (stations: {', '.join(self.names)})")
            if not isinstance(where, list) or len(where) not in (2, 3):
                raise ValueError(f"a position is [x, y] or [x, y, z], not {where}")
            metres = [float(v) for v in where]
            if not all(math.isfinite(v) for v in metres):
                raise ValueError(f"a position is finite metres, not {where}")
            pos[self.by_name[name]] = [*metres, *([0.0] * (3 - len(metres)))]
        self.channel.place(pos)
        self.moves += 1

    def join(self, stations: list[dict[str, Any]]) -> None:
        """The stations as a deploy left them: new ones join (the frames of the others go on), changed ones take
        their place, power and gain, and those gone go silent and deaf (their port is gone too)."""
        import numpy as np

        from ...model import radio

        ch = self.channel
        pos, tx, gain = ch.pos.copy(), ch.tx.copy(), ch.gain.copy()
        for s in stations:
            if s["name"] not in self.by_name:
                self.by_name[s["name"]] = len(self.names)
                self.names.append(s["name"])
                self.ports.append(s["port"])
                self.owned.append(deque())
                pos, tx, gain = np.vstack([pos, np.zeros(3)]), np.append(tx, 0.0), np.append(gain, 0.0)
            i = self.by_name[s["name"]]
            self.ports[i] = s["port"]
            pos[i] = [*map(float, s["position"]), *([0.0] * (3 - len(s["position"])))]
            tx[i], gain[i] = float(s["tx_power"]), float(s["antenna_gain"])
        kept = {s["name"] for s in stations}
        for name, i in self.by_name.items():
            if name not in kept:
                tx[i] = gain[i] = SILENT
        self.index = {port: i for i, port in enumerate(self.ports) if self.names[i] in kept}
        ch.resize(pos, tx, gain, radio.station_keys(self.names))

    def state(self) -> dict[str, Any]:
        ch = self.channel
        pairs = [
            [self.names[i], self.names[j], ch.rate(i, j), round(float(ch.links.rx[i, j]), 1), round(ch.loss(i, j), 4)]
            for i in range(len(self.names))
            for j in ch.hears[i]
        ]
        here = set(self.index.values())  # not the stations a deploy removed
        stations = {
            name: {"port": self.ports[i], "position": ch.pos[i].round(3).tolist(), "tx_power": float(ch.tx[i]),
                   "antenna_gain": float(ch.gain[i]), "queued": ch.queued(i), "reach_m": self._reach(i)}
            for i, name in enumerate(self.names)
            if i in here
        }  # fmt: skip
        return {
            "standard": self.standard,
            "top_rate": ch.phy.rates[-1][0],
            **self.shown,
            "stations": stations,
            "pairs": pairs,
            "counts": ch.counts,
            "moves": self.moves,
            "addresses": len(self.macs),
        }

    def _reach(self, i: int) -> float:
        from ...model import radio

        ch = self.channel
        key = (float(ch.tx[i]), float(ch.gain[i]))
        if key not in self.reaches:
            self.reaches[key] = round(radio.reach_m(ch.prop, ch.freq, ch.phy, ch.noise_floor, *key), 1)
        return self.reaches[key]

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "move":
            self.move(request["positions"])
            return {"ok": True}
        if request.get("op") == "state":
            return self.state()
        if request.get("op") == "stations":
            self.join(request["stations"])
            return {"ok": True}
        raise ValueError(f"unknown request {request.get('op')!r}")

    def serve(self, control_path: str) -> None:
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        raw.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        with contextlib.suppress(OSError):
            raw.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: bursts wait in the socket, not lost
        raw.setblocking(False)
        door = Door(control_path)
        while True:
            due = self.channel.due()
            wait = None if due is None else max(0.0, (due - time.monotonic_ns()) / 1e9)
            # select, not poll: its timeout is in microseconds (poll's whole milliseconds added about 1 ms a hop)
            ready, _, _ = select.select([raw, door.bell], [], [], wait)
            if door.bell in ready:
                door.answer_all(self.answer)
            self._read(raw)
            for j, frame in self.channel.run(time.monotonic_ns()):
                with contextlib.suppress(OSError):  # a port gone down: lost, as on the air
                    raw.sendto(frame, (self.ports[j], 0))

    def _read(self, raw: socket.socket) -> None:
        now = time.monotonic_ns()
        for _ in range(_BATCH):
            try:
                frame, addr = raw.recvfrom(65536)
            except BlockingIOError:
                return
            i = self.index.get(addr[0])
            if i is None:
                continue
            source = frame[6:12]
            if self.macs.get(source) != i and not source[0] & 1:  # a group address is no one's
                self._learn(i, source)
            dst = -1 if frame[0] & 1 else self.macs.get(frame[0:6], -1)
            self.channel.arrive(i, frame, dst, now)

    def _learn(self, i: int, mac: bytes) -> None:
        """Station ``i`` sends from ``mac``: frames to it go to ``i``; a station owns at most MACS_PER_STATION
        addresses (the oldest forgotten), so a station spraying source addresses cannot grow the table."""
        before = self.macs.get(mac)
        if before is not None:
            self.owned[before].remove(mac)
        owned = self.owned[i]
        if len(owned) >= MACS_PER_STATION:
            del self.macs[owned.popleft()]
        owned.append(mac)
        self.macs[mac] = i


class Door:
    """The control socket, served by a thread of its own: it reads each request (at most REQUEST_BYTES, within
    REQUEST_SECONDS), hands it to the frame loop through a queue and rings ``bell``; the loop answers between
    frames and the thread writes the answer back (within REQUEST_SECONDS).  A slow, silent or oversized client
    costs the loop nothing, and other clients wait at most that long."""

    def __init__(self, path: str) -> None:
        self.requests: queue.Queue[tuple[dict[str, Any], queue.Queue[dict[str, Any]]]] = queue.Queue()
        self.bell, self._ring = socket.socketpair()
        self.bell.setblocking(False)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = path + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        listener.bind(tmp)
        os.chmod(tmp, 0o600)
        listener.listen(16)
        os.rename(tmp, path)  # it exists only once it listens
        threading.Thread(target=self._serve, args=(listener,), name="control", daemon=True).start()

    def answer_all(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """In the frame loop: answer every request waiting (``answer``: request -> reply)."""
        with contextlib.suppress(BlockingIOError):
            self.bell.recv(4096)
        while not self.requests.empty():
            request, reply = self.requests.get_nowait()
            try:
                reply.put(answer(request))
            except Exception as exc:  # a bad request is answered, never the medium's end
                reply.put({"error": f"{type(exc).__name__}: {exc}"})

    def _serve(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                try:
                    request = json.loads(_bounded_read(conn))
                    if not isinstance(request, dict):
                        raise ValueError("a request is a JSON object")
                except (OSError, ValueError) as exc:
                    answer = {"error": f"{type(exc).__name__}: {exc}"}
                else:
                    reply: queue.Queue[dict[str, Any]] = queue.Queue(1)
                    self.requests.put((request, reply))
                    self._ring.send(b".")
                    answer = reply.get()
                with contextlib.suppress(OSError):
                    conn.settimeout(REQUEST_SECONDS)
                    conn.sendall(json.dumps(answer).encode())


def _bounded_read(conn: socket.socket) -> bytes:
    """A client's whole request, up to its end of writing: refused past REQUEST_BYTES or REQUEST_SECONDS."""
    deadline = time.monotonic() + REQUEST_SECONDS
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"a request takes at most {REQUEST_SECONDS:g} s to send")
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            raise TimeoutError(f"a request takes at most {REQUEST_SECONDS:g} s to send") from None
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > REQUEST_BYTES:
            raise ValueError(f"a request is at most {REQUEST_BYTES} bytes")


if __name__ == "__main__":
    for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[threads] = "1"  # before numpy: BLAS threads would spin beside the medium's one loop for no gain
    with open(sys.argv[1]) as fh:
        settings = json.load(fh)
    with contextlib.suppress(OSError):
        os.nice(-5)  # on time, before the traffic it carries
    Medium(settings).serve(settings["control"])

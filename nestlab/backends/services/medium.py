"""The wireless medium's process: one per ``kind: wireless`` node, in that node's namespace, where each
station's link ends as an ordinary veth port (docs/wireless.md).

It reads every frame a station sends from one packet socket on all the namespace's ports, and hands it
to the channel (channel.py: airtime, collisions, loss); at each frame's end it writes it to the ports of
the stations that receive it.  A unix socket in the lab's folder (owner only) takes new positions and
answers what the medium holds (``nestlab node move``, mobility, ``inspect``).  Started with
``python -m nestlab.backends.services.medium CONFIG``; it ends with its node's namespace.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import math
import os
import select
import socket
import struct
import sys
import time
from typing import Any

from ... import names
from ...errors import LabError
from ..kernel import detached, files, namespaces

ETH_P_ALL = 0x0003
SOL_PACKET, PACKET_IGNORE_OUTGOING = 263, 23
SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO = 0x17, 0x1F, 0x24
_READY_S = 10.0
_BATCH = 512  # frames read before the channel runs again


def folder(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), "wireless")


def socket_path(lab: str, node: str) -> str:
    return os.path.join(folder(lab), f"{node}.sock")


def start(lab: str, node: str, config: dict[str, Any], popen) -> None:
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


def plain_frames(lab: str, node: str, iface: str) -> None:
    """No checksum or segmentation offload on a station's interface: what it sends is whole, checked frames
    (a packet socket hands on neither a partial checksum nor a 64 KB segment)."""
    with namespaces.entered(names.netns_path(lab, node)):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        for cmd in (ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO):
            value = array.array("I", [cmd, 0])
            request = struct.pack("16sP", iface.encode(), value.buffer_info()[0])
            with contextlib.suppress(OSError):  # an interface without the feature
                fcntl.ioctl(sock, SIOCETHTOOL, request)


# -- the process ---------------------------------------------------------------------------------------------
class Medium:
    """The running medium: ports, stations, channel and control socket."""

    def __init__(self, config: dict[str, Any]) -> None:
        import numpy as np

        from ...model import radio
        from ...model.wireless import Propagation, frequency
        from .channel import Channel

        self.stations = config["stations"]
        self.names = [s["name"] for s in self.stations]
        self.ports = [s["port"] for s in self.stations]
        self.index = {port: i for i, port in enumerate(self.ports)}
        self.by_name = {name: i for i, name in enumerate(self.names)}
        self.standard = config["standard"]
        pos = np.array([s["position"] for s in self.stations], dtype=float).reshape(-1, 3)
        self.channel = Channel(
            radio.PHYS[config["standard"]],
            Propagation(**config["propagation"]),
            frequency(config["standard"], config.get("channel")),
            config["noise_floor"],
            pos,
            np.array([s["tx_power"] for s in self.stations], dtype=float),
            np.array([s["antenna_gain"] for s in self.stations], dtype=float),
            queue=config.get("queue", 100),
        )
        self.macs: dict[bytes, int] = {}
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

    def state(self) -> dict[str, Any]:
        ch = self.channel
        pairs = [
            [self.names[i], self.names[j], ch.rate(i, j), round(float(ch.links.rx[i, j]), 1), round(ch.loss(i, j), 4)]
            for i in range(len(self.names))
            for j in ch.hears[i]
        ]
        stations = {
            name: {"port": self.ports[i], "position": ch.pos[i].round(3).tolist(), "tx_power": float(ch.tx[i]),
                   "antenna_gain": float(ch.gain[i]), "queued": len(ch.queues[i]), "reach_m": self._reach(i)}
            for i, name in enumerate(self.names)
        }  # fmt: skip
        return {
            "standard": self.standard,
            "top_rate": ch.phy.rates[-1][0],
            "stations": stations,
            "pairs": pairs,
            "counts": ch.counts,
            "moves": self.moves,
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
        raise ValueError(f"unknown request {request.get('op')!r}")

    def serve(self, control_path: str) -> None:
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        raw.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        with contextlib.suppress(OSError):
            raw.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: bursts wait in the socket, not lost
        raw.setblocking(False)
        ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = control_path + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        ctl.bind(tmp)
        os.chmod(tmp, 0o600)
        ctl.listen(16)
        os.rename(tmp, control_path)  # it exists only once it listens
        while True:
            due = self.channel.due()
            wait = None if due is None else max(0.0, due - time.monotonic())
            # select, not poll: its timeout is in microseconds (poll's whole milliseconds added about 1 ms a hop)
            ready, _, _ = select.select([raw, ctl], [], [], wait)
            if ctl in ready:
                self._control(ctl)
            self._read(raw)
            for j, frame in self.channel.run(time.monotonic()):
                with contextlib.suppress(OSError):  # a port gone down: lost, as on the air
                    raw.sendto(frame, (self.ports[j], 0))

    def _read(self, raw: socket.socket) -> None:
        now = time.monotonic()
        for _ in range(_BATCH):
            try:
                frame, addr = raw.recvfrom(65536)
            except BlockingIOError:
                return
            i = self.index.get(addr[0])
            if i is None:
                continue
            self.macs[frame[6:12]] = i
            dst = -1 if frame[0] & 1 else self.macs.get(frame[0:6], -1)
            self.channel.arrive(i, frame, dst, now)

    def _control(self, ctl: socket.socket) -> None:
        conn, _ = ctl.accept()
        with conn:
            conn.settimeout(2)
            try:
                data = b"".join(iter(lambda: conn.recv(65536), b""))
                reply = self.answer(json.loads(data))
            except Exception as exc:  # a bad request is answered, never the medium's end
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(reply).encode())


if __name__ == "__main__":
    for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[threads] = "1"  # before numpy: BLAS threads would spin beside the medium's one loop for no gain
    with open(sys.argv[1]) as fh:
        settings = json.load(fh)
    with contextlib.suppress(OSError):
        os.nice(-5)  # on time, before the traffic it carries
    Medium(settings).serve(settings["control"])

"""The wireless medium's process, without a lab: what a station's frames can make it hold (pure: no kernel state)."""

from __future__ import annotations

import os

from nestlab.backends.services import medium


def _medium(n: int) -> medium.Medium:
    stations = [
        {"name": f"s{i}", "port": f"p{i}", "position": [10.0 * i, 0, 0], "tx_power": 20.0, "antenna_gain": 0.0} for i in range(n)
    ]
    return medium.Medium({"standard": "802.11g", "propagation": {}, "noise_floor": -91.0, "stations": stations})


class _Port:
    """What the medium's packet socket would read: (frame, (port, ...)) tuples, then nothing."""

    def __init__(self, frames: list[tuple[bytes, str]]) -> None:
        self.frames = frames

    def recvfrom(self, _size: int) -> tuple[bytes, tuple[str, int]]:
        if not self.frames:
            raise BlockingIOError
        frame, port = self.frames.pop(0)
        return frame, (port, 0)


def _frame(dst: bytes, src: bytes) -> bytes:
    return dst + src + b"\x08\x00" + bytes(46)


def _sent_to(m: medium.Medium) -> list[int]:
    """The receiver of each frame the medium hands its channel from now on."""
    seen: list[int] = []
    arrive = m.channel.arrive
    m.channel.arrive = lambda i, frame, dst, now: (seen.append(dst), arrive(i, frame, dst, now))[1]  # type: ignore[method-assign]
    return seen


def test_a_station_spraying_source_addresses_does_not_grow_the_medium():
    """Root on a station sends 20 000 frames, each from a new MAC: the medium's table stays within what its
    stations may own, and frames to the other station's own address still reach it."""
    m = _medium(2)
    mine, theirs = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
    m._read(_Port([(_frame(theirs, mine), "p0"), (_frame(mine, theirs), "p1")]))
    for _ in range(40):
        sprayed = [(_frame(mine, b"\x02" + os.urandom(5)), "p1") for _k in range(500)]
        m._read(_Port(sprayed))
    assert len(m.macs) <= 2 * medium.MACS_PER_STATION, len(m.macs)
    assert m.state()["addresses"] == len(m.macs)
    sent = _sent_to(m)
    m._read(_Port([(_frame(mine, theirs), "p1")]))
    assert sent == [0]  # to s0's address: to s0, still known


def test_an_address_moves_to_the_station_that_sends_from_it_last():
    m = _medium(3)
    mac = bytes.fromhex("020000000009")
    m._read(_Port([(_frame(b"\xff" * 6, mac), "p0"), (_frame(b"\xff" * 6, mac), "p2")]))
    sent = _sent_to(m)
    m._read(_Port([(_frame(mac, bytes.fromhex("020000000001")), "p1")]))
    assert m.macs[mac] == 2 and sent == [2]
    assert mac not in m.owned[0]


def test_a_medium_whose_process_ended_is_told_from_one_that_is_stuck(tmp_path, monkeypatch):
    """No one listening at the control socket: the process ended, said with its log's last line; a socket that
    takes the request and never answers: stuck."""
    import socket

    monkeypatch.setattr(medium, "folder", lambda lab: str(tmp_path))
    (tmp_path / "air.log").write_text("Traceback (most recent call last):\n  ...\nMemoryError: out of memory\n\n")
    assert medium.trouble("wl", "air") == "its process has ended: MemoryError: out of memory; redeploy the lab to start it again"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stuck:
        stuck.bind(medium.socket_path("wl", "air"))
        stuck.listen(1)
        assert medium.trouble("wl", "air").startswith("not answering")


def test_a_pair_keeps_its_shadowing_when_a_station_joins_before_it_in_the_file():
    """The medium draws each pair's shadowing from the stations' names: a station listed first changes the
    indices of every other, not their pairs' signal."""

    def rx(names: list[str]) -> dict[tuple[str, str], float]:
        stations = [
            {"name": n, "port": f"p{n}", "position": [10.0 * int(n[1:]), 5.0, 0], "tx_power": 20.0, "antenna_gain": 0.0}
            for n in names
        ]
        m = medium.Medium(
            {
                "standard": "802.11g",
                "propagation": {"model": "log-normal", "sigma": 8},
                "noise_floor": -91.0,
                "stations": stations,
            }
        )
        return {(a, b): float(m.channel.links.rx[i, j]) for i, a in enumerate(names) for j, b in enumerate(names) if i != j}

    three, four = rx(["s0", "s1", "s2"]), rx(["s3", "s0", "s1", "s2"])
    assert all(four[pair] == value for pair, value in three.items()), (three, four)

"""Wireless media (kind: wireless, docs/wireless.md): stations in range reach each other, one far away does not
until it moves in; TCP gets an 802.11g rate, less from further away, and two senders share the air."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import NESTLAB, ROOT, leftovers, run_cli

from nestlab import Lab
from nestlab.engine import events
from nestlab.lab import wireless

THREE = (ROOT / "examples" / "wireless.yml").read_text().replace("name: wl", "name: {name}")


def _run(lab, node: str, args: list[str], timeout: float = 30) -> tuple[int, str]:
    proc = lab.nodes[node].popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def _ping(lab, node: str, to: str, count: int = 1, wait: int = 1) -> bool:
    return _run(lab, node, ["ping", "-c", str(count), "-W", str(wait), "-i", "0.2", to])[0] == 0


def test_stations_in_range_reach_each_other_and_a_far_one_moves_in(lab_from, lab_name):
    lab = lab_from(THREE)
    assert _ping(lab, "a", "10.70.0.2", count=3)
    assert not _ping(lab, "a", "10.70.0.3", count=2)  # 2.5 km: nothing at all
    shown = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json", check=True).stdout)
    air = next(n for n in shown["nodes"] if n["name"] == "air")
    assert air["wireless"]["stations"]["c"]["position"] == [2500.0, 0.0, 0.0]
    assert {(p[0], p[1]) for p in air["wireless"]["pairs"]} == {("a", "b"), ("b", "a")}
    moved = run_cli("node", "move", "--lab", lab_name, "c", "-60", "-0.5")  # negative coordinates, as typed
    assert moved.returncode == 0, moved.stderr
    assert wireless.state(lab, "air")["stations"]["c"]["position"] == [-60.0, -0.5, 0.0]
    start = time.monotonic()
    while not _ping(lab, "a", "10.70.0.3", wait=1):
        assert time.monotonic() - start < 2, "c moved within 60 m of a is not reachable within 2 s"
    pairs = {(p[0], p[1]): p[2] for p in wireless.state(lab, "air")["pairs"]}
    assert pairs[("a", "c")] > 0 and pairs[("a", "b")] > pairs[("a", "c")]  # closer: a faster rate


def test_bad_wireless_keys_are_located(topo_file):
    """An unknown standard and a position of four numbers: each at its file:line, exit 2, nothing made."""
    text = THREE.replace("a: {position: [0, 0]}", "a: {position: [0, 0, 0, 1]}").replace("802.11g", "802.11z")
    path = topo_file(text)
    line = {word: n for n, row in enumerate(text.splitlines(), 1) for word in ("air:", "a:") if row.strip().startswith(word)}
    result = run_cli("deploy", "-t", str(path))
    assert result.returncode == 2, result.stderr
    assert f"{path}:{line['air:']}:" in result.stderr and "802.11a" in result.stderr  # the standards it knows
    assert f"{path}:{line['a:']}:" in result.stderr and "[x, y] or [x, y, z]" in result.stderr
    assert leftovers() == []


def _iperf(lab, client: str, server: str, seconds: float = 3, port: int = 5201) -> float:
    """Mbit/s TCP from ``client`` to ``server`` (an iperf3 server started on ``server`` for it)."""
    srv = lab.nodes[server.split("@")[0]].popen(
        ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(0.3)
        address = server.split("@")[1]
        code, out = _run(lab, client, ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "--json"], seconds + 20)
        assert code == 0, out[-2000:]
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        srv.kill()
        srv.wait()


def _udp(lab, client: str, server: str, mbits: float, seconds: float = 2, port: int = 5201) -> float:
    """Mbit/s of UDP (1472-byte datagrams: 1514-byte frames) that ``server`` receives of ``mbits`` sent by ``client``."""
    node, address = server.split("@")
    srv = lab.nodes[node].popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        args = ["iperf3", "-u", "-c", address, "-p", str(port), "-b", f"{mbits}M", "-l", "1472", "-t", str(seconds), "--json"]
        code, out = _run(lab, client, args, seconds + 20)
        assert code == 0, out[-2000:]
        return json.loads(out[out.index("{") :])["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        srv.kill()
        srv.wait()


HT = """name: {name}
topology:
  nodes:
    air: {kind: wireless, standard: 802.11n, channel: 36}
    a: {position: [0, 0]}
    b: {position: [3, 0]}
  links:
    - endpoints: ["a:wlan0", "air:a"]
      ipv4: ["10.73.0.1/24", null]
    - endpoints: ["b:wlan0", "air:b"]
      ipv4: ["10.73.0.2/24", null]
"""


@pytest.mark.throughput
def test_an_80211n_pair_aggregates_and_carries_what_the_mac_model_says(lab_from):
    """802.11n HT20, one stream, 3 m apart (MCS 7, 65 Mbit/s): UDP in A-MPDUs of 28 frames with a block ACK each.
    The MAC model (tests/test_radio.py: one saturated sender, 5.484 ms PPDUs) gives 61.55 Mbit/s of 1514-byte
    frames, 59.8 of UDP payload; without aggregation the same pair carried 31.5."""
    lab = lab_from(HT)
    assert _ping(lab, "a", "10.73.0.2", count=2)
    got = _udp(lab, "a", "b@10.73.0.2", mbits=90)
    assert got == pytest.approx(59.8, rel=0.1), got
    counts = wireless.state(lab, "air")["counts"]
    assert counts["delivered"] > 15 * counts["attempts"], counts  # aggregates, not single frames


SPEED = """name: {name}
topology:
  nodes:
    air: {kind: wireless, standard: 802.11g, propagation: {model: log-distance, exponent: 3}}
    s: {position: [0, 0]}
    near: {position: [10, 0]}
    far: {position: [95, 0]}
    other: {position: [5, 5]}
  links:
    - endpoints: ["s:wlan0", "air:s"]
      ipv4: ["10.71.0.1/24", null]
    - endpoints: ["near:wlan0", "air:near"]
      ipv4: ["10.71.0.2/24", null]
    - endpoints: ["far:wlan0", "air:far"]
      ipv4: ["10.71.0.3/24", null]
    - endpoints: ["other:wlan0", "air:other"]
      ipv4: ["10.71.0.4/24", null]
"""


@pytest.mark.throughput
def test_a_station_made_anew_alone_still_carries_tcp(lab_from, topo_file):
    """b's link changed (its MTU): made anew while the medium runs on; b's new interface must lose its offloads too
    (else whole TCP segments and unfinished checksums reach the medium, and TCP dies)."""
    lab_from(THREE)
    changed = THREE.replace('["b:wlan0", "air:b"]\n', '["b:wlan0", "air:b"]\n      mtu: 1400\n')
    again = Lab.from_file(topo_file(changed, "b.yml"))
    changes = again.deploy().changes
    assert any(link.key == "air:b=b:wlan0" or "b:wlan0" in link.key for link in changes.add_links), "b's link is made anew"
    assert _iperf(again, "a", "b@10.70.0.2", seconds=2) > 5


def _medium_pid(lab_name: str) -> int:
    config = f"/{lab_name}/wireless/air.json".encode()
    pids = [
        int(p.name) for p in Path("/proc").iterdir()
        if p.name.isdigit() and _quiet_read(p / "cmdline").rstrip(b"\0").split(b"\0")[-1].endswith(config)
    ]  # fmt: skip
    assert len(pids) == 1, pids
    return pids[0]


TWO = THREE.replace("    c: {position: [2500, 0]}\n", "").replace(
    '    - endpoints: ["c:wlan0", "air:c"]\n      ipv4: ["10.70.0.3/24", null]\n', ""
)
WITH_D = TWO.replace("    b: {position: [40, 0]}\n", "    b: {position: [40, 0]}\n    d: {position: [0, 20]}\n") + (
    '    - endpoints: ["d:wlan0", "air:d"]\n      ipv4: ["10.70.0.4/24", null]\n'
)


@pytest.mark.throughput
def test_a_station_added_live_joins_the_running_medium_and_one_made_anew_keeps_its_traffic(lab_from, topo_file, lab_name):
    """A deploy that adds station d leaves the medium running (the same process; a's pings to b go on) and d is
    heard at once; d made anew alone (a sysctl changed) carries TCP (its new interface without offloads); a deploy
    that removes b takes b off the air."""
    lab = lab_from(TWO)
    pid = _medium_pid(lab_name)
    pings = lab.nodes["a"].popen(["ping", "-c", "25", "-i", "0.1", "-W", "1", "10.70.0.2"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    added = Lab.from_file(topo_file(WITH_D)).deploy().changes
    out, _ = pings.communicate(timeout=30)
    assert [n.name for n in added.add_nodes] == ["d"] and [n.name for n in added.retune] == ["air"], added.summary()
    assert _medium_pid(lab_name) == pid
    assert " 0% packet loss" in out, out
    assert _ping(lab, "a", "10.70.0.4", count=2)
    assert wireless.state(lab, "air")["stations"]["d"]["position"] == [0.0, 20.0, 0.0]
    anew = Lab.from_file(
        topo_file(WITH_D.replace("d: {position: [0, 20]}", "d: {position: [0, 20], sysctls: {net.ipv4.ip_forward: 1}}"))
    )
    assert [n.name for n in anew.deploy().changes.add_nodes] == ["d"]
    assert _iperf(anew, "a", "d@10.70.0.4", seconds=2) > 5
    removed = Lab.from_file(
        topo_file(
            WITH_D.replace("    b: {position: [40, 0]}\n", "").replace(
                '    - endpoints: ["b:wlan0", "air:b"]\n      ipv4: ["10.70.0.2/24", null]\n', ""
            )
        )
    )
    removed.deploy()
    after = wireless.state(removed, "air")
    assert set(after["stations"]) == {"a", "d"} and _medium_pid(lab_name) == pid
    assert not [pair for pair in after["pairs"] if "b" in pair[:2]], after["pairs"]  # silent and deaf: off the air


@pytest.mark.throughput
def test_tcp_gets_an_80211g_rate_less_from_afar_and_two_senders_share_the_air(lab_from):
    lab = lab_from(SPEED)
    near = _iperf(lab, "near", "s@10.71.0.1")
    far = _iperf(lab, "far", "s@10.71.0.1")
    assert 10 < near < 35, near  # 54 Mbit/s on the air is about 25-30 of TCP
    assert far < near / 2, (far, near)
    got: dict[str, float] = {}
    threads = [
        threading.Thread(target=lambda n=n, p=p: got.__setitem__(n, _iperf(lab, n, "s@10.71.0.1", port=p)))
        for n, p in (("near", 5202), ("other", 5203))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = sum(got.values())
    # one channel: together far less than twice what one gets alone (each would get about that on air of its own),
    # each clearly less than alone, and each a part of it
    assert together < 1.5 * near and max(got.values()) < 0.8 * near, (got, near)
    assert min(got.values()) > 0.2 * near, got


def test_run_plays_mobility_and_logs_each_move(topo_file, lab_name, tmp_path):
    """A trace written by `nestlab mobility random-waypoint` and a Gauss-Markov medium, played by `nestlab run`:
    each move in the event log, the last positions held by the media."""
    graph = run_cli("mobility", "random-waypoint", "--nodes", "2", "--duration", "1", "--step", "0.5", "--seed", "3", check=True)
    (tmp_path / "trace.yml").write_text(graph.stdout)
    text = (
        "name: {name}\ntopology:\n  nodes:\n"
        "    air: {kind: wireless, mobility: {model: trace, trace: trace.yml}}\n"
        "    sky: {kind: wireless, mobility: {model: gauss-markov, area: [50, 50], duration: 1, interval: 0.25}}\n"
        "    n1: {position: [0, 0]}\n    n2: {position: [10, 0]}\n    d: {position: [1, 1]}\n"
        '  links:\n    - endpoints: ["n1:wlan0", "air:n1"]\n    - endpoints: ["n2:wlan0", "air:n2"]\n'
        '    - endpoints: ["d:wlan0", "sky:d"]\n    - endpoints: ["n1:wlan1", "sky:n1"]\n'
    )
    path = topo_file(text)
    result = run_cli("run", "-t", str(path), "--keep")
    try:
        assert result.returncode == 0, result.stderr
        moves = [e["what"] for e in events.read(lab_name) if e["what"].get("action") == "move"]
        assert sum(m["medium"] == "air" for m in moves) == 3 and sum(m["medium"] == "sky" for m in moves) == 4, moves
        last = yaml.safe_load(graph.stdout)["steps"][-1]["positions"]
        held = wireless.state(Lab.running(lab_name), "air")["stations"]
        assert {n: held[n]["position"][:2] for n in last} == last
    finally:
        run_cli("destroy", "--lab", lab_name)


def _until(check, seconds: float) -> float | None:
    """Seconds until ``check()`` holds (None: not within ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.2)
    return None


def _via(lab, node: str, to: str) -> str | None:
    """The next hop ``node`` routes ``to`` through (None: no route, or on-link)."""
    out = _run(lab, node, ["ip", "-4", "route", "get", to])[1].split()
    return out[out.index("via") + 1] if "via" in out else None


@pytest.mark.skipif(not shutil.which("babeld"), reason="babeld is not installed (apt-get install babeld)")
def test_babel_mesh_reroutes_when_a_relay_moves_out_of_range(lab_from):
    """The example's 20-station Babel mesh: s0 reaches s19 over several hops; the relay it uses moves 5 km
    away, and Babel finds another path."""
    lab = lab_from((ROOT / "examples" / "wireless-mesh.yml").read_text().replace("mesh", "{name}"))
    far = "10.72.0.20"
    assert _until(lambda: _ping(lab, "s0", far), 45) is not None, _run(lab, "s0", ["ip", "route"])[1]
    relay = _via(lab, "s0", far)
    assert relay is not None, "s19 is several hops from s0"
    moved = {f"10.72.0.{i + 1}": f"s{i}" for i in range(20)}[relay]
    wireless.move(lab, {moved: [5000.0, 5000.0, 0.0]})
    took = _until(lambda: _via(lab, "s0", far) not in (None, relay) and _ping(lab, "s0", far), 45)
    assert took is not None, _run(lab, "s0", ["ip", "route"])[1]


@pytest.mark.skipif(not shutil.which("chromium"), reason="the live page is checked in Debian's chromium")
def test_live_page_draws_stations_where_they_are_and_follows_a_move(lab_from, lab_name):
    """Stations at their positions (c 62.5 times as far from a as b), a line per pair in range with its rate;
    after `nestlab node move`, c at its new place with a line to a."""
    from browser import Browser

    lab_from(THREE)
    server = subprocess.Popen(
        [*NESTLAB, "graph", "--lab", lab_name, "--serve", "--port", "0"], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    ratio = "cy.getElementById('c').position().x / cy.getElementById('b').position().x"
    try:
        url = server.stderr.readline().split(" at ")[1].split()[0]
        with Browser(url) as page:
            page.wait_for("window.cy && cy.getElementById('radio:a:b').length > 0")
            assert page.eval(ratio) == pytest.approx(2500 / 40)
            assert page.eval("cy.getElementById('radio:a:c').length") == 0
            assert page.eval("cy.getElementById('radio:a:b').data('caption')") == "36 Mbit/s"
            assert page.eval("cy.getElementById('range:air:a').width()") > 0
            run_cli("node", "move", "--lab", lab_name, "c", "60", "0", check=True)
            page.wait_for("cy.getElementById('radio:a:c').length > 0", timeout=5)
            assert page.eval(ratio) == pytest.approx(60 / 40)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_slow_control_client_holds_no_frame_and_is_cut_off(lab_from, lab_name):
    """A client of the medium's control socket that trickles its request (one byte every 0.5 s, never ending)
    delays no frame: pings across the medium keep their usual time; the medium cuts it off within its bound,
    refuses a request past its size bound, and still answers the next client."""
    from nestlab.backends.services import medium

    lab = lab_from(THREE)
    assert _ping(lab, "a", "10.70.0.2", count=2)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(medium.socket_path(lab_name, "air"))
    cut_off: list[float] = []

    def trickle() -> None:
        began = time.monotonic()
        with slow:
            while time.monotonic() - began < 8:
                try:
                    slow.send(b" ")
                except OSError:
                    break  # closed by the medium
                if select.select([slow], [], [], 0.5)[0]:
                    break  # its answer (a refusal) or its end
            cut_off.append(time.monotonic() - began)

    writer = threading.Thread(target=trickle)
    writer.start()
    try:
        code, out = _run(lab, "a", ["ping", "-c", "8", "-i", "0.2", "-W", "1", "10.70.0.2"])
        assert code == 0 and " 0% packet loss" in out, out
        worst = max(float(t) for t in re.findall(r"time=([\d.]+) ms", out))
        assert worst < 200, out  # the frame loop never waited on the slow client
    finally:
        writer.join()
    assert cut_off and cut_off[0] < medium.REQUEST_SECONDS + 1.5, cut_off
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as big:
        big.connect(medium.socket_path(lab_name, "air"))
        with contextlib.suppress(OSError):  # the medium may stop reading once it has seen too much
            big.sendall(b" " * (medium.REQUEST_BYTES + 65536))
            big.shutdown(socket.SHUT_WR)
        big.settimeout(5)
        assert b"at most" in big.recv(4096)
    assert wireless.state(lab, "air")["stations"]["a"]["position"] == [0.0, 0.0, 0.0]


def test_a_medium_that_ended_is_named_by_inspect_and_check(lab_from, lab_name):
    """The medium's process dies: `nestlab inspect` says it ended (not merely "not answering") and `nestlab check`
    names it and exits 1."""
    lab = lab_from(THREE + "checks:\n  - reach: {from: a, to: 10.70.0.2}\n")
    held = run_cli("check", "--lab", lab_name, "--wait", "10")
    assert held.returncode == 0, held.stderr
    config = f"/{lab_name}/wireless/air.json".encode()
    pids = [
        int(p.name) for p in Path("/proc").iterdir()
        if p.name.isdigit() and _quiet_read(p / "cmdline").rstrip(b"\0").split(b"\0")[-1].endswith(config)
    ]  # fmt: skip
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    gone = lambda: not Path(f"/proc/{pids[0]}").exists() or b") Z " in _quiet_read(Path(f"/proc/{pids[0]}/stat"))  # noqa: E731
    assert _until(gone, 5) is not None
    shown = json.loads(run_cli("inspect", "--lab", lab_name, "--format", "json", check=True).stdout)
    air = next(n for n in shown["nodes"] if n["name"] == "air")
    assert "has ended" in air["wireless"]["error"], air
    checked = run_cli("check", "--lab", lab_name, "--wait", "1")
    assert checked.returncode == 1 and "wireless medium air is down: its process has ended" in checked.stderr, checked.stderr
    assert _ping(lab, "a", "10.70.0.2") is False


def _quiet_read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""

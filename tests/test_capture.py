"""nestlab capture: packets from inside nodes as pcapng, read back with a pcapng reader and with tshark."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from conftest import NESTLAB, ROOT, run_cli
from pcapng import FileScanner, blocks

LAB = """name: {name}
hosts: {server: {}}
topology:
  nodes: {a: {host: server}, b: {host: server}, sw: {kind: bridge, host: server}}
  links:
    - {endpoints: ["a:eth1", "sw:pa"], ipv4: ["10.7.0.1/24", null]}
    - {endpoints: ["b:eth1", "sw:pb"], ipv4: ["10.7.0.2/24", null]}
"""


def _packets(path):
    """(interface name, ICMP type) of every packet, and the interfaces, read with python-pcapng."""
    interfaces, found = [], []
    with open(path, "rb") as fh:
        for block in FileScanner(fh):
            if isinstance(block, blocks.InterfaceDescription):
                interfaces.append(block.options["if_name"])
            elif isinstance(block, blocks.EnhancedPacket):
                data = block.packet_data
                assert data[12:14] == b"\x08\x00" and data[23] == 1, "the filter lets only ICMP over IPv4 through"
                found.append((interfaces[block.interface_id], data[34], block.timestamp))
    return interfaces, found


def _capture(lab, *args):
    return subprocess.Popen(
        [*NESTLAB, "capture", "--lab", lab.name, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _wait_capturing(proc):
    line = proc.stderr.readline().decode()
    assert line.startswith("capturing on"), line


def test_capture_exactly_the_echo_requests_and_replies(lab_from, tmp_path):
    lab = lab_from(LAB)
    out = tmp_path / "ping.pcapng"
    proc = _capture(lab, "a:eth1", "-f", "icmp", "-c", "6", "-w", str(out))
    _wait_capturing(proc)
    lab.nodes["a"].cmd("ping -c 3 -i 0.2 10.7.0.2", check=True)
    lab.nodes["a"].cmd("ping -c 2 -i 0.2 -s 1 10.7.0.99")  # unanswered: more requests, if the count were not reached
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    interfaces, packets = _packets(out)
    assert interfaces == ["a:eth1"]
    assert [kind for _, kind, _ in packets] == [8, 0, 8, 0, 8, 0], "three echo requests, each followed by its reply"
    times = [t for _, _, t in packets]
    assert times == sorted(times) and times[-1] - times[0] == pytest.approx(0.4, abs=0.15), "kernel timestamps, 0.2 s apart"
    if shutil.which("tshark"):
        listing = subprocess.run(
            ["tshark", "-r", str(out), "-T", "fields", "-e", "icmp.type"], capture_output=True, text=True, check=True
        )
        assert listing.stdout.split() == ["8", "0", "8", "0", "8", "0"]


def test_a_whole_link_into_one_file_through_a_pipe(lab_from, tmp_path):
    """Both ends of a link (a node and a switch port), streamed to standard output."""
    lab = lab_from(LAB)
    out = tmp_path / "link.pcapng"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [*NESTLAB, "capture", "--lab", lab.name, "b:eth1", "--link", "-f", "icmp", "-d", "3", "-w", "-"],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.PIPE,
        )
        _wait_capturing(proc)
        lab.nodes["a"].cmd("ping -c 2 -i 0.2 10.7.0.2", check=True)
        assert proc.wait(timeout=30) == 0
    interfaces, packets = _packets(out)
    assert interfaces == ["b:eth1", "sw:pb"]
    for iface in interfaces:
        assert sorted(kind for name, kind, _ in packets if name == iface) == [0, 0, 8, 8], iface


def test_capture_errors_are_clear(lab_from):
    lab = lab_from(LAB)
    for args, message in (
        (["a:eth9", "-w", "-"], "a has no interface 'eth9'"),
        (["zz:eth1", "-w", "-"], "no running node, switch or host 'zz'"),
        (["a:eth1", "-f", "icmp and and", "-w", "-"], "capture filter 'icmp and and'"),
        (["a:eth1"], "-w FILE.pcapng"),
    ):
        result = run_cli("capture", "--lab", lab.name, *args)
        assert result.returncode == 1 and message in result.stderr, (args, result.stderr)


def test_capture_stops_after_its_duration_with_a_complete_file(lab_from, tmp_path):
    lab = lab_from(LAB)
    out = tmp_path / "quiet.pcapng"
    started = time.monotonic()
    result = run_cli("capture", "--lab", lab.name, "sw:pa", "-f", "tcp port 9", "-d", "1", "-w", str(out))
    assert result.returncode == 0 and 0.9 < time.monotonic() - started < 30
    assert _packets(out) == (["sw:pa"], [])

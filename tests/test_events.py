"""nestlab events: one stream of kernel and nestlab events of a lab, live and replayed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from conftest import NESTLAB, ROOT, run_cli

from nestlab.engine import events
from nestlab.lab.schedule import play

FLAP = """name: {name}
topology:
  nodes: {a: {}, b: {}, c: {}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
    - endpoints: ["b:eth2", "c:eth1"]
schedule:
  - {at: 1s, link: ["a:eth1", "b:eth1"], state: down}
  - {at: 2s, link: ["a:eth1", "b:eth1"], state: up}
"""


def _stream(lab):
    proc = subprocess.Popen(
        [*NESTLAB, "events", "--lab", lab.name, "--format", "json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr.readline().startswith("streaming events of lab"), "the stream is listening"
    return proc


def _stop(proc) -> list[dict]:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.throughput
def test_a_scheduled_flap_yields_exactly_its_down_and_up_events(lab_from):
    lab = lab_from(FLAP)
    proc = _stream(lab)
    try:
        play(lab)
        time.sleep(0.5)
    finally:
        seen = _stop(proc)
    flaps = [
        (e["node"], e["event"], e["time"])
        for e in seen
        if e.get("interface") == "eth1" and e["node"] in ("a", "b") and e["event"] in ("up", "down")
    ]
    assert {(n, ev) for n, ev, _ in flaps[:2]} == {("a", "down"), ("b", "down")}, flaps
    assert {(n, ev) for n, ev, _ in flaps[2:]} == {("a", "up"), ("b", "up")} and len(flaps) == 4, flaps
    assert not [e for e in seen if e["node"] == "c" and e["event"] in ("up", "down")], "the other link did not move"
    scheduled = [e["scheduled"] for e in events.read(lab.name)]
    assert len(scheduled) == 2
    for (_, _, at), when in zip(flaps, [scheduled[0]] * 2 + [scheduled[1]] * 2):
        assert 0 <= at - when <= 0.010, f"an event {1000 * (at - when):.1f} ms after its scheduled time"
    changes = [e for e in seen if e["event"] == "change"]
    assert [c["what"]["state"] for c in changes] == ["down", "up"]


def test_processes_nodes_and_replay(lab_from):
    lab = lab_from(FLAP.split("schedule:")[0])
    proc = _stream(lab)
    try:
        lab.nodes["c"].cmd("sh -c 'exit 3'")
        run_cli("link", "set", "--lab", lab.name, "b:eth2", "c:eth1", "--rate", "10mbit", check=True)
        lab.nodes["a"].cmd("ip addr add 192.0.2.7/32 dev eth1", check=True)
        time.sleep(0.6)
        lab.destroy()
        out, _ = proc.communicate(timeout=30)  # the stream ends by itself with its lab
        seen = [json.loads(line) for line in out.splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
    exits = [e for e in seen if e["event"] == "process-exited" and e["node"] == "c" and e["command"] == "sh"]
    assert exits and exits[0]["exit_code"] == 3
    assert any(e["event"] == "address-added" and e["address"] == "192.0.2.7/32" and e["node"] == "a" for e in seen)
    assert [e["what"]["set"] for e in seen if e["event"] == "change"] == [{"rate": "10mbit"}]
    assert {e["node"] for e in seen if e["event"] == "node-stopped"} == {"a", "b", "c"}
    assert seen[-1]["event"] == "lab-destroyed", "the stream ends with its lab"


def test_since_replays_the_log(lab_from):
    lab = lab_from(FLAP)
    play(lab)
    replay = run_cli(
        "events", "--lab", lab.name, "--since", "0", "--no-follow", "--format", "json", check=True
    ).stdout.splitlines()
    states = [json.loads(line)["what"]["state"] for line in replay]
    assert states == ["down", "up"]
    recent = run_cli("events", "--lab", lab.name, "--since", "600s", "--no-follow", check=True).stdout
    assert recent.count("change") == 2 and "down" in recent
    assert run_cli("events", "--lab", lab.name, "--since", "soon", "--no-follow").returncode == 1


def test_a_stream_with_a_duration_ends_on_time_in_a_quiet_lab(lab_from):
    """-d ends the stream when its time is up, even when nothing happens (a relay waits for it to end)."""
    lab = lab_from(FLAP.split("schedule:")[0])
    started = time.monotonic()
    done = run_cli("events", "--lab", lab.name, "--format", "json", "-d", "1.5", timeout=30)
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert 1.5 <= took < 10, took

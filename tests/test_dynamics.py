"""MANET dynamics: a visibility graph drives radio links up and down; the random-waypoint generator."""

from __future__ import annotations

import itertools
import subprocess
import threading
import time

import yaml
from conftest import run_cli

from nestlab.engine import events
from nestlab.lab.schedule import play
from nestlab.model.visibility import in_range, load, random_waypoint

GRAPH = """steps:
  - {t: 0s, edges: [[n1, n2], [n3, n4]]}
  - {t: 3s, edges: [[n1, n3]]}
  - {t: 6s, positions: {n1: [0, 0], n2: [100, 0], n3: [300, 0], n4: [150, 0]}, range: 120}
"""
EXPECTED = [
    {("n1", "n2"), ("n3", "n4")},
    {("n1", "n3")},
    {("n1", "n2"), ("n2", "n4")},  # n1-n2: 100 m, n2-n4: 50 m, n1-n4: 150 m, n3-n4: 150 m
]


def reachable(lab) -> set[tuple[str, str]]:
    """Pairs whose radio link carries a ping right now (all pings run at once)."""
    procs = {}
    for a, b in itertools.combinations(sorted(lab.nodes), 2):
        target = lab.nodes[b].intf(f"v-{a}").ip
        procs[(a, b)] = lab.nodes[a].popen(["ping", "-c1", "-W1", target], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {pair for pair, proc in procs.items() if proc.wait(timeout=10) == 0}


def test_visibility_graph_drives_links(tmp_path, lab_from):
    (tmp_path / "graph.yml").write_text(GRAPH)
    lab = lab_from("name: {name}\ntopology:\n  nodes: {n1: {}, n2: {}, n3: {}, n4: {}}\ndynamics: {graph: graph.yml}\n")
    assert reachable(lab) == set(), "radio links start down"
    player = threading.Thread(target=play, args=(lab,))
    started = time.monotonic()
    player.start()
    seen = []
    for at in (0.8, 3.8, 6.8):  # inside each step
        time.sleep(max(0.0, started + at - time.monotonic()))
        seen.append(reachable(lab))
    player.join()
    assert seen == EXPECTED
    logged = events.read(lab.name)
    assert len(logged) == 2 + 3 + 3  # ups at 0 s; 3 changes at 3 s; 3 at 6 s
    assert all(e["latency_ms"] < 50 and e["applied"] >= e["scheduled"] for e in logged)


def test_graph_from_positions_and_range():
    assert in_range({"a": [0, 0], "b": [3, 4], "c": [10, 0]}, 5) == {frozenset(("a", "b"))}


def test_random_waypoint_is_reproducible_and_in_bounds(tmp_path):
    result = run_cli(
        "mobility",
        "random-waypoint",
        "--nodes",
        "5",
        "--area",
        "500x300",
        "--range",
        "100",
        "--duration",
        "20",
        "--seed",
        "7",
        check=True,
    )
    data = yaml.safe_load(result.stdout)
    assert data == yaml.safe_load(yaml.safe_dump(random_waypoint(5, 500, 300, 100, 20, seed=7)))
    assert len(data["steps"]) == 21
    for step in data["steps"]:
        assert all(0 <= x <= 500 and 0 <= y <= 300 for x, y in step["positions"].values())
    path = tmp_path / "g.yml"
    path.write_text(result.stdout)
    steps = load(path, [f"n{i}" for i in range(1, 6)])
    assert [s.at for s in steps] == [float(i) for i in range(21)]

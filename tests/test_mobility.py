"""Wireless mobility models (pure): stations stay in their area at their speeds; traces are read as written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nestlab.model.errors import TopologyError
from nestlab.model.mobility import steps
from nestlab.model.wireless import Mobility

START = {f"s{i}": [10.0 * i, 50.0, 0.0] for i in range(10)}


@pytest.mark.parametrize("model", ["random-waypoint", "random-walk", "gauss-markov"])
def test_stations_move_within_their_area_no_faster_than_allowed(model):
    spec = Mobility(model=model, area=[100, 100], speed=[2, 8], interval=0.1, duration=30, seed=5)
    moves = steps(spec, START, Path("."))
    assert len(moves) == 300 and moves[0][0] == pytest.approx(0.1) and moves[-1][0] == pytest.approx(30.0)
    previous = START
    for _, where in moves:
        for name, (x, y, z) in where.items():
            assert -0.01 <= x <= 100.01 and -0.01 <= y <= 100.01 and z == 0.0
            step = math.dist(where[name][:2], previous[name][:2])
            assert step <= 8 * 0.1 + 0.02, (model, name, step)  # positions are to the cm; an edge only shortens it
        previous = where
    assert any(math.dist(moves[-1][1][n][:2], START[n][:2]) > 5 for n in START), "they moved"


def test_gauss_markov_with_full_memory_goes_straight():
    spec = Mobility(model="gauss-markov", area=[10_000, 10_000], speed=[5, 5], alpha=1.0, duration=10, interval=1)
    moves = steps(spec, {"a": [5000.0, 5000.0, 0.0]}, Path("."))
    path = [w["a"][:2] for _, w in moves]
    assert math.dist(path[0], path[-1]) == pytest.approx(5 * 9, rel=1e-3)  # 10 steps of 5 m, in one line


def test_only_the_named_stations_move():
    spec = Mobility(model="random-walk", stations=["s1"], duration=1, interval=0.5)
    assert {n for _, where in steps(spec, START, Path(".")) for n in where} == {"s1"}


def test_a_trace_is_read_and_a_bad_one_refused(tmp_path):
    (tmp_path / "t.yml").write_text("steps:\n  - {t: 0s, positions: {a: [1, 2]}}\n  - {t: 1.5s, positions: {a: [3, 4, 5]}}\n")
    spec = Mobility(model="trace", trace="t.yml")
    assert steps(spec, {"a": [0, 0, 0]}, tmp_path) == [(0.0, {"a": [1.0, 2.0, 0.0]}), (1.5, {"a": [3.0, 4.0, 5.0]})]
    (tmp_path / "t.yml").write_text("steps:\n  - {t: 0s, edges: [[a, b]]}\n")
    with pytest.raises(TopologyError, match="positions"):
        steps(spec, {"a": [0, 0, 0]}, tmp_path)
    with pytest.raises(ValueError, match="model: trace needs trace"):
        Mobility(model="trace")


def test_each_model_the_schema_names_has_an_implementation_and_an_unknown_one_is_refused_where_it_is_written(tmp_path):
    """The models are a table (model/mobility.py: MODELS) holding exactly the schema's words; any other word is
    refused when the file loads, at its line and column."""
    from typing import get_args

    from nestlab.model.load import load_file
    from nestlab.model.mobility import MODELS

    assert set(MODELS) == set(get_args(Mobility.model_fields["model"].annotation))
    topo = tmp_path / "lab.yml"
    topo.write_text(
        "name: moving\ntopology:\n  nodes:\n    air:\n      kind: wireless\n      mobility: {model: levy-walk}\n"
        "    a: {}\n  links:\n    - endpoints: [a:wlan0, air:a]\n"
    )
    with pytest.raises(TopologyError) as refused:
        load_file(str(topo))
    assert [p.render(refused.value.source) for p in refused.value.problems][0].startswith(f"{topo}:6:")
    assert "levy-walk" in str(refused.value.problems[0].message)

"""The scenario engine: a suite is a topology template, a parameter matrix, repetitions and a duration.

Cells that share a topology (``Suite.lab_key``) share one deployed lab; every repetition of
every cell is measured by ``Suite.measure``, which returns rows (one per pair, plus the
aggregate as pair ``"all"``).  A measurement whose tool fails becomes an ``error`` row and
the run goes on (iperf3's control connection can starve under many UDP pairs, as seed 002 saw).  Results are written as they are: Ctrl-C stops after the
current measurement, keeps every finished cell, destroys the lab and still writes the report.
"""

from __future__ import annotations

import errno
import itertools
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import LabError
from ..lab.fidelity import Verdict, Watch
from . import report, results, stats
from .suite import Axes, Cell, Recorder, Row, Suite


def cells(axes: Axes) -> list[Cell]:
    """Every cell of the matrix (the product of its axes), or of each matrix in a list."""
    if isinstance(axes, list):
        return [cell for matrix in axes for cell in cells(matrix)]
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))]


def _key(cell: Cell) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in cell.items()))


def summary(cell: Cell, rows: list[Row], verdicts: list[dict]) -> dict | None:
    """One cell's figures' mean and 95 % interval over its repetitions (the aggregate rows, ``pair: all``) and its
    fidelity (the worst repetition's, every reason, each repetition's figures); None while nothing was measured."""
    mine = [r for r in rows if not r.get("error")]
    if not mine:
        return None
    values: dict[str, list[float]] = {}
    for row in [r for r in mine if r.get("pair") == "all"] or mine:
        for k, v in row.items():
            if k not in cell and k != "rep" and isinstance(v, int | float) and not isinstance(v, bool):
                values.setdefault(k, []).append(float(v))
    figures = {}
    for k, vs in values.items():
        s = stats.summarize(vs)
        figures[k] = {"mean": s["mean"], "ci95": [s["ci95_low"], s["ci95_high"]], "n": s["n"]}
    return {"cell": cell, "figures": figures, "fidelity": {**Verdict.worst(verdicts), "measurements": verdicts}}


def run(
    suite: Suite,
    out: Path,
    *,
    quick: bool = False,
    reps: int | None = None,
    duration: float | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Run the suite into ``out`` (a new folder); returns it.  Writes results.json/csv, raw/ and report.html."""
    out.mkdir(parents=True, exist_ok=False)
    reps = reps or (suite.quick_reps if quick else suite.reps)
    duration = duration or (suite.quick_duration if quick else suite.duration)
    todo = cells(suite.quick_axes if quick else suite.axes)
    skipped = [(cell, why) for cell in todo if (why := suite.unavailable(cell))]
    todo = [cell for cell in todo if not suite.unavailable(cell)]
    recorder = Recorder(out)
    rows: list[Row] = []
    # Per cell, in the matrix's order: its rows, each repetition's fidelity verdict, and its summary (remade
    # when the cell gains a measurement: the cell alone, not the whole run, is summed again).
    order = [_key(cell) for cell in todo]
    cell_rows: dict[tuple, list[Row]] = {}
    verdicts: dict[tuple, list[dict]] = {}
    summaries: dict[tuple, dict] = {}
    meta = results.machine() | {
        "suite": suite.name,
        "title": suite.title,
        "paper": suite.paper,
        "quick": quick,
        "reps": reps,
        "duration_s": duration,
        "cells": len(todo),
        "skipped": [{"cell": c, "why": w} for c, w in skipped],
        "started": time.time(),
        "interrupted": True,  # until every cell is done: what is written part-way says so
    }
    total, done = len(todo) * reps, 0
    groups: dict[tuple, list[Cell]] = {}
    for cell in todo:
        groups.setdefault(suite.lab_key(cell), []).append(cell)
    try:
        for group in groups.values():
            lab = suite.build(group[0])
            try:
                lab.deploy()
                for rep in range(reps):
                    for cell in group:
                        key, columns = _key(cell), {}
                        try:
                            with Watch(lab) as watch:
                                measured = suite.measure(lab, cell, duration, recorder)
                        except (LabError, ValueError) as exc:  # a tool failed in this cell: record it, go on
                            measured = [{"pair": "all", "error": str(exc)[:300]}]
                        else:
                            verdicts.setdefault(key, []).append({"rep": rep, **watch.verdict.to_json()})
                            columns = {"fidelity": watch.verdict.level, "fidelity_reasons": "; ".join(watch.verdict.reasons)}
                        new = [{**cell, "rep": rep, **row, **columns} for row in measured]
                        rows += new
                        cell_rows.setdefault(key, []).extend(new)
                        if (made := summary(cell, cell_rows[key], verdicts.get(key, []))) is not None:
                            summaries[key] = made
                        done += 1
                        results.write(out, meta, rows, [summaries[k] for k in order if k in summaries])  # kept at once
                        if progress:
                            progress(", ".join(f"{k}={v}" for k, v in cell.items()), done, total)
            finally:
                lab.destroy()
        meta["interrupted"] = False
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise LabError(
            f"the disk holding {out} is full: stopped after {done} of {total} measurements; "
            f"results.json keeps those finished before it filled"
        ) from None
    finally:
        meta["finished"] = time.time()
        meta["commands"] = sorted(set(recorder.commands))
        try:
            results.write(out, meta, rows, [summaries[k] for k in order if k in summaries])
            report.render(out, suite)
        except OSError as exc:
            if exc.errno != errno.ENOSPC or not meta["interrupted"]:
                raise
    return out
